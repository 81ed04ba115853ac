"""What stands before the MCP endpoint over HTTP: the bearer token, the body's limits.

Both are plain ASGI wrappers around the SDK's streamable HTTP application, so every
request meets them before the SDK reads a byte of it: the token as ``fanout serve``
checks it (constant time, 401 with ``WWW-Authenticate``), then the body whole within a
size (413) and a deadline (408), so a client trickling a body holds no task for long.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

import anyio

Asgi = Any  # an ASGI application: (scope, receive, send) -> None


async def _answer(send: Any, status: int, detail: str, headers: list[tuple[bytes, bytes]]
                  ) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *headers]})
    await send({"type": "http.response.body", "body": body})


class BearerGuard:
    """Every HTTP request needs ``Authorization: Bearer TOKEN``; else 401."""

    def __init__(self, app: Asgi, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                kind, _, given = bytes(value).partition(b" ")
                if kind.lower() != b"bearer":
                    given = b""
        if given and hmac.compare_digest(given.strip(), self._token):
            await self.app(scope, receive, send)
            return
        detail = "a valid bearer token is required" if given else (
            "missing Authorization: Bearer TOKEN")
        await _answer(send, 401, detail, [(b"www-authenticate", b'Bearer realm="fanout"')])


class BodyLimits:
    """A request's body is read whole first: at most ``max_bytes`` (else 413), within
    ``deadline_s`` (else 408); the application then reads it as sent."""

    def __init__(self, app: Asgi, *, max_bytes: int, deadline_s: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.deadline_s = deadline_s

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.deadline_s) as late:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # the client left: nothing to answer
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    await self._too_large(send)
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if late.cancelled_caught:
            await _answer(send, 408, f"the request's body did not arrive within "
                          f"{self.deadline_s:g} s", [(b"connection", b"close")])
            return
        whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        given = False

        async def replay() -> Any:
            nonlocal given
            if not given:
                given = True
                return whole
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)

    async def _too_large(self, send: Any) -> None:
        await _answer(send, 413, f"the request is larger than {self.max_bytes} bytes",
                      [(b"connection", b"close")])
