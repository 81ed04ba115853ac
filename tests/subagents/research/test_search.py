"""web.search on loopback SearXNG, Brave and Tavily servers speaking their wire formats."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from shared.envelope import ToolResult
from subagents.executor import execute_tool_safely
from subagents.research.spec import ResearchToolsSpec
from subagents.research.tools import open_research_tools
from tests.loopback._server import LoopbackServer, Reply
from tests.loopback.web_server import BraveServer, SearxngServer, TavilyServer

pytestmark = pytest.mark.anyio

HITS = [
    {"title": "Sodium-ion <b>cells</b> &amp; grids", "url": "https://example.org/na",
     "snippet": "Sodium-ion cells reach 160 Wh/kg."},
    {"title": "Iron-air storage", "url": "https://example.org/fe",
     "snippet": "Iron-air stores 100 hours."},
    {"title": "Solid state", "url": "https://example.org/ss", "snippet": "Sulfide electrolytes."},
]
KEY = "test-key-not-a-secret-123"


@pytest.fixture(scope="module", params=["searxng", "brave", "tavily"])
def backend(request: pytest.FixtureRequest) -> Iterator[tuple[str, LoopbackServer]]:
    servers: dict[str, LoopbackServer] = {
        "searxng": SearxngServer(HITS), "brave": BraveServer(KEY, HITS),
        "tavily": TavilyServer(KEY, HITS),
    }
    server = servers[request.param]
    with server.serving():
        yield request.param, server


async def _search(
    name: str, server: LoopbackServer, args: dict[str, Any], *, key: str = KEY
) -> ToolResult:
    spec = ResearchToolsSpec.model_validate(
        {"web": {"search": name, "url": server.origin, "fetch": {"allow_private": True}}}
    )
    env = {"BRAVE_API_KEY": key, "TAVILY_API_KEY": key}
    async with open_research_tools(spec, env=env) as tools:
        return await execute_tool_safely(tools.tools["web.search"], args, timeout=10)


async def test_each_backend_answers_title_url_snippet(backend: tuple[str, LoopbackServer]) -> None:
    """Every backend's results come back as {title, url, snippet}, markup removed, cut to limit."""
    name, server = backend
    server.clear()
    result = await _search(name, server, {"query": "sodium ion", "limit": 2})
    assert result.ok and not result.empty
    assert result.data["results"] == [
        {"title": "Sodium-ion cells & grids", "url": "https://example.org/na",
         "snippet": "Sodium-ion cells reach 160 Wh/kg."},
        {"title": "Iron-air storage", "url": "https://example.org/fe",
         "snippet": "Iron-air stores 100 hours."},
    ]
    sent = server.requests[-1]
    if name == "searxng":
        assert "format=json" in sent.path and "q=sodium+ion" in sent.path
    elif name == "brave":
        assert sent.headers["x-subscription-token"] == KEY and "count=2" in sent.path
    else:
        assert sent.json() == {"query": "sodium ion", "max_results": 2, "search_depth": "basic"}
        assert sent.headers["authorization"] == f"Bearer {KEY}"


async def test_no_results_is_empty_not_an_error(backend: tuple[str, LoopbackServer]) -> None:
    """A search that finds nothing is ok and empty: never a failure."""
    name, server = backend
    saved = server.results  # type: ignore[attr-defined]
    server.results = []  # type: ignore[attr-defined]
    try:
        result = await _search(name, server, {"query": "zzz"})
    finally:
        server.results = saved  # type: ignore[attr-defined]
    assert result.ok and result.empty


async def test_rate_limits_carry_retry_after(backend: tuple[str, LoopbackServer]) -> None:
    """429 with Retry-After is transient with retry_after_s, whatever the backend."""
    name, server = backend
    server.push(Reply(429, {"error": "rate limited"}, headers={"retry-after": "3"}))
    result = await _search(name, server, {"query": "x"})
    assert (result.category, result.error_type, result.retry_after_s) == (
        "transient", "rate_limited", 3.0)


async def test_a_wrong_key_is_permission_and_the_key_never_shows(
    backend: tuple[str, LoopbackServer],
) -> None:
    """A refused key is permission (SearXNG: its JSON setting); no message holds the key."""
    name, server = backend
    if name == "searxng":
        server.push(Reply(403, "Forbidden", headers={"content-type": "text/html"}))
    result = await _search(name, server, {"query": "x"}, key="wrong-key-456")
    assert result.category == "permission"
    assert "wrong-key-456" not in result.to_json() and KEY not in result.to_json()
    if name == "searxng":
        assert "search.formats" in (result.message or "")


@pytest.mark.parametrize(
    ("name", "status"),
    [pytest.param("brave", 402, id="brave-402"), pytest.param("tavily", 432, id="tavily-432")],
)
async def test_quota_responses_are_business(name: str, status: int) -> None:
    """Brave's 402 and Tavily's 432 are spent quotas: business, not retried."""
    server: LoopbackServer = BraveServer(KEY, HITS) if name == "brave" else TavilyServer(KEY, HITS)
    with server.serving():
        server.push(Reply(status, {"detail": "limit"}))
        result = await _search(name, server, {"query": "x"})
    assert (result.category, result.error_type, result.retryable) == ("business", "quota", False)


async def test_bad_arguments_never_reach_the_backend(backend: tuple[str, LoopbackServer]) -> None:
    """limit 0 or 21 and an empty query are validation envelopes; no request is sent."""
    name, server = backend
    server.clear()
    bad: list[tuple[dict[str, Any], str]] = [
        ({"query": "x", "limit": 21}, "limit"), ({"query": "x", "limit": 0}, "limit"),
        ({"query": "  "}, "query"),
    ]
    for args, field in bad:
        result = await _search(name, server, args)
        assert (result.category, result.field) == ("validation", field)
    assert server.requests == []


async def test_an_unset_key_variable_is_an_input_error() -> None:
    """brave without BRAVE_API_KEY: the tools do not open, naming the variable."""
    from shared.errors import InputFileError

    spec = ResearchToolsSpec.model_validate({"web": {"search": "brave"}})
    with pytest.raises(InputFileError, match="BRAVE_API_KEY"):
        async with open_research_tools(spec, env={}):
            pass



async def test_a_guarded_search_backend_on_loopback_is_refused_naming_the_query() -> None:
    """Where the backend's address is guarded (the service), a loopback one is refused
    before any request, as a validation failure naming web.search's argument, query."""
    server = SearxngServer(HITS)
    with server.serving():
        spec = ResearchToolsSpec.model_validate({"web": {"search": "searxng",
                                                         "url": server.origin}})
        async with open_research_tools(spec, guard_search=True) as tools:
            result = await execute_tool_safely(tools.tools["web.search"],
                                               {"query": "sodium"}, timeout=10)
    assert (result.category, result.error_type, result.field) == (
        "validation", "blocked_address", "query")
    assert server.requests == []
