"""The built-in research tools: web search and fetch, a local document index (DESIGN §10)."""

from __future__ import annotations

from subagents.research.docindex import DocIndex, IndexStats, index_path
from subagents.research.errors import ResearchToolError
from subagents.research.guard import AddressGuard, blocked_reason
from subagents.research.spec import (
    DocsSpec,
    FetchSpec,
    ResearchToolsSpec,
    WebSpec,
    research_tool_names,
)
from subagents.research.tools import ResearchTools, open_research_tools, resolve_docs_folder

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
