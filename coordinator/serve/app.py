"""The FastAPI application: its routers, error answers, headers and lifetime; and
``run_server``, which serves it on uvicorn.

Errors keep one shape per kind: a job that cannot run (and a bad query parameter or
header) is 422 ``{"errors": [{"line", "field", "expected", "got", "message"}]}``; every
other error is ``{"detail": "..."}``; a page request without the token is the page.

Runs execute in the server's own process (the run manager's task group, on uvicorn's
asyncio loop). A SIGTERM or SIGINT stops it cleanly: the event streams end (clients
reconnect with ``Last-Event-ID`` to the next server), the runs still going are stopped
after their last checkpoint, their recorders are flushed and each run is left
``interrupted`` for the next start to resume; the process then exits 0.
"""

from __future__ import annotations

import gc
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

import anyio.to_thread
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.serve.auth import Authorizer, LoginRequired
from coordinator.serve.decisions import BadBody, people_router
from coordinator.serve.events import PublishHook
from coordinator.serve.intake import IntakeGate, JobRejected
from coordinator.serve.manager import RunManager
from coordinator.serve.page import page_response, page_router
from coordinator.serve.records import KeyReused, QueueFull
from coordinator.serve.refusals import ASKED, BodyLimit, problem, request_problems
from coordinator.serve.routes import ask_router, events_router, openapi_router, runs_router
from coordinator.serve.schemas import AskRequest, InputProblems
from coordinator.serve.server import (
    ServeConfig,
    StreamsFirstServer,
    deadline_protocol,
)
from coordinator.store.runs import RunStore, StoreError
from subagents.telemetry import enable_metrics

DESCRIPTION = """\
Research fan-out jobs as a service (fanout docs/design.md §8): submit a job file, follow its
subagents live over Server-Sent Events, read the coverage report and its gaps. Runs are
recorded in the same run store as `fanout run`, so the CLI reads them too.
"""


class _NoSniff:
    """Adds ``X-Content-Type-Options: nosniff`` to every answer (pure ASGI: streams pass)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      (b"x-content-type-options", b"nosniff")]
            await send(message)

        await self.app(scope, receive, send_with_header)


class _CountSubmissions:
    """Counts the submissions (``POST /runs``, ``POST /ask``) from their request to the
    last byte of their answer, for :class:`~coordinator.serve.intake.IntakeGate` (pure
    ASGI: nothing else is touched)."""

    PATHS = frozenset({"/runs", "/ask"})

    def __init__(self, app: ASGIApp, gate: IntakeGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        if scope["type"] != "http" or scope["method"] != "POST" or path not in self.PATHS:
            await self.app(scope, receive, send)
            return
        self.gate.enter()
        left = False

        async def send_counted(message: Message) -> None:
            nonlocal left
            await send(message)
            if (message["type"] == "http.response.body" and not message.get("more_body")
                    and not left):
                left = True
                self.gate.leave()

        try:
            await self.app(scope, receive, send_counted)
        finally:
            if not left:
                self.gate.leave()


def _version() -> str:
    try:
        return version("fanout")
    except PackageNotFoundError:
        return "0"


def _unprocessable(problems: InputProblems) -> JSONResponse:
    return JSONResponse(problems.model_dump(), status_code=422)


def _allowed(app: FastAPI, request: Request) -> list[str]:
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def _run_counts(store: RunStore) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for row in store.runs():
        key = (row.status, row.outcome or "")
        counts[key] = counts.get(key, 0) + 1
    return counts


def _metrics_route(app: FastAPI, manager: RunManager, auth: Authorizer) -> None:
    """``GET /metrics``: Prometheus text (docs/design.md §13), behind the API's token like the rest.

    Without prometheus_client (the ``otel`` extra) it answers 501 saying what to install.
    """
    metrics = enable_metrics()
    if metrics is not None:
        metrics.watch_service(lambda: _run_counts(manager.store), lambda: manager.queue_depth,
                              lambda: manager.streams)

    @app.get("/metrics", include_in_schema=False, dependencies=[Depends(auth.api)])
    async def prometheus_metrics() -> Response:
        if metrics is None:
            return JSONResponse({"detail": "metrics need prometheus_client: "
                                 "pip install 'fanout[otel]'"}, status_code=501)
        # Reading the runs is a store query: off the event loop.
        body, content_type = await anyio.to_thread.run_sync(metrics.render)
        return Response(body, media_type=content_type)


def create_app(config: ServeConfig, *, on_publish: PublishHook | None = None) -> FastAPI:
    """The service over the run store at ``config.store``.

    Args:
        config: the settings (store, capacity, token, limits, ping interval).
        on_publish: called with (run id, seq) as each live event is published; the
            load benchmark measures delivery latency with it.
    """
    manager = RunManager(config, on_publish=on_publish)
    auth = Authorizer(config.token, ticket_ttl_s=config.ticket_ttl_s)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with manager.running():
            yield

    app = FastAPI(
        title="fanout",
        version=_version(),
        description=DESCRIPTION,
        lifespan=lifespan,
        # Served by openapi_router behind the token; no docs pages (they load a CDN).
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        # Operation ids are the handlers' names (get_run, cancel_run, …): the links of
        # POST /runs name them.
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.manager = manager
    app.state.auth = auth
    app.include_router(runs_router(manager, auth, config))
    app.include_router(ask_router(manager, auth, config))
    app.include_router(events_router(manager, auth, config))
    app.include_router(people_router(manager, auth))
    app.include_router(page_router(auth))
    app.include_router(openapi_router(app, auth))
    # Innermost of the three: its own answers (413 on a Content-Length) get nosniff too.
    app.add_middleware(BodyLimit, limit=config.max_body_bytes, deadline_s=config.body_timeout_s,
                       reads_own=frozenset({("POST", "/runs")}))
    app.add_middleware(_NoSniff)
    app.add_middleware(_CountSubmissions, gate=manager.intake)
    _metrics_route(app, manager, auth)

    @app.exception_handler(LoginRequired)
    async def login(request: Request, exc: LoginRequired) -> Response:
        response = page_response(401)
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(JobRejected)
    async def rejected(request: Request, exc: JobRejected) -> Response:
        return _unprocessable(InputProblems(errors=exc.problems))

    @app.exception_handler(KeyReused)
    async def key_reused(request: Request, exc: KeyReused) -> Response:
        return _unprocessable(InputProblems(errors=[problem(
            "Idempotency-Key", "a new key, or the same request as the one that first used it",
            f"a different request (the key made run {exc.run_id})", file=exc.file,
        )]))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        found = exc.errors()
        file = f"{request.method} {request.url.path}"  # what the problems are about
        for err in found:
            if err.get("type") == "json_invalid":
                # Not a JSON document at all: a malformed request (400, as FastAPI answers
                # a body that is not even UTF-8), not a request whose content is wrong.
                why = (err.get("ctx") or {}).get("error", "JSON decode error")
                return JSONResponse(
                    {"detail": f"{file}: the body is not a JSON document: {why}"},
                    status_code=400)
        fields = tuple(AskRequest.model_fields) if file == ASKED else ()
        return _unprocessable(InputProblems(errors=request_problems(found, file, fields)))

    @app.exception_handler(BadBody)
    async def bad_body(request: Request, exc: BadBody) -> Response:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, exc: QueueFull) -> Response:
        return JSONResponse({"detail": str(exc)}, status_code=503,
                            headers={"Retry-After": str(exc.retry_after_s)})

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> Response:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route that matched the path only;
            # a path served by several routes (GET and POST /runs) allows all of theirs.
            headers["Allow"] = ", ".join(_allowed(app, request))
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                            headers=headers)

    return app


def run_server(
    config: ServeConfig,
    sock: socket.socket,
    *,
    log_level: str = "info",
    on_publish: Callable[[str, int], None] | None = None,
) -> None:
    """Serve the API and the page on ``sock`` until SIGTERM or SIGINT.

    ``on_publish(run_id, seq)`` hears each live event as it is published (benchmarks).
    """
    app = create_app(config, on_publish=on_publish)
    # The imports and the app live as long as the server: frozen, the collector's full
    # passes stop walking them. Those passes came every ~0.5 s under load and took
    # 50–80 ms each, a stall of the event loop and the store writer alike (the tail of
    # 50 submissions at once); frozen, 5–30 ms.
    gc.freeze()
    manager = app.state.manager
    protocol = deadline_protocol(config.header_timeout_s)
    uv = uvicorn.Config(
        app,
        loop="asyncio",
        http=protocol,
        # The connection cap: past it, uvicorn answers 503 instead of taking on more.
        limit_concurrency=config.max_connections,
        lifespan="on",
        log_level=log_level,
        timeout_graceful_shutdown=10,
        # Proxies may idle-close at 60 s; SSE pings come every ping_interval_s anyway.
        timeout_keep_alive=30,
    )
    StreamsFirstServer(uv, manager.begin_shutdown).run(sockets=[sock])
