"""Catching a server's reply that cannot be a JSON-RPC answer the moment it arrives.

The SDK drops such a line (not JSON, not UTF-8, a response without ``result`` or
``error``, an answer to an id nobody asked) and the call it was meant to answer waits
for its timeout: with ``tool_timeout_s: 20`` and two attempts a job took 82 s to give
up on a server that only ever answered badly. :class:`ReplyGuard` sits between the
stdio transport and the session: it notes the id of every request the client sends and
looks at every message the server sends back; the first one that cannot answer a
request marks the connection broken and cancels the calls in flight, which then fail
``transient`` (``malformed_reply``) at once. The server is restarted for the next
attempt, as after a crash: after a garbled line nothing later on that pipe is trusted.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any, Self

import anyio
from mcp import types
from mcp.shared.message import SessionMessage

__all__ = ["GuardedRead", "GuardedWrite", "ReplyGuard"]

# The SDK logs every unparseable line with its traceback; with no logging configured
# Python's last-resort handler would print that over the live display. The failure is
# reported where it belongs, in the call's envelope; an application that configures
# logging still receives these records through propagation.
logging.getLogger("mcp").addHandler(logging.NullHandler())


def _key(request_id: Any) -> str:
    # "7" and 7 name the same request for the SDK (coerce_request_id): compare as text.
    return str(request_id)


class ReplyGuard:
    """What one connection has asked, and the first reply that could not answer it."""

    def __init__(self) -> None:
        self.asked: set[str] = set()
        self.broken: str | None = None
        self._calls: set[anyio.CancelScope] = set()

    def sent(self, item: SessionMessage) -> None:
        """Note the id of a request the client sends."""
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            self.asked.add(_key(message.id))

    def received(self, item: SessionMessage | Exception) -> None:
        """Look at one item from the server; break the connection on a bad reply."""
        if isinstance(item, Exception):
            # The transport could not parse the line: not JSON, not UTF-8 (decoded with
            # replacement characters, so no longer JSON), or JSON that is no JSON-RPC
            # message at all (a response with neither result nor error).
            self.fail(f"a line that is not a JSON-RPC message ({type(item).__name__})")
            return
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            key = _key(message.id) if message.id is not None else None
            if key is None or key not in self.asked:
                self.fail(f"an answer to id {message.id!r}, which was never asked")
            # A late answer to a request that timed out stays legal: ids are kept.

    def fail(self, detail: str) -> None:
        """Mark the connection broken (first reason wins) and end every call in flight."""
        if self.broken is None:
            self.broken = detail
        for scope in self._calls:
            scope.cancel()

    def watch(self) -> anyio.CancelScope:
        """A scope for one call, cancelled if a bad reply arrives while it runs."""
        scope = anyio.CancelScope()
        if self.broken is not None:
            scope.cancel()
        self._calls.add(scope)
        return scope

    def done(self, scope: anyio.CancelScope) -> None:
        """Forget a finished call's scope."""
        self._calls.discard(scope)


class GuardedRead:
    """The transport's read stream, every item shown to the guard on its way through."""

    def __init__(self, inner: Any, guard: ReplyGuard) -> None:
        self._inner = inner
        self._guard = guard

    @property
    def last_context(self) -> Any:
        """The sender's context, as the inner stream gives it (the SDK looks it up)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        """The next item from the server."""
        item: SessionMessage | Exception = await self._inner.receive()
        self._guard.received(item)
        return item

    async def aclose(self) -> None:
        """Close the inner stream."""
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class GuardedWrite:
    """The transport's write stream, every request's id noted by the guard."""

    def __init__(self, inner: Any, guard: ReplyGuard) -> None:
        self._inner = inner
        self._guard = guard

    async def send(self, item: SessionMessage, /) -> None:
        """Send one message to the server."""
        self._guard.sent(item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        """Close the inner stream."""
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
