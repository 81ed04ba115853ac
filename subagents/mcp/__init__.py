"""Real tools over MCP: server processes, their tools as fanout tools, failure classification."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.mcp.classify import McpToolError, classify_text
    from subagents.mcp.server import McpServer
    from subagents.mcp.spec import McpServerError, McpServerSpec, McpServerStartError
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

# Each name is imported from its module on first use (shared/lazy.py): the server and its
# tools import the MCP SDK (about 50 MiB), so a job file that merely names mcp_servers, or
# a replay, never pays for it, and importing one part of the package loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.mcp.classify": ("McpToolError", "classify_text"),
    "subagents.mcp.server": ("McpServer",),
    "subagents.mcp.spec": ("McpServerError", "McpServerSpec", "McpServerStartError"),
    "subagents.mcp.tools": ("McpToolSource", "open_mcp_tools"),
})
