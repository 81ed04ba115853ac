"""Extraction keeps no state: the same page, read or fetched again, gives the same text.

trafilatura's ``deduplicate=True`` kept a process-wide cache of paragraphs it had seen,
so each further read of a page lost more of it (148,631 → 105,176 characters). Pages
here repeat paragraphs within and across themselves, which is what that cache ate.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subagents.research.docindex import DocIndex
from subagents.research.extract import extract_html
from subagents.research.fetch import WebFetcher
from subagents.research.spec import FetchSpec
from tests.loopback.web_server import article_html, html_reply
from tests.subagents.research.conftest import Web

WORDS = ["cell", "anode", "cathode", "sodium", "lithium", "grid", "storage", "cycle",
         "voltage", "thermal", "density", "pack", "charge", "cost", "safety"]
_SENTENCE = st.lists(st.sampled_from(WORDS), min_size=8, max_size=40).map(
    lambda ws: " ".join(ws).capitalize() + ".")
_PAGE = st.lists(_SENTENCE, min_size=2, max_size=12).flatmap(
    lambda ps: st.lists(st.sampled_from(ps), min_size=len(ps), max_size=3 * len(ps)))
_COUNTER = itertools.count()


@settings(max_examples=40, deadline=None)
@given(st.lists(_PAGE, min_size=1, max_size=3))
def test_extraction_gives_the_same_text_every_time(pages: list[list[str]]) -> None:
    """Each page, extracted again after the others, gives the text it gave first."""
    markup = [article_html(f"Page {i}", p) for i, p in enumerate(pages)]
    first = [extract_html(m).text for m in markup]
    for _ in range(2):
        assert [extract_html(m).text for m in markup] == first


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_PAGE)
def test_web_fetch_gives_the_same_page_every_time(web: Web, paragraphs: list[str]) -> None:
    """web.fetch of one page three times returns the same title and text."""
    path = f"/page{next(_COUNTER)}"
    web.server.routes[path] = html_reply(article_html("Repeated", paragraphs))

    async def fetch_three() -> list[tuple[str, str]]:
        fetcher = WebFetcher(FetchSpec(), guard=web.guard())
        try:
            got = []
            for _ in range(3):
                page = await fetcher.fetch(web.url(path))
                got.append((page.data["title"], page.data["text"]))
            return got
        finally:
            await fetcher.aclose()

    texts = anyio.run(fetch_three)
    assert texts[0][1] and texts.count(texts[0]) == 3


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="fanout-purity-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@settings(max_examples=15, deadline=None)
@given(st.lists(_PAGE, min_size=1, max_size=3))
def test_docs_read_gives_the_same_text_every_time(scratch: Path, pages: list[list[str]]) -> None:
    """docs.read of each document twice, in any order, returns the same windows."""
    run = scratch / f"run{next(_COUNTER)}"
    (run / "docs").mkdir(parents=True)
    for i, page in enumerate(pages):
        (run / "docs" / f"p{i}.html").write_text(article_html(f"Page {i}", page))
    index = DocIndex.for_folder(run / "docs", run / "store")
    try:
        index.refresh()
        names = [f"p{i}.html" for i in range(len(pages))]
        first = [index.read(n, 0, 20_000) for n in names]
        assert all(r["text"] for r in first)
        assert [index.read(n, 0, 20_000) for n in reversed(names)] == first[::-1]
    finally:
        index.close()
