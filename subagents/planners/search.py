"""Search first (docs/design.md §7): which tools are searches, and asking an endpoint what it is
before a subtask's first model call."""

from __future__ import annotations

from subagents.models.base import ModelClient
from subagents.tool import Tool

__all__ = ["SEARCH_TOOLS", "is_search", "probe_endpoint_of"]

SEARCH_TOOLS = frozenset({"docs.search", "web.search"})
"""The built-in searches (docs/design.md §10); any other tool is one when declared ``search:
true``."""


async def probe_endpoint_of(client: ModelClient) -> None:
    """Ask a live endpoint what it is (its window, its slots) before the first request.

    Once per endpoint and process; a client without a probe (the scripted model, the
    official APIs) has nothing to ask. A probe that fails says nothing (the window is
    then learned from a refusal).
    """
    probe = getattr(client, "server_profile", None)
    if probe is not None:
        await probe()


def is_search(tool: Tool) -> bool:
    """Whether ``tool`` is a search a subtask starts with (docs/design.md §7, "Search first")."""
    return tool.search or tool.name in SEARCH_TOOLS
