"""The built-in research tools: web search and fetch, a local document index (DESIGN §10)."""

from typing import TYPE_CHECKING, Any

from subagents.research.spec import (
    DocsSpec,
    FetchSpec,
    ResearchToolsSpec,
    WebSpec,
    research_tool_names,
    resolve_docs_folder,
)

if TYPE_CHECKING:
    from subagents.research.docindex import DocIndex, IndexStats, index_path
    from subagents.research.errors import ResearchToolError
    from subagents.research.guard import AddressGuard, blocked_reason
    from subagents.research.tools import ResearchTools, open_research_tools

__all__ = [
    "AddressGuard",
    "DocIndex",
    "DocsSpec",
    "FetchSpec",
    "IndexStats",
    "ResearchToolError",
    "ResearchTools",
    "ResearchToolsSpec",
    "WebSpec",
    "blocked_reason",
    "index_path",
    "open_research_tools",
    "research_tool_names",
    "resolve_docs_folder",
]

# The tools import httpx, trafilatura and pypdf: loaded on first use, so a job file that
# merely declares research_tools, or a replay of a recording, never pays for them.
_LAZY = {
    "DocIndex": "subagents.research.docindex",
    "IndexStats": "subagents.research.docindex",
    "index_path": "subagents.research.docindex",
    "ResearchToolError": "subagents.research.errors",
    "AddressGuard": "subagents.research.guard",
    "blocked_reason": "subagents.research.guard",
    "ResearchTools": "subagents.research.tools",
    "open_research_tools": "subagents.research.tools",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'subagents.research' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
