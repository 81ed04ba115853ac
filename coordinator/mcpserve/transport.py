"""Serving the door: over stdio (one client, the process that started it) or streamable
HTTP (``--http HOST:PORT``, a bearer token as ``fanout serve`` takes it).

Runs live in a task group around the transport: when the client goes (stdin closes, the
HTTP server stops on SIGTERM or SIGINT) the runs still going are cancelled, and each
records its partial report before the process exits (a run resumed here is left
interrupted instead, for the next start). A process killed outright cannot: its runs are
resumed by the next ``fanout mcp`` on the store as it starts
(:mod:`~coordinator.mcpserve.resume`).
"""

from __future__ import annotations

import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.transport_security import TransportSecuritySettings

from coordinator.mcpserve.config import MAX_JOB_BYTES, DoorConfig
from coordinator.mcpserve.door import Door
from coordinator.mcpserve.guards import BearerGuard, BodyLimits
from coordinator.mcpserve.resume import resume_left
from coordinator.mcpserve.server import App, FanoutServer, build_server
from coordinator.store import RunStore

MCP_PATH = "/mcp"
# A run_job's YAML (≤ 1 MiB) travels as JSON inside a JSON-RPC message: room for escapes.
MAX_REQUEST_BYTES = 4 * MAX_JOB_BYTES


@asynccontextmanager
async def _serving(config: DoorConfig) -> AsyncIterator[FanoutServer]:
    store = RunStore(config.store)
    try:
        async with anyio.create_task_group() as tg:
            door = Door(store, tg, max_runs=config.max_runs, max_queued=config.max_queued,
                        executor=config.executor, temporal=config.temporal)
            server = build_server(App(config, store, door))  # logging is set up here
            await resume_left(door, config)
            yield server
            tg.cancel_scope.cancel()  # the client is gone: its runs wind down, recorded
    finally:
        store.close()


async def serve_stdio(config: DoorConfig) -> None:
    """Serve one client on stdin and stdout until it closes them, or SIGTERM or SIGINT
    (what a client sends a server that does not leave when stdin closes)."""
    async with _serving(config) as server, anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, tg.cancel_scope)
        await server.run_stdio_async()
        tg.cancel_scope.cancel()


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return


def http_app(server: FanoutServer, host: str, token: str | None, *,
             body_timeout_s: float = 30.0) -> Any:
    """The streamable HTTP application at ``/mcp``, behind the token when there is one,
    each request's body whole within ``body_timeout_s`` and ``MAX_REQUEST_BYTES``.

    Without a token the server listens on loopback only (``check_bind``), and the SDK's
    DNS-rebinding guard admits only loopback Host and Origin headers.
    """
    security = None
    if token is None:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=security,
        max_request_body_size=MAX_REQUEST_BYTES,
    )
    limited = BodyLimits(app, max_bytes=MAX_REQUEST_BYTES, deadline_s=body_timeout_s)
    return limited if token is None else BearerGuard(limited, token)


async def serve_http(config: DoorConfig, sock: socket.socket, *, token: str | None,
                     max_connections: int, header_timeout_s: float = 10.0,
                     body_timeout_s: float = 30.0, log_level: str = "info") -> None:
    """Serve streamable HTTP on ``sock`` until SIGTERM or SIGINT, with the limits of
    ``fanout serve``: connections at once (then 503), a request's head within
    ``header_timeout_s`` and its body within ``body_timeout_s`` (then 408)."""
    import uvicorn

    # The service's HTTP/1.1 protocol with its header deadline: one place for it.
    from coordinator.serve.server import QuietServer, deadline_protocol

    host = sock.getsockname()[0]
    protocol = deadline_protocol(header_timeout_s)
    async with _serving(config) as server:
        uv = uvicorn.Config(
            http_app(server, host, token, body_timeout_s=body_timeout_s), loop="asyncio",
            http=protocol, lifespan="on", log_level=log_level,
            limit_concurrency=max_connections, timeout_graceful_shutdown=5,
            timeout_keep_alive=30,
        )
        await QuietServer(uv).serve(sockets=[sock])
