"""How much of a request's body the service reads, and for how long: 413 past the size
limit, 408 past the deadline, on every route.

:class:`BodyLimit` stands in front of every route (pure ASGI): a Content-Length over the
limit is refused before anything of the body is read (and before the route is even
reached); a body of unknown length (chunked) is refused as soon as the bytes received pass
the limit, so the server never holds more than the limit of it. Either answer closes the
connection: the rest of the body is not read to keep it open.
"""

from __future__ import annotations

import json
from typing import Final

import anyio
from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.serve.problems import SUBMITTED

_CLOSE: Final = {"Connection": "close"}


def _mib(size: int) -> str:
    return f" ({size / (1 << 20):g} MiB)" if size % (1 << 16) == 0 else ""


class BodyTooLarge(HTTPException):
    """413: the body is over the limit (nothing past the limit is read)."""

    def __init__(self, limit: int, door: str = SUBMITTED, *, declared: int | None = None) -> None:
        came = (f", and its Content-Length says {declared:,}: none of it was read"
                if declared is not None else ": it was read no further than that")
        super().__init__(
            413, f"{door}: the body may be at most {limit:,} bytes{_mib(limit)}{came}",
            headers=dict(_CLOSE),
        )


class BodyTooSlow(HTTPException):
    """408: the body did not arrive within the deadline (a slow or stalled client)."""

    def __init__(self, deadline_s: float, door: str = SUBMITTED) -> None:
        super().__init__(408, f"{door}: the body did not arrive within {deadline_s:g} s",
                         headers=dict(_CLOSE))


async def read_body(
    request: Request, limit: int, deadline_s: float = 30.0, door: str = SUBMITTED
) -> bytes:
    """The request body, refused as soon as it passes ``limit`` bytes or ``deadline_s``
    seconds (a client trickling a body cannot hold a connection and a task forever).

    Raises:
        BodyTooLarge: Content-Length says so, or the bytes received do.
        BodyTooSlow: the whole body took longer than ``deadline_s``.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit, door, declared=int(declared))
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(deadline_s) as late:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(limit, door)
            chunks.append(chunk)
    if late.cancelled_caught:
        raise BodyTooSlow(deadline_s, door)
    return b"".join(chunks)


def _declared(scope: Scope) -> tuple[int | None, bool]:
    """The Content-Length a request declares (None: none, or not a number), and whether
    it has a body at all (a length above 0, or a transfer coding such as chunked)."""
    length: int | None = None
    coded = False
    # The server hands header names lower-cased (ASGI); one pass, no mapping built.
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = int(value) if value.strip().isdigit() else None
        elif name == b"transfer-encoding":
            coded = True
    return length, bool(length) or coded


class BodyLimit:
    """Every request's body at most ``limit`` bytes (413) and whole within ``deadline_s``
    of its head (408), the answers ``{"detail"}`` naming the request (pure ASGI).

    A request without a body passes untouched (an event stream's wait for its client to
    leave is no body read), as does everything after the body's last byte. So does the
    body of a route in ``reads_own``, once its Content-Length is within the limit: it
    reads with :func:`read_body`, which holds it to both (``POST /runs``, whose every
    microsecond on the event loop a burst of submissions waits for: a deadline around
    each receive here cost 6 µs a request).
    """

    def __init__(
        self, app: ASGIApp, limit: int, deadline_s: float,
        reads_own: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.app = app
        self.limit = limit
        self.deadline_s = deadline_s
        self.reads_own = reads_own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, has_body = _declared(scope)
        if not has_body:
            await self.app(scope, receive, send)
            return
        door = f"{scope['method']} {scope.get('path', '')}"
        if declared is not None and declared > self.limit:
            # Refused on its head: the route is not reached and nothing of the body is read.
            await _answer(send, BodyTooLarge(self.limit, door, declared=declared))
            return
        if (scope["method"], scope.get("path", "")) in self.reads_own:
            await self.app(scope, receive, send)
            return
        deadline = anyio.current_time() + self.deadline_s
        received = 0
        ended = False

        async def limited() -> Message:
            nonlocal received, ended
            if ended:
                return await receive()  # past the body: a disconnect, whenever it comes
            message: Message | None = None
            with anyio.move_on_after(deadline - anyio.current_time()):
                message = await receive()
            if message is None:
                raise BodyTooSlow(self.deadline_s, door)
            if message["type"] != "http.request":
                ended = True
                return message
            received += len(message.get("body", b""))
            if received > self.limit:  # only a body of unknown length gets here
                raise BodyTooLarge(self.limit, door)
            ended = not message.get("more_body", False)
            return message

        await self.app(scope, limited, send)


async def _answer(send: Send, refused: HTTPException) -> None:
    """Send ``refused`` as the service's ``{"detail"}`` answer, closing the connection."""
    body = json.dumps({"detail": refused.detail}, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in (refused.headers or {}).items()]
    await send({"type": "http.response.start", "status": refused.status_code,
                "headers": headers})
    await send({"type": "http.response.body", "body": body})
