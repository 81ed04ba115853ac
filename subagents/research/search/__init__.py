"""Search backends behind one interface: SearXNG, Brave, Tavily (docs/design.md §10)."""

from __future__ import annotations

from subagents.research.search.base import SearchBackend, SearchHit, SearchRequest, run_search
from subagents.research.search.brave import BRAVE_URL, BraveBackend
from subagents.research.search.searxng import SearxngBackend
from subagents.research.search.tavily import TAVILY_URL, TavilyBackend

__all__ = [
    "BRAVE_URL",
    "TAVILY_URL",
    "BraveBackend",
    "SearchBackend",
    "SearchHit",
    "SearchRequest",
    "SearxngBackend",
    "TavilyBackend",
    "make_backend",
    "run_search",
]


def make_backend(name: str, *, url: str | None, key: str | None) -> SearchBackend:
    """The backend called ``name``; brave and tavily need ``key``."""
    if name == "searxng":
        assert url is not None
        return SearxngBackend(url)
    assert key is not None
    if name == "brave":
        return BraveBackend(key, url)
    if name == "tavily":
        return TavilyBackend(key, url)
    raise ValueError(f"unknown search backend {name!r}")
