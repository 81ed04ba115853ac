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


INIT_PAGE = (
    "<html><head><title>tool-init</title></head><body><h1>tool-init</h1>"
    "<h2>Options</h2><dl>"
    "<dt>--shared</dt><dd><p>Choose whether the repository you create is shared with "
    "a group, and give the group's name.</p></dd>"
    "<dt>--quiet</dt><dd><p>Only print error and warning messages; all other output "
    "will be suppressed.</p></dd>"
    "<dt>--bare</dt><dd><p>Create a bare repository. If the environment variable is not "
    "set, it is set to the current working directory.</p></dd>"
    "<dt>--template=&lt;dir&gt;</dt><dd><p>Specify the directory from which templates "
    "will be used.</p></dd>"
    "<dt>--separate-dir=&lt;dir&gt;</dt><dd><p>Instead of initializing the repository as "
    "a directory, create a text file there containing the path to the actual "
    "repository.</p></dd>"
    "<dt>--object-format=&lt;format&gt;</dt><dd><p>Specify the given object format (hash "
    "algorithm) for the repository. The valid values are sha1 and sha256.</p></dd>"
    "<dt>-b &lt;branch-name&gt;</dt><dt>--initial-branch=&lt;branch-name&gt;</dt><dd><p>Use "
    "the specified name for the initial branch in the newly created repository.</p></dd>"
    "</dl></body></html>")
BRANCH_PAGE = (
    "# Branches\n\nA branch is a name for a line of development. When you create a branch, "
    "the name of the branch is chosen by you; the first commit on a new branch is its "
    "first. A repository has many branches, and each branch has a name.\n")


@pytest.mark.usefixtures("semantic_on")
def test_the_sentence_nearest_in_meaning_is_shown_though_it_shares_few_words(
    tmp_path: Path,
) -> None:
    """"The name of the first branch when I create a new repository" is answered by
    "the initial branch in the newly created repository", the last of a page's options:
    its sentence is compared with the question, shown in the snippet and quoted, though
    another page repeats the question's words."""
    from coordinator.lead.extractive import extractive_answer
    from tests.subagents.research.test_answers_found import _finding, _report

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tool-init.html").write_text(INIT_PAGE)
    (docs / "branches.md").write_text(BRANCH_PAGE)
    question = "How do I choose the name of the first branch when I create a new repository?"
    index = DocIndex.for_folder(docs, tmp_path / "store")
    index.refresh()
    found = index.find(question, 5)
    index.close()
    init = [r for r in found.results if r["path"] == "tool-init.html"]
    assert init and "initial branch" in init[0]["snippet"], found.results
    assert "sentence_similarity" in init[0]
    text, _ = extractive_answer(_report(question, _finding(found.results)))
    assert text is not None and "initial branch in the newly created repository" in text
