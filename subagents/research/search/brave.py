"""The Brave Search API: ``GET /res/v1/web/search`` with the key in ``X-Subscription-Token``.

It answers ``{"web": {"results": [{"title", "url", "description", …}]}, …}`` (titles and
descriptions may hold ``<strong>`` highlights; they are stripped). 429 carries
``Retry-After`` (and ``X-RateLimit-Reset``); a spent monthly quota is 402.
"""

from __future__ import annotations

from typing import Any

from shared.envelope import ToolError
from subagents.research.errors import ResearchToolError, parse_retry_after
from subagents.research.search.base import SearchHit, SearchRequest, hit

__all__ = ["BRAVE_URL", "BraveBackend"]

BRAVE_URL = "https://api.search.brave.com"


class BraveBackend:
    """Brave's web search endpoint."""

    name = "brave"

    def __init__(self, key: str, base_url: str | None = None) -> None:
        self._key = key
        self.base_url = (base_url or BRAVE_URL).rstrip("/")

    def __repr__(self) -> str:
        return f"BraveBackend({self.base_url!r})"  # never the key

    def request(self, query: str, limit: int) -> SearchRequest:
        """``GET /res/v1/web/search?q=QUERY&count=N``."""
        return SearchRequest(
            "GET",
            f"{self.base_url}/res/v1/web/search",
            params={"q": query, "count": min(limit, 20)},
            headers={"Accept": "application/json", "X-Subscription-Token": self._key},
        )

    def parse(self, body: Any) -> list[SearchHit]:
        """``web.results[].{title, url, description}``."""
        web = body.get("web") if isinstance(body, dict) else None
        results = web.get("results") if isinstance(web, dict) else None
        hits = (
            hit(r.get("title"), r.get("url"), r.get("description"))
            for r in (results or []) if isinstance(r, dict)
        )
        return [h for h in hits if h is not None]

    def failure(self, status: int, retry_after: str | None) -> ResearchToolError | None:
        """402: the plan's quota is spent (a business limit, not worth retrying)."""
        if status == 402:
            return ResearchToolError(
                ToolError.of(
                    "business", "quota",
                    "web.search: brave answered HTTP 402: the plan's quota is spent",
                    retry_after_s=parse_retry_after(retry_after),
                )
            )
        return None
