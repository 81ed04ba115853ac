"""The API's routers (docs/design.md §8): runs, a run's event stream, and the OpenAPI document.

Each router declares its auth dependency once; handlers never check it again. A run id
in a path is checked against the store's id format before anything is looked up, and a
path segment reaches nothing but that SQL lookup.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Body, Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from coordinator.jobfile.ask import build_ask_job
from coordinator.serve.auth import Authorizer
from coordinator.serve.events import run_events
from coordinator.serve.intake import (
    IdempotencyKey,
    JobRejected,
    ask_problems,
    check_key,
    loaded_before,
    media_kind,
    parse_ask,
    parse_job,
)
from coordinator.serve.manager import RunManager
from coordinator.serve.records import (
    NotCancellable,
    coverage_so_far,
    gaps_so_far,
    progress_of,
    report_of,
    scenario_of,
    subtasks_of,
    valid_run_id,
)
from coordinator.serve.refusals import ASKED, problem, read_body
from coordinator.serve.schemas import (
    ASK_EXAMPLES,
    ASK_REFUSED,
    JOB_BODY,
    JOB_REFUSED,
    RUN_LINKS,
    SUBMISSION_REFUSED,
    AskRequest,
    CancelAccepted,
    GapList,
    InputProblems,
    Problem,
    RunCreated,
    RunDetail,
    RunList,
    RunStatus,
    RunSummary,
    StreamTicket,
    job_schemas,
)
from coordinator.serve.server import ServeConfig
from coordinator.store.runs import RunNotFound, RunRow
from shared.errors import InputFileError

# The report page carries its own CSS and SVG and no script: nothing else may load.
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'"
# Event sequence numbers are 32-bit integers in both stores.
MAX_SEQ = 2**31 - 1
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": Problem}}


class RunMissing(HTTPException):
    """404: not a run id, or no run with it."""

    def __init__(self) -> None:
        super().__init__(404, "no such run")


async def known_run(request: Request, run_id: str) -> RunRow:
    """The run a path names: 404 unless it has the store's id format and exists."""
    if not valid_run_id(run_id):
        raise RunMissing
    manager: RunManager = request.app.state.manager
    try:
        return await anyio.to_thread.run_sync(manager.store.get, run_id)
    except RunNotFound:
        raise RunMissing from None


# Module level: handlers' annotations are strings, resolved in this module's namespace.
Known = Annotated[RunRow, Depends(known_run)]


def _url(request: Request, run_id: str) -> str:
    # What request.url_for("get_run", run_id=...) gives, without looking the route up
    # among every route of every router on each call (0.2 ms of the event loop, each
    # submission): the route's path is fixed; the base (scheme, host, root path) is the
    # request's, joined as Starlette's URLPath.make_absolute_url joins it.
    base = request.base_url
    return f"{base.scheme}://{base.netloc}{base.path.rstrip('/')}/runs/{run_id}"


ASK_FILE = ASKED  # the "file" an ask's problems and its run name


def ask_router(manager: RunManager, auth: Authorizer, config: ServeConfig) -> APIRouter:
    """``POST /ask``: a question becomes a decomposed job on the tools it names
    (docs/design.md §8)."""
    router = APIRouter(tags=["runs"], dependencies=[Depends(auth.api)],
                       responses={401: {"model": Problem}})

    @router.post(
        "/ask", status_code=201, response_model=RunCreated,
        responses={400: {"model": Problem, "description": "The body is not a JSON document."},
                   422: {"model": InputProblems, "description": ASK_REFUSED},
                   **SUBMISSION_REFUSED},
        summary="Ask a question",
    )
    async def ask(
        request: Request,
        response: Response,
        body: Annotated[AskRequest, Body(openapi_examples=ASK_EXAMPLES)],
        idempotency_key: IdempotencyKey = None,
    ) -> RunCreated:
        key = check_key(idempotency_key, file=ASK_FILE)
        tools_text = body.tools if body.tools is not None else config.ask_tools
        # An ask uses the operator's sources: without docs, the first served folder
        # (ServeConfig.served_folder says why that one), unless its tools text names a
        # documents folder of its own (build_ask_job's default_docs).
        docs = None if body.docs is None else config.served_folder(body.docs, file=ASK_FILE)
        first = config.served_folder(None)
        search = body.search
        if search is None and body.web:
            search = config.web_backend()
            if search is None:
                raise JobRejected([problem("web", "false: the server has no search backend "
                                           "(its operator starts it with --search, or sets "
                                           "FANOUT_SEARCH)", "true", file=ASK_FILE)])
        # Composed as `fanout ask` composes it; then read back and checked exactly like a
        # job sent to POST /runs (the served folders, the server's keys, no base_url).
        try:
            _, text, _ = build_ask_job(
                body.question, None, model=body.model or config.ask_model, docs=docs,
                search=search, max_subtasks=body.max_subtasks, concurrency=body.concurrency,
                deadline_s=body.deadline_s, tools_text=tools_text, tools_name=ASK_FILE,
                default_docs=first,
            )
        except InputFileError as exc:
            raise JobRejected(ask_problems(
                exc, ASK_FILE, no_tools=config.nothing_to_research())) from None
        job = text.encode("utf-8")
        parse = partial(parse_ask, job, tools_text, allow_mcp=config.allow_mcp,
                        research=config.research_policy())
        run_id, status, earlier = await manager.submit(
            job, parse, speed=body.speed, key=key,
            inline=loaded_before(job, "yaml", ASK_FILE), file=ASK_FILE,
        )
        if earlier:  # the key's run: as it stands now
            status = (await anyio.to_thread.run_sync(manager.store.get, run_id)).status
        url = _url(request, run_id)
        response.headers["Location"] = url
        return RunCreated(run_id=run_id, status=status, url=url)

    return router


def runs_router(manager: RunManager, auth: Authorizer, config: ServeConfig) -> APIRouter:
    """``/runs``: submit, list, read, report, gaps, cancel, and stream tickets."""
    router = APIRouter(
        prefix="/runs",
        tags=["runs"],
        dependencies=[Depends(auth.api)],
        responses={401: {"model": Problem}},
    )

    def summary(request: Request, row: RunRow) -> dict[str, Any]:
        return row.summary() | {"url": _url(request, row.id)}

    async def submit(request: Request, speed: float, idempotency_key: str | None) -> Response:
        kind = media_kind(request.headers.get("content-type"))
        key = check_key(idempotency_key)
        body = await read_body(request, config.max_body_bytes, config.body_timeout_s)
        run_id, status, earlier = await manager.submit(
            body, lambda: parse_job(body, kind, allow_mcp=config.allow_mcp,
                                    research=config.research_policy()),
            speed=speed, key=key, inline=loaded_before(body, kind),
        )
        if earlier:  # the key's run: as it stands now
            status = (await anyio.to_thread.run_sync(manager.store.get, run_id)).status
        url = _url(request, run_id)
        # The answer is made here, not by FastAPI from a returned model: that checked
        # and serialized the model again on the event loop that fifty submissions at
        # once wait for. Same JSON (response_model still documents it), 201, Location.
        created = RunCreated(run_id=run_id, status=status, url=url)
        return JSONResponse(created.model_dump(mode="json"), status_code=201,
                            headers={"Location": url})

    async def submit_run(
        request: Request,
        speed: Annotated[float, Query(gt=0, le=10_000, description="Run simulated time "
                                      "this many times faster (fanout run --speed).")] = 1.0,
        idempotency_key: IdempotencyKey = None,
    ) -> Response:
        return await submit(request, speed, idempotency_key)

    router.add_api_route(
        "", submit_run, methods=["POST"],
        status_code=201,
        response_model=RunCreated,
        openapi_extra={"requestBody": JOB_BODY},
        responses={201: {"links": RUN_LINKS},
                   415: {"model": Problem, "description": "The body is neither YAML nor "
                         "JSON (its Content-Type)."},
                   422: {"model": InputProblems, "description": JOB_REFUSED},
                   **SUBMISSION_REFUSED},
        summary="Submit a job file",
    )

    @router.get("", response_model=RunList, summary="Every stored run, newest first")
    async def list_runs(request: Request) -> RunList:
        rows = await anyio.to_thread.run_sync(manager.store.runs)
        return RunList(runs=[RunSummary(**summary(request, r)) for r in rows])

    @router.get("/{run_id}", response_model=RunDetail, responses=_NOT_FOUND,
                summary="A run, its progress and its coverage so far")
    async def get_run(request: Request, row: Known) -> RunDetail:
        def read() -> dict[str, Any]:
            scenario = scenario_of(manager.store, row)
            subtasks = subtasks_of(scenario)
            return {
                "query": row.query,
                "progress": progress_of(manager.records, row, [s.id for s in subtasks]),
                "coverage_so_far": coverage_so_far(manager.store, row, scenario),
                "cancel_requested": manager.records.cancel_requested(row.id),
                "subtasks": subtasks,
            }

        return RunDetail(**summary(request, row), **await anyio.to_thread.run_sync(read))

    @router.get(
        "/{run_id}/report",
        responses={200: {"content": {"application/json": {}, "text/markdown": {},
                                     "text/html": {}}},
                   409: {"model": RunStatus}, **_NOT_FOUND},
        summary="The coverage report (409 while the run goes on)",
    )
    async def get_report(
        row: Known, format: Literal["json", "md", "html"] = "json"
    ) -> Response:
        if row.status in ("queued", "running"):
            return JSONResponse({"status": row.status}, status_code=409)

        def render() -> Response:
            report = report_of(manager.store, row, scenario_of(manager.store, row)).to_wire()
            if format == "md":
                from coordinator.views.markdown import render_markdown

                return PlainTextResponse(render_markdown(report, row.summary()),
                                         media_type="text/markdown; charset=utf-8")
            if format == "html":
                from coordinator.views.html import render_html

                page = render_html(report, manager.store.events(row.id), row.summary())
                return HTMLResponse(page, headers={"Content-Security-Policy": REPORT_CSP})
            return JSONResponse(report)

        return await anyio.to_thread.run_sync(render)

    @router.get("/{run_id}/gaps", response_model=GapList, responses=_NOT_FOUND,
                summary="The coverage gaps (so far, while the run goes on)")
    async def get_gaps(row: Known) -> GapList:
        gaps = await anyio.to_thread.run_sync(
            gaps_so_far, manager.store, row, scenario_of(manager.store, row)
        )
        return GapList(run_id=row.id, status=row.status, gaps=gaps)

    @router.post(
        "/{run_id}/cancel",
        response_model=CancelAccepted,
        responses={202: {"model": CancelAccepted}, 409: {"model": RunStatus}, **_NOT_FOUND},
        summary="Cancel a run: it ends with its report, trigger cancelled",
    )
    async def cancel_run(request: Request, row: Known) -> Response:
        try:
            await manager.cancel(row.id, row.status)
        except NotCancellable as exc:
            return JSONResponse({"status": exc.status, "detail": str(exc)}, status_code=409)
        now = await anyio.to_thread.run_sync(manager.store.get, row.id)
        answer = CancelAccepted(run_id=row.id, status=now.status, outcome=now.outcome,
                                url=_url(request, row.id))
        # 200 once the run has ended with its report; 202 while it is still winding down
        # (here, or on the server that runs it, which hears the cancel through the store).
        return JSONResponse(answer.model_dump(),
                            status_code=200 if now.status == "finished" else 202)

    @router.post("/{run_id}/ticket", response_model=StreamTicket, responses=_NOT_FOUND,
                 summary="A ticket for this run's event stream (for EventSource)")
    async def stream_ticket(row: Known) -> StreamTicket:
        ticket, ttl = auth.ticket_for(row.id)
        return StreamTicket(ticket=ticket, expires_in=ttl)

    return router


class _Stream(StreamingResponse):
    """An event stream that holds one of the service's stream slots while it is open."""

    def __init__(self, manager: RunManager, content: Any) -> None:
        super().__init__(content, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._manager = manager
        manager.streams += 1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._manager.streams -= 1


def events_router(manager: RunManager, auth: Authorizer, config: ServeConfig) -> APIRouter:
    """``/runs/{id}/events``: the run's events as Server-Sent Events."""
    router = APIRouter(tags=["events"], dependencies=[Depends(auth.stream)],
                       responses={401: {"model": Problem}})

    @router.get(
        "/runs/{run_id}/events",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}},
                         "description": "Every stored event of the run, then live ones; "
                         "`id:` is the sequence number, the last event is `end`."},
                   503: {"model": Problem}, **_NOT_FOUND},
        summary="The run's events: history, then live",
    )
    async def run_event_stream(
        row: Known,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
        after: Annotated[int | None, Query(
            ge=0, le=MAX_SEQ,
            description="Resume after this event (when no Last-Event-ID is sent)."
        )] = None,
    ) -> Response:
        if manager.streams >= config.max_streams or manager.stopping:
            raise HTTPException(503, "too many open event streams; try again shortly",
                                headers={"Retry-After": "5"})
        resume = after or 0
        if last_event_id is not None and last_event_id.strip().isdigit():
            # An id past any the store can hold resumes after the last event there is.
            resume = min(int(last_event_id.strip()), MAX_SEQ)
        content = run_events(manager, row.id, resume, ping_s=config.ping_interval_s,
                             poll_s=config.poll_interval_s)
        return _Stream(manager, content)

    return router


def openapi_router(app: FastAPI, auth: Authorizer) -> APIRouter:
    """``/openapi.json``, behind the token like everything else."""
    router = APIRouter(dependencies=[Depends(auth.api)])

    @router.get("/openapi.json", include_in_schema=False)
    async def openapi() -> JSONResponse:
        doc = app.openapi()
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        if "JobFile" not in schemas:  # once: FastAPI keeps the document it built
            schemas.update(job_schemas())
        return JSONResponse(doc)

    return router
