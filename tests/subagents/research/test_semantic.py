"""Hybrid document search: embeddings computed at index time for changed files only, kept
beside the FTS index, fused with bm25; lexical, and saying so, when turned off."""

from __future__ import annotations

import os
import sqlite3
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


LONG_PAGE = (
    "# Stash\n\n## Commands\n\n"
    + "".join(f"Entry {k} records notes about the weather of day {k} in the garden, the "
              "rain and the sun, and what the birds sang. " for k in range(12))
    + "\n\nTo take your saved work back out while leaving the saved copy in place, use "
      "the apply command.\n")


@pytest.mark.usefixtures("semantic_on")
def test_a_long_passage_is_embedded_by_its_pieces_and_found_where_it_answers(
    tmp_path: Path,
) -> None:
    """A passage longer than the model reads (128 word pieces) is embedded piece by
    piece: the sentence at its end, which shares no word with the query, is in the
    nearest piece; the result says where each piece sits in the snippet and how near it
    is, and the extractive answer quotes it."""
    from coordinator.lead.extractive import extractive_answer
    from shared.envelope import Finding, ToolResult
    from subagents.research.docwriter import PIECE_CHARS
    from tests.subagents.research.test_answers_found import _report

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "stash.md").write_text(LONG_PAGE)
    index = DocIndex.for_folder(docs, tmp_path / "store")
    stats = index.refresh()
    assert stats.embedded == stats.passages
    conn = sqlite3.connect(index.db_path)
    spans = conn.execute("SELECT passage, start, end FROM vectors").fetchall()
    conn.close()
    assert len(spans) > stats.passages  # more pieces than passages
    assert all(end - start <= PIECE_CHARS for _, start, end in spans)
    question = "How can I restore stashed changes without dropping them?"
    found = index.find(question, 5)
    index.close()
    top = found.results[0]
    assert "apply command" in top["snippet"]
    pieces = top["pieces"]
    assert pieces and all(0 <= s < e <= len(top["snippet"]) for s, e, _ in pieces)
    start, end, sim = max(pieces, key=lambda p: p[2])
    assert "apply command" in top["snippet"][start:end]
    assert top["similarity"] == sim

    finding = Finding.from_result(ToolResult.success("docs.search", {"results": [top]},
                                                     trace_id="tr_1"), {})
    text, _ = extractive_answer(_report(question, finding))
    assert text is not None and "use the apply command" in text, text


@pytest.mark.usefixtures("semantic_on")
def test_an_index_of_the_last_version_keeps_its_text_and_is_embedded_again(
    tmp_path: Path,
) -> None:
    """An index made before passages were embedded by pieces (version 5: one vector a
    passage) is not made anew: its text stays and its passages are embedded again."""
    from subagents.research.docwriter import PIECES_FROM, SCHEMA_VERSION

    docs = _folder(tmp_path)
    index = DocIndex.for_folder(docs, tmp_path / "store")
    first = index.refresh()
    index.close()
    conn = sqlite3.connect(index.db_path)
    conn.executescript(
        "DROP TABLE vectors; CREATE TABLE vectors (passage INTEGER PRIMARY KEY, vec BLOB "
        f"NOT NULL); PRAGMA user_version = {PIECES_FROM - 1};")
    conn.close()
    again = DocIndex.for_folder(docs, tmp_path / "store")
    stats = again.refresh()
    assert stats.unchanged == first.added and stats.updated == stats.added == 0
    assert stats.embedded == first.passages
    conn = sqlite3.connect(again.db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    assert again.find("erasing something stored remotely", 5).results[0]["path"] == "push.md"
    again.close()


@pytest.mark.usefixtures("semantic_on")
def test_the_first_results_sentences_are_embedded_at_query_time(tmp_path: Path) -> None:
    """The first result's sentences that hold a word of the question are embedded when it
    is asked, with the page's title and section, as pieces are: each joins ``pieces``
    with its own similarity, inside the piece that holds it."""
    import numpy as np

    from subagents.research.docwriter import piece_text
    from subagents.research.embedding import load_embedder

    docs = tmp_path / "docs"
    docs.mkdir()
    body = ("The binding keeps the text for a while. The binding reads the text once. "
            "Pass the transient constant and the binding copies the text at once.")
    (docs / "bind.md").write_text(f"# Binding text\n\n{body}\n")
    index = DocIndex.for_folder(docs, tmp_path / "store")
    index.refresh()
    question = "How do I make the binding keep its own copy of the text?"
    top = index.find(question, 3).results[0]
    index.close()
    spans = {top["snippet"][s:e]: sim for s, e, sim in top["pieces"]}
    sentence = "Pass the transient constant and the binding copies the text at once."
    piece = next(text for text in spans if body in text)  # the paragraph's piece
    assert sentence in spans and spans[sentence] != spans[piece]
    assert "The binding reads the text once." in spans
    embedder = load_embedder()
    assert embedder is not None
    start = top["snippet"].index(sentence)
    want = embedder.encode([piece_text(top["title"], top["heading"], top["snippet"], start,
                                       start + len(sentence))])[0] @ embedder.encode(
                                           [question])[0]
    assert np.isclose(spans[sentence], float(want), atol=1e-3)
