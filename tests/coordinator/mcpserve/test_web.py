"""The web of `fanout mcp` is the operator's: ask's `web: true` searches through the
operator's SearXNG (on loopback), a run_job naming another search endpoint is refused,
and web.fetch never reaches a private address from a request."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.coordinator.mcpserve.conftest import over_stdio, text_of
from tests.loopback.web_server import LoopbackWeb, SearxngServer, article_html, html_reply

# Each test starts `fanout mcp` (stdio or HTTP) as a process of its own (tests/tiers.py).
pytestmark = [pytest.mark.anyio, pytest.mark.process]
HITS = [{"title": "Sodium-ion at 160 Wh/kg", "url": "https://example.org/na",
         "snippet": "Sodium-ion cells reached 160 Wh/kg in 2025."}]


def _fetch_job(search: str, page: str) -> str:
    """A job whose one subtask fetches ``page`` through the web tools of ``search``."""
    return f"""\
scenario: fetch-loopback
job:
  query: "what does the internal page say"
  subtasks:
    - id: peek
      query: "the internal page"
      tools: [web.fetch]
      plan: [{{call: web.fetch, args: {{url: "{page}"}}}}]
research_tools:
  web: {{search: searxng, url: "{search}"}}
"""


async def test_the_operators_search_answers_and_no_other_endpoint_or_private_page(
    tmp_path: Path,
) -> None:
    """ask web: true cites the operator's SearXNG hit; a job naming another SearXNG is
    refused naming research_tools.web; a job fetching a loopback page never reaches it."""
    searx, other = SearxngServer(HITS), SearxngServer(HITS)
    web = LoopbackWeb({"/internal": html_reply(article_html("internal", ["secret " * 30]))})
    with searx.serving(), other.serving(), web.serving(), anyio.fail_after(90):
        page = f"{web.origin}/internal"
        async with over_stdio(tmp_path, "--search", f"searxng:{searx.origin}") as session:
            asked = await session.call_tool("ask", {"question": "Sodium-ion energy density?",
                                                    "web": True})
            elsewhere = await session.call_tool("run_job", {
                "job": _fetch_job(other.origin, page)})
            fetched = await session.call_tool("run_job", {
                "job": _fetch_job(searx.origin, page)})
        searched, other_searched, pages = len(searx.requests), len(other.requests), len(
            web.requests)
    assert not asked.is_error, text_of(asked)
    data = asked.structured_content or {}
    assert [s["url"] for s in data["sources"]] == ["https://example.org/na"]
    assert "[1] Sodium-ion at 160 Wh/kg — https://example.org/na" in text_of(asked)
    assert elsewhere.is_error
    assert "research_tools.web: expected the server's own search backend" in text_of(elsewhere)
    assert not fetched.is_error, text_of(fetched)
    assert (fetched.structured_content or {})["coverage"] == 0.0, text_of(fetched)
    assert "is a loopback address" in text_of(fetched)  # the gap says why
    assert searched >= 1 and other_searched == 0 and pages == 0
