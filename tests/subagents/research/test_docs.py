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


def _page_and_source(folder: Path, topic: str) -> None:
    """A rendered page and its source beside it under the same name (as a documentation
    set ships them)."""
    sections = [(f"{topic.title()} {w}", " ".join(f"{w}{i} of the {topic} module"
                                                  for i in range(60)))
                for w in ("open", "read", "write", "extract")]
    (folder / f"{topic}.txt").write_text(f"{topic}\n{'=' * len(topic)}\n\n" + "".join(
        f"{h}\n{'-' * len(h)}\n\n`{topic}.x` {b}\n\n" for h, b in sections))
    (folder / f"{topic}.html").write_text(
        f"<html><head><title>{topic}</title></head><body><h1>{topic}</h1>" + "".join(
            f"<h2>{h}</h2><p><code>{topic}.x()</code> {b}</p>" for h, b in sections)
        + "</body></html>")


def test_a_pages_source_is_searched_as_the_page_and_read_as_itself(tmp_path: Path) -> None:
    """A source whose page is beside it is not indexed twice: a search shows the page and
    names the source in ``also``; the source is read from its own file."""
    docs = tmp_path / "docs"
    docs.mkdir()
    _page_and_source(docs, "zipfile")
    (docs / "notes.txt").write_text("Notes\n\nA text of its own about read1 of zipfiles.\n")
    index = DocIndex.for_folder(docs, tmp_path / "store", semantic="off")
    stats = index.refresh()
    assert stats.documents == 3
    found = index.search("read7 of the zipfile module", 8)
    assert found[0]["path"] == "zipfile.html"
    assert "zipfile.txt" not in {r["path"] for r in found}
    assert all(r.get("also") == ["zipfile.txt"] for r in found if r["path"] == "zipfile.html")
    source = index.read("zipfile.txt", 0, 100_000)
    assert source["text"].startswith("zipfile\n=======") and "`zipfile.x`" in source["text"]
    assert index.search("text of its own", 1)[0]["path"] == "notes.txt"
    index.close()


def test_a_source_whose_page_goes_is_indexed_as_itself(tmp_path: Path) -> None:
    """When the page is removed (or changes), the next refresh indexes its source as a
    text of its own."""
    docs = tmp_path / "docs"
    docs.mkdir()
    _page_and_source(docs, "tarfile")
    index = DocIndex.for_folder(docs, tmp_path / "store", semantic="off")
    index.refresh()
    (docs / "tarfile.html").unlink()
    again = index.refresh()
    assert (again.removed, again.updated) == (1, 1)
    found = index.search("extract9 of the tarfile module", 3)
    assert found and found[0]["path"] == "tarfile.txt" and "also" not in found[0]
    index.close()


def test_a_different_text_under_a_pages_name_is_indexed(tmp_path: Path) -> None:
    """A text file named as a page but saying something else is a document of its own."""
    docs = tmp_path / "docs"
    docs.mkdir()
    _page_and_source(docs, "gzip")
    (docs / "gzip.txt").write_text("Release notes\n\nThe vanadium changes of this year.\n")
    index = DocIndex.for_folder(docs, tmp_path / "store", semantic="off")
    index.refresh()
    assert index.search("vanadium changes", 1)[0]["path"] == "gzip.txt"
    index.close()
