"""Tools served by MCP servers: a tool source whose tools are ``SERVER.TOOL``.

:func:`open_mcp_tools` starts every declared server once (concurrently) and yields a
:class:`McpToolSource` shared by all subagents of the job; leaving it stops the
servers. Each server tool becomes a :class:`~subagents.tool.Tool` whose schema is the
tool's ``inputSchema``, so bad arguments are refused before the call; a result with
``is_error`` becomes a categorised failure (:mod:`subagents.mcp.classify`); the tool's
annotations give its side-effect flags (the MCP defaults when absent: not read-only,
not idempotent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import types

from subagents.mcp.classify import McpToolError, error_from_result, result_text
from subagents.mcp.server import McpServer
from subagents.mcp.spec import McpServerSpec, McpServerStartError
from subagents.tool import CallContext, Tool, ToolOutput

__all__ = ["McpToolSource", "open_mcp_tools", "tool_flags"]

# Sent in every request's _meta so a server can log or deduplicate the logical call.
META_TRACE_ID = "fanout/trace_id"
META_IDEMPOTENCY_KEY = "fanout/idempotency_key"


class McpToolSource:
    """The tools of a job's MCP servers, the same for every subtask."""

    def __init__(self, servers: Mapping[str, McpServer]) -> None:
        self.servers = dict(servers)
        self.tools: dict[str, Tool] = {}
        for server in self.servers.values():
            for tool in server.tools:
                built = mcp_tool(server, tool)
                self.tools[built.name] = built

    def for_subtask(self, subtask_id: str) -> Mapping[str, Tool]:
        """Every server tool: MCP servers keep no per-subtask state."""
        return self.tools


@asynccontextmanager
async def open_mcp_tools(
    specs: Mapping[str, McpServerSpec], *, base_dir: str | Path | None = None
) -> AsyncIterator[McpToolSource]:
    """Start every server in ``specs``; yield their tools; stop them on the way out.

    Args:
        specs: the job's servers by name.
        base_dir: where a relative ``cwd`` is resolved (the job file's directory).

    Raises:
        McpServerStartError: a server cannot start (the first, in declaration order);
            no server is left running.
    """
    failures: dict[str, McpServerStartError] = {}
    body_error: Exception | None = None
    async with anyio.create_task_group() as tg:
        servers = {
            name: McpServer(name, spec, tg, cwd=_resolve_cwd(spec.cwd, base_dir))
            for name, spec in specs.items()
        }

        async def start(server: McpServer) -> None:
            try:
                await server.start()
            except McpServerStartError as exc:
                failures[server.name] = exc

        try:
            async with anyio.create_task_group() as starting:
                for server in servers.values():
                    starting.start_soon(start, server)
            if not failures:
                try:
                    yield McpToolSource(servers)
                except Exception as exc:
                    # Re-raised as itself below, once the servers are down: raised here it
                    # would leave this task group wrapped in an ExceptionGroup.
                    body_error = exc
        finally:
            for server in servers.values():
                server.stop()
    if failures:
        raise next(failures[name] for name in specs if name in failures)
    if body_error is not None:
        raise body_error


def _resolve_cwd(cwd: str | None, base_dir: str | Path | None) -> str | None:
    if cwd is None or base_dir is None or Path(cwd).is_absolute():
        return cwd
    return str(Path(base_dir) / cwd)


def tool_flags(tool: types.Tool) -> tuple[bool, bool]:
    """``(side_effects, idempotent)`` from a tool's annotations, with MCP's defaults.

    Absent hints mean what the MCP spec says: a tool may change its environment and is
    not idempotent; so a timeout on such a tool is an unknown state, never retried.
    """
    hints = tool.annotations
    read_only = bool(hints and hints.read_only_hint)
    if read_only:
        return False, True
    return True, bool(hints and hints.idempotent_hint)


def mcp_tool(server: McpServer, tool: types.Tool) -> Tool:
    """A fanout Tool that calls ``tool`` on ``server``."""
    qualified = f"{server.name}.{tool.name}"
    schema = dict(tool.input_schema)
    side_effects, idempotent = tool_flags(tool)

    async def invoke(arguments: dict[str, Any], ctx: CallContext | None) -> Any:
        meta = (
            {META_TRACE_ID: ctx.trace_id, META_IDEMPOTENCY_KEY: ctx.idempotency_key}
            if ctx is not None
            else None
        )
        result = await server.call(
            tool.name, arguments, qualified=qualified, schema=schema, meta=meta
        )
        if result.is_error:
            raise McpToolError(
                error_from_result(
                    result.structured_content,
                    result_text(result.content),
                    tool=qualified,
                    args=arguments,
                    schema=schema,
                )
            )
        return result_data(result)

    async def body(ctx: CallContext, **arguments: Any) -> Any:
        return await invoke(arguments, ctx)

    async def plain(**arguments: Any) -> Any:
        return await invoke(arguments, None)

    # A server tool with an argument named `ctx` gets it; it then goes without _meta.
    wants_context = "ctx" not in (schema.get("properties") or {})
    return Tool.from_schema(
        qualified,
        body if wants_context else plain,
        schema,
        description=tool.description or tool.title or "",
        side_effects=side_effects,
        idempotent=idempotent,
        wants_context=wants_context,
    )


def result_data(result: types.CallToolResult) -> Any:
    """A successful result's data: its structured content, else its text, else its blocks."""
    if result.structured_content is not None:
        return result.structured_content
    content = result.content
    if not content:
        return ToolOutput(data=None, empty=True)
    if all(block.type == "text" for block in content):
        return result_text(content)
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in content]
