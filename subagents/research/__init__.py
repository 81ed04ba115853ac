"""The built-in research tools: web search and fetch, a local document index
(docs/design.md §10)."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.research.docindex import DocIndex, IndexStats, index_path
    from subagents.research.errors import ResearchToolError
    from subagents.research.guard import AddressGuard, blocked_reason
    from subagents.research.spec import (
        DocsSpec,
        FetchSpec,
        ResearchToolsSpec,
        WebSpec,
        research_tool_names,
        resolve_docs_folder,
    )
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

# Each name is imported from its module on first use (shared/lazy.py): the tools import
# httpx, trafilatura and pypdf, so a job file that merely declares research_tools, or a
# replay of a recording, never pays for them, and importing one part of the package loads
# nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.research.docindex": ("DocIndex", "IndexStats", "index_path"),
    "subagents.research.errors": ("ResearchToolError",),
    "subagents.research.guard": ("AddressGuard", "blocked_reason"),
    "subagents.research.spec": (
        "DocsSpec", "FetchSpec", "ResearchToolsSpec", "WebSpec", "research_tool_names",
        "resolve_docs_folder",
    ),
    "subagents.research.tools": ("ResearchTools", "open_research_tools"),
})
