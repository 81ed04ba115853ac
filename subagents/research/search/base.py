"""One small interface for every search backend, as GPT Researcher's retrievers have.

A backend knows its request and its response format; everything else — the HTTP
client, the status table, the result shape — is here, so a backend module is a request
builder and a parser. Results are ``{title, url, snippet}`` (docs/design.md §10), snippets with
markup removed: they are text for the model, never HTML.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any, Protocol

import httpx

from shared.envelope import ToolError
from subagents.research.errors import ResearchToolError, http_failure, timed_out, unreachable

__all__ = ["SearchBackend", "SearchHit", "SearchRequest", "hit", "run_search"]

TOOL = "web.search"
_TAGS = re.compile(r"<[^>]+>")

SearchHit = dict[str, str]
"""``{"title", "url", "snippet"}``."""


class SearchRequest:
    """What a backend sends: a method, a URL, query parameters, a JSON body, headers."""

    def __init__(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.method = method
        self.url = url
        self.params = dict(params or {})
        self.json = dict(json) if json is not None else None
        self.headers = dict(headers or {})


class SearchBackend(Protocol):
    """A search service: how to ask it, and how to read its answer."""

    name: str
    base_url: str

    def request(self, query: str, limit: int) -> SearchRequest:
        """The HTTP request that asks for ``limit`` results for ``query``."""
        ...

    def parse(self, body: Any) -> list[SearchHit]:
        """The results of a successful answer's JSON body."""
        ...

    def failure(self, status: int, retry_after: str | None) -> ResearchToolError | None:
        """A backend's own reading of a status (a quota, a setting), or None for the table."""
        ...


def hit(title: Any, url: Any, snippet: Any) -> SearchHit | None:
    """One result as text, or None when it has no URL."""
    if not isinstance(url, str) or not url:
        return None
    return {"title": _text(title), "url": url, "snippet": _text(snippet)}


def _text(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    return " ".join(html.unescape(_TAGS.sub("", value)).split())


async def run_search(
    backend: SearchBackend, client: httpx.AsyncClient, query: str, limit: int
) -> list[SearchHit]:
    """Ask ``backend`` for ``query``; failures raise classified research tool errors.

    The key travels in a header and never in a message: errors name the backend and its
    base URL only.
    """
    request = backend.request(query, limit)
    where = f"{backend.name} at {backend.base_url}"
    try:
        response = await client.request(
            request.method, request.url, params=request.params or None, json=request.json,
            headers=request.headers,
        )
    except httpx.TimeoutException:
        timeout = client.timeout.read or 0
        raise timed_out(TOOL, where, timeout) from None
    except httpx.TransportError as exc:
        raise unreachable(TOOL, where, type(exc).__name__) from None
    status = response.status_code
    if status >= 300:
        retry_after = response.headers.get("retry-after")
        special = backend.failure(status, retry_after)
        if special is not None:
            raise special
        if status in (400, 422):
            raise http_failure(TOOL, status, where, field="query")
        if status in (404, 405) or 300 <= status < 400:
            # The backend is not where the configuration says: not the model's to fix.
            raise ResearchToolError(
                ToolError.of(
                    "internal", "backend_misconfigured",
                    f"{TOOL}: {where} answered HTTP {status}: check research_tools.web.url",
                )
            )
        raise http_failure(TOOL, status, where, retry_after=retry_after)
    try:
        body = response.json()
    except ValueError:
        raise ResearchToolError(
            ToolError.of(
                "transient", "bad_response",
                f"{TOOL}: {where} answered {response.headers.get('content-type', 'no type')}, "
                "not JSON",
            )
        ) from None
    return backend.parse(body)[:limit]
