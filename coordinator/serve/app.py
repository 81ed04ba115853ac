"""The FastAPI application: its routers, error answers, headers and lifetime.

Errors keep one shape per kind: a job that cannot run (and a bad query parameter or
header) is 422 ``{"errors": [{"line", "field", "expected", "got", "message"}]}``; every
other error is ``{"detail": "..."}``; a page request without the token is the page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.serve.auth import Authorizer, LoginRequired
from coordinator.serve.events import PublishHook
from coordinator.serve.intake import JobRejected, problem
from coordinator.serve.manager import RunManager
from coordinator.serve.page import page_response, page_router
from coordinator.serve.records import KeyReused
from coordinator.serve.routes import ask_router, events_router, openapi_router, runs_router
from coordinator.serve.schemas import InputProblems
from coordinator.serve.server import ServeConfig
from coordinator.store.runs import StoreError

DESCRIPTION = """\
Research fan-out jobs as a service (fanout DESIGN §8): submit a job file, follow its
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


def _version() -> str:
    try:
        return version("fanout")
    except PackageNotFoundError:
        return "0"


def _unprocessable(problems: InputProblems) -> JSONResponse:
    return JSONResponse(problems.model_dump(), status_code=422)


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
    )
    app.state.manager = manager
    app.state.auth = auth
    app.include_router(runs_router(manager, auth, config))
    app.include_router(ask_router(manager, auth, config))
    app.include_router(events_router(manager, auth, config))
    app.include_router(page_router(auth))
    app.include_router(openapi_router(app, auth))
    app.add_middleware(_NoSniff)

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
            f"a different request (the key made run {exc.run_id})",
        )]))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        errors = []
        for err in exc.errors():
            where = ".".join(str(part) for part in err.get("loc", ()))
            got = err.get("input")
            errors.append(problem(where, str(err.get("msg", "a valid value")),
                                  None if got is None else repr(got)))
        return _unprocessable(InputProblems(errors=errors))

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> Response:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                            headers=exc.headers)

    return app
