"""SearXNG: a self-hosted metasearch engine; its JSON API needs no key.

``GET {url}/search?q=…&format=json`` answers ``{"results": [{"url", "title", "content",
…}], …}``. An instance must list ``json`` under ``search.formats`` in its settings; one
that does not answers 403, read here as that setting, not as a credential problem.
"""

from __future__ import annotations

from typing import Any

from shared.envelope import ToolError
from subagents.research.errors import ResearchToolError
from subagents.research.search.base import SearchHit, SearchRequest, hit

__all__ = ["SearxngBackend"]


class SearxngBackend:
    """A SearXNG instance's JSON search API."""

    name = "searxng"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def request(self, query: str, limit: int) -> SearchRequest:
        """``GET /search?q=QUERY&format=json`` (SearXNG has no result count: cut after)."""
        return SearchRequest(
            "GET", f"{self.base_url}/search", params={"q": query, "format": "json"},
            headers={"Accept": "application/json"},
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
        """403 from SearXNG is its JSON format switched off."""
        if status == 403:
            return ResearchToolError(
                ToolError.of(
                    "permission", "forbidden",
                    f"web.search: searxng at {self.base_url} refused the JSON format (HTTP "
                    "403): add json to search.formats in its settings.yml",
                )
            )
        return None
