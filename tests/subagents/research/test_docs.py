"""docs.search and docs.read: FTS5 over a generated corpus, incremental refresh, confinement."""

from __future__ import annotations

import os
import random
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from subagents.executor import execute_tool_safely
from subagents.research.docindex import DocIndex
from subagents.research.spec import ResearchToolsSpec
from subagents.research.tools import ResearchTools, open_research_tools
from tests.loopback.web_server import article_html, make_pdf

pytestmark = pytest.mark.anyio

WORDS = [
    "battery", "cell", "anode", "cathode", "electrolyte", "grid", "storage", "cost", "cycle",
    "charge", "voltage", "sodium", "lithium", "iron", "nickel", "manganese", "carbon",
    "density", "safety", "thermal", "pack",
]


def make_corpus(folder: Path, n: int, seed: int = 7) -> None:
    """``n`` generated Markdown notes, and a few special documents to find."""
    rng = random.Random(seed)
    for i in range(n):
        sub = folder / f"d{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        body = " ".join(rng.choice(WORDS) for _ in range(120))
        (sub / f"note{i}.md").write_text(f"# Note {i}\n\n{body}\n")
    (folder / "perovskite.md").write_text(
        "# Perovskite tandem cells\n\nPerovskite-silicon tandem cells reached 33.9 percent "
        "efficiency in the lab.\n")
    (folder / "grid.html").write_text(article_html("Pumped hydro", [
        "Pumped hydro storage provides most of the world's grid storage capacity today, "
        "with round-trip efficiency near 80 percent in modern plants."]))
    (folder / "survey.pdf").write_bytes(make_pdf(["Flow batteries", "Vanadium redox flow "
                                                  "batteries last 20000 cycles."]))
    (folder / "notes.bin").write_bytes(b"\x00\x01")  # not an indexed kind


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "papers"
    make_corpus(folder, 300)
    return folder


def test_the_index_finds_documents_by_bm25(corpus: Path, tmp_path: Path) -> None:
    """Each special document is the best hit for its words; Markdown, HTML and PDF alike."""
    index = DocIndex.for_folder(corpus, tmp_path / "store")
    stats = index.refresh()
    assert stats.added == 303 and stats.documents == 303 and not stats.skipped
    top = index.search("perovskite tandem efficiency", 3)
    assert top[0]["path"] == "perovskite.md" and top[0]["title"] == "Perovskite tandem cells"
    hydro = index.search("pumped hydro", 1)[0]
    assert (hydro["path"], hydro["title"]) == ("grid.html", "Pumped hydro")
    assert "round-trip efficiency" in hydro["snippet"]
    assert index.search("vanadium redox", 1)[0]["path"] == "survey.pdf"
    # Scores are BM25 (higher is better), in order.
    scores = [r["score"] for r in index.search("sodium cathode", 10)]
    assert scores == sorted(scores, reverse=True) and len(scores) == 10
    index.close()


def test_refresh_reads_only_what_changed(corpus: Path, tmp_path: Path) -> None:
    """A second refresh reads nothing; an edit, a new file and a removal are each seen."""
    index = DocIndex.for_folder(corpus, tmp_path / "store")
    index.refresh()
    again = index.refresh()
    assert (again.added, again.updated, again.removed, again.unchanged) == (0, 0, 0, 303)
    assert not index.is_stale()
    (corpus / "perovskite.md").write_text("# Perovskite\n\nNow about halide segregation.\n")
    os.utime(corpus / "perovskite.md", ns=(1, 1))
    (corpus / "new.txt").write_text("Zinc bromine notes\nzinc bromine flow.")
    (corpus / "d0" / "note0.md").unlink()
    assert index.is_stale()
    third = index.refresh()
    assert (third.added, third.updated, third.removed) == (1, 1, 1)
    assert index.search("halide segregation", 1)[0]["path"] == "perovskite.md"
    assert index.search("tandem", 5) == []
    assert index.search("zinc bromine", 1)[0]["path"] == "new.txt"
    index.close()


def test_queries_are_words_never_fts_syntax(corpus: Path, tmp_path: Path) -> None:
    """Quotes, operators and parentheses in a query do not break it; any-word fallback works."""
    index = DocIndex.for_folder(corpus, tmp_path / "store")
    index.refresh()
    assert index.search('perovskite" OR (NEAR "x', 3)[0]["path"] == "perovskite.md"
    assert index.search("perovskite unobtainium", 3)[0]["path"] == "perovskite.md"
    assert index.search("*** ---", 3) == []
    index.close()


def _tools(folder: Path, store: Path) -> AbstractAsyncContextManager[ResearchTools]:
    spec = ResearchToolsSpec.model_validate({"docs": {"path": str(folder)}})
    return open_research_tools(spec, store_dir=store)


async def test_docs_read_stays_in_its_folder(corpus: Path, tmp_path: Path) -> None:
    """`..`, absolute paths, symlinks out, hidden files and other kinds are validation on path."""
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nthe server's secret")
    (corpus / "link.md").symlink_to(secret)
    (corpus / "outdir").symlink_to(tmp_path, target_is_directory=True)
    (corpus / ".hidden.md").write_text("# hidden")
    async with _tools(corpus, tmp_path / "store") as tools:
        read = tools.tools["docs.read"]
        for path in ("../secret.md", str(secret), "link.md", "outdir/secret.md",
                     "d0/../../secret.md", ".hidden.md", "notes.bin", "nope.md", ""):
            result = await execute_tool_safely(read, {"path": path}, timeout=10)
            assert (result.category, result.field) == ("validation", "path"), path
            assert "the server's secret" not in result.to_json()
        ok = await execute_tool_safely(read, {"path": "perovskite.md"}, timeout=10)
        assert ok.ok and ok.data["title"] == "Perovskite tandem cells"
        assert "33.9 percent" in ok.data["text"]
        # The link out was not indexed either.
        found = await execute_tool_safely(
            tools.tools["docs.search"], {"query": "secret"}, timeout=10)
        assert found.ok and found.empty


async def test_long_documents_are_read_in_windows(tmp_path: Path) -> None:
    """A 50,000-character document comes in windows; next_start continues it to the end."""
    folder = tmp_path / "long"
    folder.mkdir()
    text = "".join(f"line {i:05d} about storage\n" for i in range(2000))
    (folder / "long.txt").write_text(text)
    async with _tools(folder, tmp_path / "store") as tools:
        read = tools.tools["docs.read"]
        parts, start = [], 0
        while start is not None:
            result = await execute_tool_safely(read, {"path": "long.txt", "start": start},
                                               timeout=10)
            assert result.ok and result.complete
            parts.append(result.data["text"])
            start = result.data["next_start"]
        assert "".join(parts) == text and len(parts) == 3
        past = await execute_tool_safely(read, {"path": "long.txt", "start": 10**6}, timeout=10)
        assert (past.category, past.field) == ("validation", "start")


async def test_a_folder_is_indexed_when_the_tools_open(corpus: Path, tmp_path: Path) -> None:
    """Opening docs tools on a new folder indexes it; docs.search finds with BM25 scores."""
    async with _tools(corpus, tmp_path / "store") as tools:
        result = await execute_tool_safely(
            tools.tools["docs.search"], {"query": "vanadium flow", "limit": 2}, timeout=10)
    assert result.ok
    first = result.data["results"][0]
    assert first["path"] == "survey.pdf" and first["score"] > 0 and "Vanadium" in first["snippet"]
    assert list((tmp_path / "store" / "docs").glob("papers-*.sqlite"))
