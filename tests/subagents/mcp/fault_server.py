"""A fault-injecting MCP server for the MCP tests: slow, crashing and failing tools.

Run as ``python fault_server.py`` (the tests start it with ``sys.executable``). State
that must survive a crash (``crash_once``) lives in a marker file the test names.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)
WRITES = ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False)

server: MCPServer[Any] = MCPServer("fanout-fault", version="1.0", subscriptions=False)

_slow_seen: set[str] = set()
_flaky_failures: dict[str, int] = {}
_in_flight = 0
_peak = 0


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(annotations=READ_ONLY)
def pid() -> int:
    """The server's process id (it changes when the server is restarted)."""
    return os.getpid()


@server.tool(annotations=READ_ONLY)
async def slow_once(key: str, seconds: float) -> str:
    """Sleep ``seconds`` the first time ``key`` is seen, answer at once after that."""
    if key not in _slow_seen:
        _slow_seen.add(key)
        await anyio.sleep(seconds)
        return "slow"
    return "fast"


@server.tool(annotations=READ_ONLY)
async def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return "slept"


@server.tool(annotations=READ_ONLY)
def crash_once(marker: str) -> int:
    """Exit the process mid-call unless ``marker`` exists (it is created first)."""
    path = Path(marker)
    if not path.exists():
        path.write_text("crashed", encoding="utf-8")
        os._exit(1)
    return os.getpid()


@server.tool(annotations=READ_ONLY)
async def die(delay: float = 0.0) -> str:
    """Exit the process after ``delay`` seconds, mid-call."""
    await anyio.sleep(delay)
    os._exit(1)


@server.tool(annotations=READ_ONLY)
async def probe(seconds: float) -> int:
    """Hold a call open for ``seconds``; returns the most calls seen in flight at once."""
    global _in_flight, _peak
    _in_flight += 1
    _peak = max(_peak, _in_flight)
    try:
        await anyio.sleep(seconds)
    finally:
        _in_flight -= 1
    return _peak


@server.tool(annotations=READ_ONLY)
def structured_error(category: str, message: str, retryable: bool | None = None) -> CallToolResult:
    """An is_error result whose structuredContent carries errorCategory (and isRetryable)."""
    structured: dict[str, Any] = {"errorCategory": category, "message": message}
    if retryable is not None:
        structured["isRetryable"] = retryable
    return CallToolResult(
        content=[TextContent(type="text", text=message)],
        structured_content=structured,
        is_error=True,
    )


@server.tool(annotations=READ_ONLY)
def fail_text(message: str) -> str:
    """An is_error result with only this text."""
    raise ToolError(message)


@server.tool(annotations=READ_ONLY)
def flaky(key: str, message: str, failures: int) -> str:
    """Fail with ``message`` the first ``failures`` calls for ``key``, then succeed."""
    seen = _flaky_failures.get(key, 0)
    if seen < failures:
        _flaky_failures[key] = seen + 1
        raise ToolError(message)
    return f"ok after {seen} failures"


@server.tool(annotations=WRITES)
async def slow_write(seconds: float) -> str:
    """A tool that changes the world and is not idempotent; sleeps first."""
    await anyio.sleep(seconds)
    return "written"


@server.tool(annotations=READ_ONLY)
def nothing() -> CallToolResult:
    """A successful result with no content: a valid empty result."""
    return CallToolResult(content=[])


if __name__ == "__main__":
    if "--exit-at-start" in sys.argv:
        sys.exit("fault server: asked to exit at start")
    server.run("stdio")
