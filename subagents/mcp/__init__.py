"""Real tools over MCP: server processes, their tools as fanout tools, failure classification."""

from typing import TYPE_CHECKING, Any

from subagents.mcp.classify import McpToolError, classify_text
from subagents.mcp.spec import McpServerError, McpServerSpec, McpServerStartError

if TYPE_CHECKING:
    from subagents.mcp.server import McpServer
    from subagents.mcp.tools import McpToolSource, open_mcp_tools

__all__ = [
    "McpServer",
    "McpServerError",
    "McpServerSpec",
    "McpServerStartError",
    "McpToolError",
    "McpToolSource",
    "classify_text",
    "open_mcp_tools",
]

# The server and its tools import the MCP SDK (about 50 MiB): loaded on first use, so a
# job file that merely names mcp_servers, or a replay, never pays for it.
_LAZY = {
    "McpServer": "subagents.mcp.server",
    "McpToolSource": "subagents.mcp.tools",
    "open_mcp_tools": "subagents.mcp.tools",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'subagents.mcp' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
