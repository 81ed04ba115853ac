"""Real tools over MCP: server processes, their tools as fanout tools, failure classification."""

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
