"""A real HTTP/1.1 server on 127.0.0.1: scripted replies in, every request recorded.

It runs an asyncio server (h11 for the protocol) in a background thread, so a test or
a benchmark on any event loop, or none, talks to it over a real socket. Unlike an ASGI
app behind uvicorn, it can also break a connection on purpose (``Reply(drop=True)``
resets it) and answer late (``delay_s``), which is how timeouts and resets are tested.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import h11


@dataclass(frozen=True)
class Reply:
    """One scripted answer: status, headers, a JSON body (or raw ``str``/``bytes``).

    ``delay_s`` waits before answering; ``drop`` closes the connection with a reset
    instead of answering (after the delay). ``chunks`` makes it a streamed answer (an
    event stream: each chunk written as it comes, ``chunk_delay_s`` apart, the body
    ignored); ``drop_after`` resets the connection after that many chunks (a stream that
    breaks off). A provider server turns a JSON answer into its own event stream when the
    request asks for one (:meth:`LoopbackServer.streamed`); ``chunk_delay_s`` set on a
    JSON answer is kept for it.
    """

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False
    chunks: tuple[bytes, ...] | None = None
    chunk_delay_s: float = 0.0
    drop_after: int | None = None

    def encoded(self) -> bytes:
        """The body as bytes on the wire."""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return b"" if self.body is None else json.dumps(self.body).encode()


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server received it; header names are lower-case."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)

    @property
    def api_key(self) -> str | None:
        """The key the client sent: ``x-api-key``, else ``Authorization: Bearer``."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


Responder = Reply | Callable[[RecordedRequest], Reply]
"""A reply, or a function of the request that makes one."""


class LoopbackServer:
    """Serves ``POST {path}``: replies from a queue, then the default reply.

    Subclasses give the provider's wire format: :attr:`path`, :meth:`default_reply`,
    :meth:`error_reply` and :attr:`base_url`. Use as a context manager, or
    :meth:`start` / :meth:`stop`; one server can serve many tests (:meth:`clear`).
    """

    path = "/"

    def __init__(self, *, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.side_requests: list[RecordedRequest] = []
        self._queue: deque[Responder] = deque()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    # -- what a provider subclass defines -------------------------------------------

    @property
    def base_url(self) -> str:
        """What the SDK's ``base_url`` is set to."""
        return self.origin

    def default_reply(self, request: RecordedRequest) -> Reply:
        """The answer when the queue is empty."""
        return Reply(200, {})

    def side_route(self, request: RecordedRequest) -> Reply | None:
        """An answer for a request besides ``POST {path}`` (kept out of ``requests``)."""
        return None

    def error_reply(self, status: int, message: str) -> Reply:
        """An error in the provider's shape (unknown path, wrong key)."""
        return Reply(status, {"error": {"message": message}})

    def streamed(self, request: RecordedRequest, reply: Reply) -> Reply:
        """``reply`` as the provider streams it when ``request`` asks (else as it is)."""
        return reply

    def unauthorized(self, request: RecordedRequest) -> Reply:
        """The answer to a request without the server's key."""
        return self.error_reply(401, "invalid api key")

    # -- scripting and inspection ---------------------------------------------------

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def push(self, *responders: Responder) -> None:
        """Queue replies, answered in order, one per request."""
        with self._lock:
            self._queue.extend(responders)

    def clear(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.side_requests.clear()

    @property
    def pending(self) -> int:
        """Queued replies not yet answered."""
        with self._lock:
            return len(self._queue)

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> Self:
        """Bind a free port and serve in a background thread; returns when ready."""
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self._failure is not None:
            raise RuntimeError(f"{type(self).__name__} did not start") from self._failure
        return self

    def stop(self) -> None:
        """Stop serving, dropping open connections."""
        if self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already gone
                self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(10)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @contextlib.contextmanager
    def serving(self) -> Iterator[Self]:
        """``with server.serving():`` for a server built elsewhere."""
        self.start()
        try:
            yield self
        finally:
            self.stop()

    # -- the server -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as exc:  # reported by start(), in the thread that asked
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        # A deep accept queue: with asyncio's default (100), a burst of a few hundred
        # connections (a benchmark's concurrent runs) overflows it, and the kernel drops
        # handshakes that the clients only retry a second later.
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=2048)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stopping.wait()
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    def _answer(self, request: RecordedRequest) -> Reply:
        with self._lock:
            side = self.side_route(request)
            if side is not None:
                self.side_requests.append(request)
                return side
            self.requests.append(request)
            if request.method != "POST" or request.path.split("?")[0] != self.path:
                return self.error_reply(404, f"no route for {request.method} {request.path}")
            if self.api_key is not None and request.api_key != self.api_key:
                return self.unauthorized(request)
            responder = self._queue.popleft() if self._queue else self.default_reply
        reply = responder(request) if callable(responder) else responder
        return reply if reply.chunks is not None else self.streamed(request, reply)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while await self._one_exchange(conn, reader, writer):
                conn.start_next_cycle()
        except (h11.ProtocolError, ConnectionError):
            pass  # the client went away or spoke nonsense: nothing left to answer
        except asyncio.CancelledError:
            # Only stop() cancels a connection (idle keep-alive, or a reply still
            # waiting out its delay). On Python 3.11 a start_server handler must not end
            # cancelled: asyncio's done-callback calls task.exception() and logs noise.
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _one_exchange(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Read one request, answer it; whether the connection may carry another."""
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(65536))
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                break
            else:  # ConnectionClosed, or a client that closed between requests
                return False
        request = RecordedRequest(
            method=head.method.decode(),
            path=head.target.decode(),
            headers={k.decode().lower(): v.decode() for k, v in head.headers},
            body=bytes(body),
        )
        reply = self._answer(request)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.drop:
            _reset(writer)
            return False
        if reply.chunks is not None:
            return await self._stream(conn, writer, reply)
        payload = reply.encoded()
        headers = {"content-type": "application/json", **reply.headers}
        headers["content-length"] = str(len(payload))
        for data in (
            conn.send(h11.Response(status_code=reply.status, headers=list(headers.items()))),
            conn.send(h11.Data(data=payload)),
            conn.send(h11.EndOfMessage()),
        ):
            writer.write(data or b"")
        await writer.drain()
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE


    async def _stream(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, reply: Reply
    ) -> bool:
        """Write a streamed answer chunk by chunk (chunked transfer encoding)."""
        assert reply.chunks is not None
        headers = {"content-type": "text/event-stream", "cache-control": "no-cache",
                   **reply.headers}
        writer.write(
            conn.send(h11.Response(status_code=reply.status, headers=list(headers.items())))
            or b""
        )
        await writer.drain()
        for n, chunk in enumerate(reply.chunks):
            if reply.drop_after is not None and n >= reply.drop_after:
                _reset(writer)
                return False
            if n and reply.chunk_delay_s:
                await asyncio.sleep(reply.chunk_delay_s)
            writer.write(conn.send(h11.Data(data=chunk)) or b"")
            await writer.drain()
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await writer.drain()
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event: ``event:`` (when named) and ``data:`` as compact JSON."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def words(text: str) -> list[str]:
    """``text`` in the pieces a model streams it in: each word with the space after it."""
    return re.findall(r"\S+\s*|\s+", text)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a crashed or overloaded proxy does."""
    sock: socket.socket | None = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
