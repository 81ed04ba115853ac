"""Hybrid document search: embeddings computed at index time for changed files only, kept
beside the FTS index, fused with bm25; lexical, and saying so, when turned off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagents.research.docindex import DocIndex

embedding = pytest.importorskip("subagents.research.embedding")
REASON = embedding.semantic_unavailable_reason()
pytestmark = pytest.mark.skipif(
    REASON is not None and not os.environ.get("CI"),
    reason=f"the semantic extra is not installed ({REASON}); in CI this test fails instead")


@pytest.fixture
def semantic_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hybrid search for this test (the suite runs lexical: tests/conftest.py)."""
    monkeypatch.delenv("FANOUT_SEMANTIC", raising=False)


def _folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "push.md").write_text(
        "# Pushing\n\nUse git push --delete origin topic to remove a branch from the server.\n")
    (docs / "cats.md").write_text("# Cats\n\nThe cat sat on the mat and purred all day long.\n")
    return docs


@pytest.mark.usefixtures("semantic_on")
def test_passages_are_embedded_at_index_time_and_only_when_they_change(
    tmp_path: Path,
) -> None:
    """The first refresh embeds every passage; a refresh after one file changed embeds
    that file's passages only; the stats say the search is semantic."""
    docs = _folder(tmp_path)
    index = DocIndex.for_folder(docs, tmp_path / "store")
    first = index.refresh()
    assert first.embedded == first.passages > 0
    assert first.search.startswith("semantic: all-MiniLM-L6-v2")
    (docs / "cats.md").write_text("# Cats\n\nThe cat slept on the sofa.\n")
    again = index.refresh()
    assert again.updated == 1 and again.embedded == 1
    assert index.refresh().embedded == 0
    index.close()


@pytest.mark.usefixtures("semantic_on")
def test_a_passage_near_in_meaning_is_found_without_a_shared_word(tmp_path: Path) -> None:
    """A query sharing no word with the index still finds the passage nearest in meaning,
    and the judgement of the search is semantic."""
    index = DocIndex.for_folder(_folder(tmp_path), tmp_path / "store")
    index.refresh()
    found = index.find("erasing something stored remotely", 5)
    assert found.results and found.match["by"] == "semantic"
    assert all("similarity" in r for r in found.results)
    assert found.results[0]["path"] == "push.md"
    index.close()


def test_semantic_off_is_lexical_and_says_so(tmp_path: Path) -> None:
    """docs.semantic: off (or FANOUT_SEMANTIC=off) embeds nothing and searches by words."""
    index = DocIndex.for_folder(_folder(tmp_path), tmp_path / "store", semantic="off")
    stats = index.refresh()
    assert stats.embedded == 0 and stats.search.startswith("lexical")
    found = index.find("remove a branch from the server", 5)
    assert found.match["by"] == "terms" and "similarity" not in found.results[0]
    index.close()
