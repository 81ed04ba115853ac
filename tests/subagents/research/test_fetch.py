"""web.fetch against a loopback web: main text, redirects, failures as envelopes, the guard."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from shared.clock import AnyioClock
from shared.envelope import ToolResult
from subagents.executor import ExecEvent, execute_tool_safely
from subagents.research.fetch import WebFetcher
from subagents.research.spec import FetchSpec
from subagents.research.tools import _fetch_tool
from subagents.retry import RetryPolicy
from tests.subagents.research.conftest import ARTICLE, Web

pytestmark = pytest.mark.anyio


class SkipWaits:
    """Real time for timeouts, but a retry's wait is recorded and skipped."""

    def __init__(self) -> None:
        self.real = AnyioClock()
        self.waited: list[float] = []
        self.skipped = 0.0

    def now(self) -> float:
        return self.real.now() + self.skipped

    async def sleep(self, seconds: float) -> None:
        self.waited.append(seconds)
        self.skipped += seconds

    def fail_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        return self.real.fail_after(seconds)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        return self.real.move_on_after(seconds)


@pytest.fixture
async def fetcher(web: Web) -> AsyncIterator[WebFetcher]:
    f = WebFetcher(FetchSpec(timeout_s=1.5, max_bytes=200_000), guard=web.guard())
    try:
        yield f
    finally:
        await f.aclose()


async def _call(fetcher: WebFetcher, url: str, **policy: Any) -> tuple[ToolResult, SkipWaits]:
    clock = SkipWaits()
    events: list[ExecEvent] = []
    result = await execute_tool_safely(
        _fetch_tool(fetcher), {"url": url}, timeout=10,
        retry=RetryPolicy(**policy) if policy else None, clock=clock, observer=events.append,
    )
    return result, clock


async def test_an_article_comes_back_as_its_main_text_without_the_boilerplate(
    fetcher: WebFetcher, web: Web
) -> None:
    """The article's paragraphs and title come back; navigation, cookies and footer do not."""
    result, _ = await _call(fetcher, web.url("/article"))
    assert result.ok and result.complete and not result.empty
    data = result.data
    assert data["title"] == "Sodium-ion cells pass 160 Wh/kg"
    assert ARTICLE[0][:60] in data["text"]
    for junk in ("cookies", "Copyright", "Section 11", "Celebrity"):
        assert junk not in data["text"]
    assert data["content_type"] == "text/html" and data["truncated"] is False
    assert data["final_url"] == data["url"] == web.url("/article")


async def test_redirects_are_followed_and_the_final_url_kept(fetcher: WebFetcher, web: Web) -> None:
    """Two redirects (absolute and relative) end at the article; final_url says where."""
    result, _ = await _call(fetcher, web.url("/redirect2"))
    assert result.ok
    assert result.data["final_url"] == web.url("/article")
    assert result.data["url"] == web.url("/redirect2")


async def test_a_redirect_loop_is_cut_at_the_cap(fetcher: WebFetcher, web: Web) -> None:
    """A page that redirects to itself is a validation failure naming url, not a hang."""
    result, _ = await _call(fetcher, web.url("/loop"))
    assert (result.category, result.error_type, result.field) == (
        "validation", "too_many_redirects", "url")


@pytest.mark.parametrize(
    ("path", "category", "error_type"),
    [
        pytest.param("/forbidden", "permission", "forbidden", id="403"),
        pytest.param("/missing", "validation", "not_found", id="404"),
        pytest.param("/gone", "validation", "gone", id="410"),
        pytest.param("/image.png", "validation", "unreadable_content", id="binary"),
    ],
)
async def test_http_failures_are_envelopes_as_the_table_says(
    fetcher: WebFetcher, web: Web, path: str, category: str, error_type: str
) -> None:
    """403 is permission; 404/410 and a binary body name the url for the model to correct."""
    result, _ = await _call(fetcher, web.url(path))
    assert not result.ok
    assert (result.category, result.error_type) == (category, error_type)
    if category == "validation":
        assert result.field == "url"
    assert result.attempts == 1


async def test_429_is_retried_after_the_servers_retry_after(fetcher: WebFetcher, web: Web) -> None:
    """A 429 with Retry-After: 7 is transient; the retry waits at least 7 s, then succeeds."""
    result, clock = await _call(
        fetcher, web.url("/busy"), max_attempts=3, initial_backoff_s=0.1, jitter="none"
    )
    assert result.ok and result.attempts == 2
    assert result.data["title"] == "Recovered"
    assert clock.waited and clock.waited[0] >= 7


@pytest.mark.parametrize(
    ("path", "error_type"),
    [
        pytest.param("/unavailable", "unavailable", id="503"),
        pytest.param("/slow", "timeout", id="slow"),
        pytest.param("/reset", "connection_reset", id="reset"),
    ],
)
async def test_unreachable_pages_are_transient(
    fetcher: WebFetcher, web: Web, path: str, error_type: str
) -> None:
    """503, a page slower than timeout_s and a reset connection are transient and retryable."""
    result, _ = await _call(fetcher, web.url(path))
    assert (result.category, result.error_type, result.retryable) == (
        "transient", error_type, True)


async def test_a_page_over_max_bytes_is_partial(web: Web) -> None:
    """A 1 MiB page read with max_bytes 100 kB: ok, complete false, truncated, some text."""
    f = WebFetcher(FetchSpec(max_bytes=100_000), guard=web.guard())
    try:
        result, _ = await _call(f, web.url("/huge"))
    finally:
        await f.aclose()
    assert result.ok and not result.complete
    assert result.data["truncated"] is True and "Storage" in result.data["text"]


async def test_a_pdf_made_in_the_test_reads_as_text(fetcher: WebFetcher, web: Web) -> None:
    """pypdf reads the generated PDF: its title from the metadata, its text from the page."""
    result, _ = await _call(fetcher, web.url("/paper.pdf"))
    assert result.ok
    assert result.data["title"] == "Electrolyte survey"
    assert "25 mS/cm" in result.data["text"]
    assert result.data["content_type"] == "application/pdf"


async def test_a_page_that_does_not_say_its_charset_is_decoded(
    fetcher: WebFetcher, web: Web
) -> None:
    """A Latin-1 page with no charset anywhere comes back with its accents right."""
    result, _ = await _call(fetcher, web.url("/latin1"))
    assert result.ok
    assert "Café crème" in result.data["title"]
    assert "enquête" in result.data["text"]


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("ftp://news.test/file", id="ftp"),
        pytest.param("file:///etc/passwd", id="file"),
        pytest.param("javascript:alert(1)", id="javascript"),
        pytest.param("http://", id="no-host"),
    ],
)
async def test_other_schemes_are_refused_naming_url(fetcher: WebFetcher, url: str) -> None:
    """Only http(s) URLs with a host are fetched; anything else is validation on url."""
    result, _ = await _call(fetcher, url)
    assert (result.category, result.field) == ("validation", "url")


async def test_a_host_that_does_not_resolve_names_the_url(fetcher: WebFetcher) -> None:
    """A name the resolver does not know is validation on url (the model corrects it)."""
    result, _ = await _call(fetcher, "http://no-such-host.test/")
    assert (result.category, result.error_type, result.field) == (
        "validation", "unresolvable_host", "url")
