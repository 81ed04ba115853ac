"""The service's settings, its token, the bind rule, its listening socket, and uvicorn
as it serves that socket (a header deadline, a clean stop).

    ServeError                   the service cannot start (exit 2)
    ├── TokenError               --token-file unreadable or without a token
    └── BindRefused              a non-loopback address without a token, or a busy port

Everything here sits below the application (:mod:`coordinator.serve.app`), which
serves on the socket made here (``run_server``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from coordinator.jobfile.research import ResearchPolicy
from coordinator.serve.refusals import ASKED
from shared.errors import FanoutError

if TYPE_CHECKING:
    from coordinator.engine.executor import TemporalTarget
    from subagents.research.guard import Dialler, Resolver

MAX_BODY_BYTES: Final = 1 << 20  # docs/design.md §8: a job file of at most 1 MiB
MAX_STREAMS: Final = 512  # event streams open at once, over every run
# Connections open at once (streams included); past it, requests get 503. Above
# MAX_STREAMS so that a full set of streams leaves room to submit and read.
MAX_CONNECTIONS: Final = 1024
# Runs waiting for a slot, per server; past it, POST /runs is 503 with Retry-After.
MAX_QUEUED: Final = 256
HEADER_TIMEOUT_S: Final = 10.0  # from a connection's (or a request's) first byte to its head
BODY_TIMEOUT_S: Final = 30.0  # for the whole body of a request
PING_INTERVAL_S: Final = 15.0
TICKET_TTL_S: Final = 600.0
_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.", "ip6-localhost"})

log = logging.getLogger("fanout.serve")


class ServeError(FanoutError):
    """``fanout serve`` cannot start; the message says why and what to do."""


class TokenError(ServeError):
    """The token file cannot be read, or its first line holds no token."""


class BindRefused(ServeError):
    """The address may not or cannot be listened on."""


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything the service is started with (the CLI's options, and limits for tests)."""

    store: str | Path
    host: str = "127.0.0.1"
    port: int = 8765
    max_runs: int = 4
    token: str | None = None
    # Who a decision made through this service is by (docs/design.md §17): the token's
    # name (`serve --token-name`); by default `token`, or `local` without a token.
    token_name: str | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    max_streams: int = MAX_STREAMS
    ping_interval_s: float = PING_INTERVAL_S
    ticket_ttl_s: float = TICKET_TTL_S
    # How often a stream of a run that another process is running looks for new events.
    poll_interval_s: float = 0.5
    # Submitted jobs may declare MCP servers, i.e. commands this process starts.
    allow_mcp: bool = False
    max_queued: int = MAX_QUEUED
    # What a 503 for a full queue asks the client to wait: a run of the scenario
    # library takes seconds, so a slot is likely free by then.
    retry_after_s: int = 5
    max_connections: int = MAX_CONNECTIONS
    header_timeout_s: float = HEADER_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    # How often a server looks for runs whose holder died (and, on SQLite, for cancels
    # of its runs made by another server).
    adopt_interval_s: float = 2.0
    # The folders submitted jobs and asks may read with docs.* (`serve --docs DIR`);
    # none: no documents at all. web.* never reaches private addresses from here.
    docs: tuple[Path, ...] = ()
    # What POST /ask uses when the question does not say: `serve --search` for the web
    # (else the server's FANOUT_SEARCH) and `serve --model` for the model.
    search: str | None = None
    ask_model: str | None = None
    # The operator's tools file for POST /ask (`serve --tools FILE`): its text, used when
    # an ask sends none of its own.
    ask_tools: str | None = None
    # `serve --executor temporal`: where submitted runs go (None: this process runs them).
    temporal: TemporalTarget | None = None
    # The address guard's seams (tests put a loopback web behind public names).
    resolver: Resolver | None = None
    dial: Dialler | None = None

    def decider(self) -> str:
        """The ``by`` of a decision, review or request made through this service."""
        if self.token_name:
            return self.token_name
        return "token" if self.token is not None else "local"

    def served_names(self) -> list[str]:
        """The served folders as a client names them in ``POST /ask``'s ``docs``: the
        first ``.``, the others relative to it (never the server's absolute paths)."""
        if not self.docs:
            return []
        first = self.docs[0].resolve()
        names = ["."]
        for root in self.docs[1:]:
            try:
                names.append(os.path.relpath(root.resolve(), first))
            except ValueError:  # another drive (Windows): no relative name reaches it
                continue
        return names

    def served_folder(self, asked: str | None, *, file: str = ASKED) -> str | None:
        """The folder ``POST /ask``'s ``docs`` names (absolute, or relative to the first
        served folder), resolved; or one refusal for every folder this server does not
        serve, which lists those it does (as :meth:`served_names` names them).

        Decision: an ask without ``docs`` on a server that serves folders researches the
        first of them (``.``), as ``fanout mcp``'s ask does. One job reads one documents
        folder (``research_tools.docs`` has one path), the operator put that folder first
        (it is already the one relative names start from), and the refusal of any other
        name lists the rest, so a client that wants another folder learns its name.

        A folder that does not exist, one outside the served ones, a symlink out of them
        and a file all get the same answer, which echoes only what the client wrote: the
        client learns nothing of the server's file system beyond the folders it serves.

        Returns:
            The folder, absolute; None when ``asked`` is None and nothing is served.

        Raises:
            JobRejected: ``asked`` is no folder this server serves.
        """
        from coordinator.jobfile.research import served_folder
        from coordinator.serve.intake import JobRejected
        from coordinator.serve.refusals import problem, quote

        if asked is None:
            return str(self.docs[0].resolve()) if self.docs else None
        if not self.docs:
            raise JobRejected([problem(
                "docs", "no docs: this server serves no folders (its operator starts it "
                "with --docs DIR); omit docs", quote(asked), file=file)])
        folder = served_folder(asked, self.docs)
        if folder is None:
            raise JobRejected([problem("docs", self.folders_expected(), quote(asked),
                                       file=file)])
        return folder

    def folders_expected(self) -> str:
        """What ``docs`` may name here, in words: the served folders, listed."""
        names = ", ".join(repr(n) for n in self.served_names())
        return (f"a folder the server serves ({names}) or one inside them, named relative "
                "to '.' or absolute; without docs an ask reads '.'")

    def web_backend(self) -> str | None:
        """The search backend of an ask's ``web: true``: ``--search``, else the server's
        ``FANOUT_SEARCH``."""
        return self.search or os.environ.get("FANOUT_SEARCH") or None

    def nothing_to_research(self) -> str:
        """What an ask that names no tools lacks on this server, in words (only a server
        that serves no folders hears such an ask: the others read their first)."""
        web = ("web: true (the server's search backend)" if self.web_backend()
               else "web: true on a server with a search backend (this one has none)")
        return (f"something to research with: this server serves no folders, so an ask "
                f"names {web}, search (searxng:URL, brave or tavily) or tools (a tools "
                "file's text: tools, mcp_servers, research_tools)")

    def research_policy(self) -> ResearchPolicy:
        """What the research tools of jobs run here may do (docs/design.md §8, §10)."""
        roots = tuple(p.resolve() for p in self.docs)
        backend, _, url = (self.search or os.environ.get("FANOUT_SEARCH") or "").partition(":")
        return ResearchPolicy(
            docs_roots=roots, private=False, docs_base=roots[0] if roots else None,
            resolver=self.resolver, dial=self.dial,
            trusted_search_url=url if backend == "searxng" and url else None,
        )


def read_token(token_file: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> str | None:
    """The bearer token: the first line of ``token_file``, else ``FANOUT_TOKEN``, else None.

    Raises:
        TokenError: the file cannot be read or its first line is blank.
    """
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                first = f.readline().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenError(f"--token-file {token_file}: cannot read it ({exc})") from None
        if not first:
            raise TokenError(f"--token-file {token_file}: the first line holds no token")
        return first
    return environ.get("FANOUT_TOKEN", "").strip() or None


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback address without a token (docs/design.md §8).

    Raises:
        BindRefused: ``host`` is reachable from other machines and no token is set.
    """
    if token is None and not is_loopback(host):
        raise BindRefused(
            f"--host {host}: refusing to listen beyond this machine without a token; "
            "set FANOUT_TOKEN or pass --token-file (or bind 127.0.0.1)"
        )


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one).

    Raises:
        BindRefused: the address cannot be listened on (in use, not ours, not valid).
    """
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM,
                                   proto=socket.IPPROTO_TCP)
        family, _, _, _, address = infos[0]
        # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets whose proto
        # says TCP, and without it every answer waited ~40 ms on Nagle and delayed ACKs.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    except OSError as exc:
        raise BindRefused(f"cannot listen on {host}:{port}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise BindRefused(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """The base URL a bound socket serves."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


# -- uvicorn on the socket -----------------------------------------------------------


class _HeadDeadline(asyncio.Protocol):
    """uvicorn's HTTP/1.1 protocol behind a header deadline: a connection must send its
    request head within ``header_timeout_s`` of connecting (or of a keep-alive request's
    first byte), else it gets 408 and is closed (slowloris).

    uvicorn has no such timeout (its only one is keep-alive, between requests), and an
    ASGI app hears of a request only once its head is complete. So this protocol stands
    between the transport and uvicorn's: it passes every call of asyncio's protocol
    interface through, reading nothing of uvicorn's, and follows the requests in a copy
    of the bytes with an h11 connection of its own to see where each head ends.
    """

    header_timeout_s: float = HEADER_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Made as uvicorn makes its protocol (Config(http=...) names this class).
        self._inner: asyncio.Protocol = H11Protocol(*args, **kwargs)
        self._heads: h11.Connection | None = h11.Connection(h11.SERVER)
        self._transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._arm()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._heads is not None:
            self._follow(self._heads, data)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._heads = None
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def _follow(self, heads: h11.Connection, data: bytes) -> None:
        """Arm at a request's first byte, disarm at the end of its head."""
        if heads.their_state is h11.IDLE and self._deadline is None:
            self._arm()
        heads.receive_data(data)
        try:
            while (event := heads.next_event()) is not h11.NEED_DATA:
                if isinstance(event, h11.Request):
                    self._disarm()
                elif isinstance(event, h11.EndOfMessage):
                    # uvicorn answers the request; this copy only needs to be ready for
                    # the next one on the connection.
                    heads.send(h11.Response(status_code=204, headers=[]))
                    heads.send(h11.EndOfMessage())
                    heads.start_next_cycle()
                    if heads.trailing_data[0]:  # the next request has begun
                        self._arm()
                elif event is h11.PAUSED or isinstance(event, h11.ConnectionClosed):
                    self._heads = None  # nothing more to follow (an upgrade, the end)
                    return
        except h11.ProtocolError:
            # A malformed request, or one after which the connection closes: uvicorn
            # answers it as it does; no later head on this connection needs a deadline.
            self._heads = None
            self._disarm()

    def _arm(self) -> None:
        self._disarm()
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self.header_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_late(self) -> None:
        self._deadline = None
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if not transport.is_reading():
            # uvicorn stopped reading: it is still answering an earlier request (and
            # holds the next one's bytes back); the head is not late on the client's side.
            self._arm()
            return
        body = b'{"detail":"the request head did not arrive in time"}'
        transport.write(
            b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        transport.close()


def deadline_protocol(header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol whose request heads must arrive within
    ``header_timeout_s`` (``fanout serve``'s, and ``fanout mcp --http``'s)."""
    return type("HeadDeadline", (_HeadDeadline,), {"header_timeout_s": header_timeout_s})


@contextlib.contextmanager
def _stopping_signals_end_cleanly() -> Iterator[None]:
    """SIGINT and SIGTERM, raised again by uvicorn after its graceful stop, end nothing.

    While it serves, uvicorn handles both signals itself; when it has stopped it puts
    back the handlers it found and raises the signal again for them ("cooperative
    signal handling", uvicorn 0.29). The handlers it finds are these, which do nothing:
    a server stopped cleanly exits 0, not by the signal.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only; uvicorn leaves them alone too
        return
    stopping = (signal.SIGINT, signal.SIGTERM)
    original = {sig: signal.signal(sig, _stopped) for sig in stopping}
    try:
        yield
    finally:
        for sig, handler in original.items():
            signal.signal(sig, handler)


def _stopped(sig: int, frame: FrameType | None) -> None:
    """The signal that stopped the server, raised again once it has stopped: done."""


class QuietServer(uvicorn.Server):
    """uvicorn whose clean stop on SIGTERM or SIGINT exits 0: ``fanout serve``'s and
    ``fanout mcp --http``'s."""

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        with _stopping_signals_end_cleanly():
            await super().serve(sockets)


class StreamsFirstServer(QuietServer):
    """uvicorn, quiet, whose event streams are told to end as soon as it is asked to stop.

    uvicorn waits for open responses before the app's lifespan ends, and event streams
    never end by themselves. ``handle_exit`` is the method uvicorn binds to SIGINT and
    SIGTERM; this one only schedules ``on_shutdown`` on the event loop (safe from a
    signal handler) before uvicorn's own, so the streams end while uvicorn waits.
    """

    def __init__(self, config: uvicorn.Config, on_shutdown: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_shutdown: Callable[[], None] | None = on_shutdown

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        on_shutdown, self._on_shutdown = self._on_shutdown, None
        if on_shutdown is not None:
            try:
                asyncio.get_running_loop().call_soon_threadsafe(on_shutdown)
            except RuntimeError:  # no loop running yet: nothing to race with
                on_shutdown()
        super().handle_exit(sig, frame)
