"""One MCP server over stdio, shared by a job's subagents: started once, restarted lazily.

Lifecycle. :meth:`McpServer.start` spawns the server and runs ``initialize`` and
``tools/list`` within ``startup_timeout_s``; a server that cannot do so is a
:class:`~subagents.mcp_spec.McpServerStartError` before any subagent runs. Each
connection (process, stdio pipes, ``ClientSession``) is owned by one task of the job's
task group, because the SDK's context managers must be entered and left in the same
task; the task holds the connection open until it is told to stop.

Restart. A call whose server crashes or closes its pipe fails ``transient``
(``connection_reset``) and marks that connection dead. The next call, usually the
executor's retry, finds it dead and starts a new one under a lock, so callers that
failed together restart it once. Nothing here retries: the executor is the one retry
layer.

Concurrency. A per-server ``anyio.CapacityLimiter`` bounds the calls in flight; a call
waiting for a slot waits inside its attempt, so the tool timeout covers the wait.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc
import pydantic
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from shared.envelope import ToolError
from subagents.mcp.classify import (
    McpToolError,
    connection_lost,
    error_from_protocol,
    malformed_reply,
)
from subagents.mcp.guard import GuardedRead, GuardedWrite, ReplyGuard
from subagents.mcp.spec import McpServerSpec, McpServerStartError

__all__ = ["McpServer"]

_CLIENT_INFO = types.Implementation(name="fanout", version="0.1.0")
_CONNECTION_CLOSED = -32000  # mcp_types.CONNECTION_CLOSED: the SDK's "pipe closed" code
_MAX_LIST_PAGES = 100
# Exceptions that mean the transport under the session is gone, not that a call failed.
_TRANSPORT_GONE: tuple[type[BaseException], ...] = (
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    BrokenPipeError,
    ConnectionResetError,
)


@dataclass(eq=False)
class _Connection:
    """One running server process and its session; ``stop`` lets its owner task close it."""

    session: ClientSession
    tools: list[types.Tool]
    server_info: types.Implementation | None
    stderr: IO[str]
    guard: ReplyGuard
    alive: bool = True
    stop: anyio.Event = field(default_factory=anyio.Event)


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (task groups wrap errors)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _tail(stream: IO[str], lines: int = 3) -> str:
    """The last lines a server wrote to stderr, for an error message."""
    # pread leaves the file offset alone: the server shares it and may still be writing.
    try:
        fd = stream.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - 4096)
        text = os.pread(fd, size - start, start).decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[-400:]


class McpServer:
    """A job's connection to one MCP server: start, call, restart after a crash, stop."""

    def __init__(
        self,
        name: str,
        spec: McpServerSpec,
        task_group: anyio.abc.TaskGroup,
        *,
        cwd: str | Path | None = None,
    ) -> None:
        self.name = name
        self.spec = spec
        self.cwd = cwd if cwd is not None else spec.cwd
        self.limiter = anyio.CapacityLimiter(spec.max_concurrent_calls)
        self.restarts = 0
        self.calls_sent = 0
        self._task_group = task_group
        self._lock = anyio.Lock()
        self._connection: _Connection | None = None

    @property
    def tools(self) -> list[types.Tool]:
        """The tools the server listed when it started."""
        return self._connection.tools if self._connection is not None else []

    @property
    def server_info(self) -> types.Implementation | None:
        """The name and version the server gave in ``initialize``."""
        return self._connection.server_info if self._connection is not None else None

    @property
    def session(self) -> ClientSession | None:
        """The live session, for a bare ``call_tool`` (the overhead benchmark makes them)."""
        connection = self._connection
        return connection.session if connection is not None and connection.alive else None

    @property
    def command(self) -> str:
        """The command as the job file writes it."""
        return self.spec.display()

    def _parameters(self) -> StdioServerParameters:
        program, *args = self.spec.argv()
        return StdioServerParameters(
            command=program,
            args=args,
            env=dict(self.spec.env) or None,
            cwd=self.cwd,
            # A line that is not UTF-8 is one bad message (dropped as unparseable), not
            # the end of the connection: with "strict" it killed the reader and every
            # later call to this server timed out.
            encoding_error_handler="replace",
        )

    async def start(self) -> None:
        """Start the server and list its tools.

        Raises:
            McpServerStartError: the command cannot run, the server exits, or it does not
                finish ``initialize`` and ``tools/list`` within ``startup_timeout_s``.
        """
        async with self._lock:
            if self._connection is None or not self._connection.alive:
                self._connection = await self._connect()

    def stop(self) -> None:
        """Ask the running connection to close (its owner task stops the process)."""
        if self._connection is not None:
            self._connection.alive = False
            self._connection.stop.set()

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        qualified: str,
        schema: dict[str, Any],
        meta: dict[str, Any] | None = None,
    ) -> types.CallToolResult:
        """Call ``tool`` once; a lost connection or protocol error raises McpToolError.

        Args:
            tool: the tool's name on the server.
            arguments: its arguments, already checked against its schema.
            qualified: ``SERVER.TOOL``, for messages.
            schema: the tool's input schema, to name the field of a validation error.
            meta: sent as the request's ``_meta`` (fanout's trace id and idempotency key).
        """
        async with self.limiter:
            connection = await self._current(qualified)
            self.calls_sent += 1
            watch = connection.guard.watch()
            try:
                with watch:
                    result = await connection.session.call_tool(
                        tool, arguments, meta=meta  # type: ignore[arg-type]  # an open TypedDict
                    )
            except MCPError as exc:
                if exc.code == _CONNECTION_CLOSED:
                    connection.alive = False
                    raise McpToolError(
                        connection_lost(qualified, self.name, self._exit_detail(connection))
                    ) from exc
                error = error_from_protocol(
                    exc.code, exc.message, tool=qualified, args=arguments, schema=schema
                )
                raise McpToolError(error) from exc
            except _TRANSPORT_GONE as exc:
                connection.alive = False
                raise McpToolError(
                    connection_lost(qualified, self.name, type(exc).__name__)
                ) from exc
            except pydantic.ValidationError as exc:
                # The *server's* answer broke the protocol: a bug there, not bad input here.
                error = ToolError.of(
                    "internal",
                    "malformed_result",
                    f"{qualified}: the server sent a malformed result: {exc.errors()[0]['msg']}",
                )
                raise McpToolError(error) from exc
            finally:
                connection.guard.done(watch)
            broken = connection.guard.broken
            if watch.cancelled_caught and broken is not None:
                # A reply that cannot be a JSON-RPC answer: the call ends now, not at its
                # timeout, and the server is restarted for the next attempt (ReplyGuard).
                connection.alive = False
                connection.stop.set()
                raise McpToolError(malformed_reply(qualified, self.name, broken))
        return result

    def _exit_detail(self, connection: _Connection) -> str:
        # One line at most: this text enters the subagent's context.
        tail = _tail(connection.stderr, lines=1)[:200]
        return f"its last words: {tail}" if tail else "the process exited or closed stdout"

    async def _current(self, qualified: str) -> _Connection:
        """The live connection, restarting a dead one (once, however many callers wait)."""
        connection = self._connection
        if connection is not None and connection.alive and connection.guard.broken is None:
            return connection
        async with self._lock:
            connection = self._connection
            if connection is not None and connection.alive and connection.guard.broken is None:
                return connection
            if connection is not None:
                connection.stop.set()
            try:
                self._connection = await self._connect()
            except McpServerStartError as exc:
                error = ToolError.of(
                    "transient", "unavailable", f"{qualified}: could not restart: {exc}"
                )
                raise McpToolError(error) from exc
            self.restarts += 1
            return self._connection

    async def _connect(self) -> _Connection:
        try:
            connection: _Connection = await self._task_group.start(self._own_connection)
        except McpServerStartError:
            raise
        except Exception as exc:  # whatever stopped the start, said as a start error
            raise self._start_error(_leaf(exc)) from None
        return connection

    def _start_error(self, exc: BaseException, stderr: str = "") -> McpServerStartError:
        program = self.spec.argv()[0]
        if isinstance(exc, OSError) and self.cwd is not None and not Path(self.cwd).is_dir():
            problem = f"cannot start: working directory {str(self.cwd)!r} does not exist"
        elif isinstance(exc, FileNotFoundError):
            problem = f"cannot start: {program!r} was not found"
        elif isinstance(exc, PermissionError):
            problem = f"cannot start: {program!r} is not executable"
        elif isinstance(exc, TimeoutError):
            problem = (
                f"did not finish initialize and tools/list within "
                f"{self.spec.startup_timeout_s:g}s"
            )
        elif isinstance(exc, MCPError) and exc.code == _CONNECTION_CLOSED:
            problem = "exited before it finished initialize"
        else:
            problem = f"failed to start: {type(exc).__name__}: {exc}"
        if stderr:
            problem += f" (stderr: {stderr})"
        return McpServerStartError(self.name, self.command, problem)

    async def _own_connection(
        self, *, task_status: anyio.abc.TaskStatus[_Connection] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Open a connection, hand it to the starter, and hold it until told to stop."""
        # The server's stderr goes to a file: it must not scribble over the live display,
        # and its last lines explain a server that will not start or crashes.
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
            connection: _Connection | None = None
            guard = ReplyGuard()
            try:
                async with (
                    stdio_client(self._parameters(), errlog=stderr) as (read, write),
                    ClientSession(
                        GuardedRead(read, guard),
                        GuardedWrite(write, guard),
                        client_info=_CLIENT_INFO,
                    ) as session,
                ):
                    with anyio.fail_after(self.spec.startup_timeout_s):
                        init = await session.initialize()
                        tools = await _list_all_tools(session)
                    connection = _Connection(
                        session=session,
                        tools=tools,
                        server_info=init.server_info,
                        stderr=stderr,
                        guard=guard,
                    )
                    task_status.started(connection)
                    await connection.stop.wait()
            except Exception as exc:
                if connection is None:
                    raise self._start_error(_leaf(exc), _tail(stderr)) from None
                # A connection that already served: its failure (a crashed server's
                # teardown) was reported to the call it broke; the job goes on.
                connection.alive = False


async def _list_all_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool the server lists, following pagination cursors."""
    listing = await session.list_tools()
    tools = list(listing.tools)
    cursor = listing.next_cursor
    pages = 1
    while cursor is not None and pages < _MAX_LIST_PAGES:
        listing = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        tools.extend(listing.tools)
        cursor = listing.next_cursor
        pages += 1
    return tools

