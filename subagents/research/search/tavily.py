"""Tavily: ``POST /search`` with a JSON body and the key as a bearer token.

It answers ``{"query", "results": [{"title", "url", "content", "score"}], …}``. 429 is a
rate limit; 432 (plan limit) and 433 (pay-as-you-go limit) are spent quotas.
"""

from __future__ import annotations

from typing import Any

from shared.envelope import ToolError
from subagents.research.errors import ResearchToolError
from subagents.research.search.base import SearchHit, SearchRequest, hit

__all__ = ["TAVILY_URL", "TavilyBackend"]

TAVILY_URL = "https://api.tavily.com"


class TavilyBackend:
    """Tavily's search endpoint."""

    name = "tavily"

    def __init__(self, key: str, base_url: str | None = None) -> None:
        self._key = key
        self.base_url = (base_url or TAVILY_URL).rstrip("/")

    def __repr__(self) -> str:
        return f"TavilyBackend({self.base_url!r})"  # never the key

    def request(self, query: str, limit: int) -> SearchRequest:
        """``POST /search {"query", "max_results", "search_depth": "basic"}``."""
        return SearchRequest(
            "POST",
            f"{self.base_url}/search",
            json={"query": query, "max_results": limit, "search_depth": "basic"},
            headers={"Accept": "application/json", "Authorization": f"Bearer {self._key}"},
        )

    def parse(self, body: Any) -> list[SearchHit]:
        """``results[].{title, url, content}``."""
        results = body.get("results") if isinstance(body, dict) else None
        hits = (
            hit(r.get("title"), r.get("url"), r.get("content"))
            for r in (results or []) if isinstance(r, dict)
        )
        return [h for h in hits if h is not None]

    def failure(self, status: int, retry_after: str | None) -> ResearchToolError | None:
        """432 and 433: the key's usage limit is reached."""
        if status in (432, 433):
            return ResearchToolError(
                ToolError.of(
                    "business", "quota",
                    f"web.search: tavily answered HTTP {status}: the key's usage limit is reached",
                )
            )
        return None
