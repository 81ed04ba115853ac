"""``fanout mcp``'s tools and resources on the official SDK (``MCPServer``), docs/design.md §16.

A door (docs/design.md §15): each tool parses its arguments (:mod:`~coordinator.mcpserve.intake`),
hands the job to the door's runs (:mod:`~coordinator.mcpserve.door`), waits and renders
(:mod:`~coordinator.mcpserve.render`). Bad arguments are MCP tool errors (``isError``)
whose lines name the field; what fails inside a job is data in its report.

Long runs: ``ask`` and ``run_job`` answer when the run ends, or after ``wait_s`` seconds
(default: the operator's ``--wait``, else no limit) with the run's id and status
``running`` (``queued``, without an id yet, when it still waits for a slot): the run
goes on here and ``get_report(run_id)`` (or the resource
``fanout://runs/{id}/report.md``) gives its report, as far as it has got, at any time.
The run's id is also the first progress notification. A client that gives up instead
(its request timeout) cancels the request: the run is cancelled and its partial report
kept. ``cancel_run(run_id)`` cancels a run the call no longer waits for, the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coordinator.api.run import Prepared
from coordinator.decision import DecisionError
from coordinator.mcpserve import intake, reading, render
from coordinator.mcpserve.config import (
    MAX_JOB_BYTES,
    MAX_QUESTION_CHARS,
    MAX_SUBTASKS,
    ArgumentRefused,
    DoorConfig,
)
from coordinator.mcpserve.door import Busy, Door, Ticket
from coordinator.mcpserve.person import ask_person, can_elicit, client_name, pending_text
from coordinator.mcpserve.plan import edit_of
from coordinator.people import NotWaiting
from coordinator.plan_review import PlanEditError, PlanReview
from coordinator.report import CoverageReport, Decision
from coordinator.store import RunStore
from shared.errors import FanoutError, InputFileError
from shared.escalation import Do

INSTRUCTIONS = (
    "fanout researches a question with a lead agent and subagents over the operator's "
    "documents and web search, and answers with numbered sources [n] and what it could "
    "not cover. ask takes a question; run_job a fanout job YAML. Both record the run: "
    "get_report(run_id) and the resource fanout://runs/{id}/report.md read it later, and "
    "cancel_run(run_id) stops a run still going, keeping what it found. A subagent that "
    "cannot go on may wait for a person's decision: a client that supports elicitation "
    "is asked; otherwise get_report lists what waits and decide(run_id, escalation, "
    "option) takes the decision. A job that sets review_plan waits for its lead's plan "
    "to be reviewed the same way: asked, or shown by get_report and taken by "
    "review_plan(run_id, verdict)."
)
RUNS_AT_ONCE = ToolAnnotations(read_only_hint=False, destructive_hint=False,
                               idempotent_hint=False, open_world_hint=True)
READS = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
CANCELS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                          open_world_hint=False)
DECIDES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                          open_world_hint=False)
# How long cancel_run waits for the run to wind down and record its report (as `POST
# /runs/{id}/cancel` waits); a run slower than that answers "running" and ends later.
CANCEL_WAIT_S = 10.0
_LEVELS: dict[str, Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]] = {
    "debug": "DEBUG", "info": "INFO", "warning": "WARNING", "error": "ERROR",
    "critical": "CRITICAL"}
WaitS = Annotated[float | None, Field(
    ge=0, le=86_400,
    description="Seconds to wait for the run (default: the server's, else until it ends); "
    "a run still going then answers with its run_id and status running, and goes on.")]


@dataclass(frozen=True, slots=True)
class App:
    """What the tools share: the operator's settings, the store and the door's runs."""

    config: DoorConfig
    store: RunStore
    door: Door


class RunsList(BaseModel):
    """The structured content of ``list_runs``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    runs: list[dict[str, Any]] = Field(
        description="Newest first: id, job, query, status, outcome, coverage, started, ...")


def _app(ctx: Context[App, Any]) -> App:
    app: App = ctx.request_context.lifespan_context
    return app


async def _ask_person(ticket: Ticket, ctx: Context[App, Any]) -> None:
    """Ask the client about each escalation of the run while this call waits for it
    (a client that declared elicitation; :mod:`~coordinator.mcpserve.person`)."""
    await ticket.opened.wait()
    if ticket.desk is not None and not ticket.ended.is_set():
        await ask_person(ticket.desk, ctx.session, ctx.request_id,
                         by=client_name(ctx.session), run_id=ticket.run_id)


async def _forward(ticket: Ticket, ctx: Context[App, Any]) -> None:
    """The run's progress as MCP progress notifications (none when the client asked none)."""
    async with ticket.updates:
        async for update in ticket.updates:
            await ctx.report_progress(update.progress, update.total, update.message)


def _why(exc: Exception) -> str:
    """A run that could not start, in lines a client can act on: fanout's own errors say
    what to fix (a key the server lacks, a folder it cannot index); anything else is a
    fault of the server, whose text stays in its log."""
    if isinstance(exc, InputFileError):
        return exc.describe()
    if isinstance(exc, FanoutError):
        return str(exc)
    return "the run could not start: a fault of the server (its log has the details)"


async def _wait(ticket: Ticket, limit: float | None) -> None:
    """Until the run ends, or ``limit`` seconds from now.

    A run with a slot opens at once: its id, which the client comes back with, is worth
    that moment whatever ``limit`` says. A queued run waits within ``limit``.
    """
    now = anyio.current_time
    deadline = now() + (math.inf if limit is None else limit)
    with anyio.move_on_after(math.inf if ticket.had_slot else deadline - now()):
        await ticket.opened.wait()
    with anyio.move_on_after(max(0.0, deadline - now())):
        await ticket.ended.wait()


async def _answer(app: App, ctx: Context[App, Any], job: Prepared, *, tool: str,
                  speed: float = 1.0, wait_s: float | None) -> CallToolResult:
    """Run ``job`` and answer with its report, or with its id when ``wait_s`` runs out."""
    elicits = can_elicit(ctx.session)
    try:
        ticket = app.door.submit(job, tool=tool, speed=speed, person=elicits)
    except Busy as exc:
        raise ToolError(str(exc)) from None
    limit = wait_s if wait_s is not None else app.config.wait_s
    asking = anyio.CancelScope()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_forward, ticket, ctx)
            if elicits:
                tg.start_soon(_within, asking, _ask_person, ticket, ctx)
            try:
                await _wait(ticket, limit)
            except anyio.get_cancelled_exc_class():
                # notifications/cancelled (or the client gone): the run is cancelled too
                # and records its partial report; nobody reads an answer to this request.
                ticket.cancel()
                raise
            # An ended run's last notifications still go out (its stream ends after them);
            # a run that goes on without this request is no longer its to report, nor
            # to ask about: what waits then is for get_report and decide.
            asking.cancel()
            if not ticket.ended.is_set():
                tg.cancel_scope.cancel()
    finally:
        ticket.updates.close()  # idempotent: the forwarder may have closed it
    if not ticket.ended.is_set():
        result = render.unfinished(ticket.run_id, _pending(ticket))
    elif ticket.error is not None:
        raise ToolError(_why(ticket.error))
    elif ticket.report is None:
        raise ToolError(f"run {ticket.run_id} was stopped before it had a report")
    else:
        result = render.finished(ticket.run_id, ticket.report)
    return _result(result)


async def _within(scope: anyio.CancelScope, fn: Any, *args: Any) -> None:
    with scope:
        await fn(*args)


def _pending(ticket: Ticket | None) -> dict[str, Any] | None:
    """What waits for a person on a run going on here (None: no person is attached)."""
    if ticket is None or ticket.desk is None:
        return None
    return ticket.desk.pending()


def _result(result: render.RunAnswer, preface: str | None = None) -> CallToolResult:
    """The tool result of a run's answer: text for a model (after ``preface``) and data."""
    text = render.as_text(result)
    if preface is not None:
        text = f"{preface}\n\n{text}"
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=render.structured(result))


async def ask(
    question: Annotated[str, Field(min_length=1, max_length=MAX_QUESTION_CHARS,
                                   description="The research question.")],
    ctx: Context[App, Any],
    docs: Annotated[str | None, Field(
        min_length=1, description="A folder the server serves (absolute, or relative to "
        "its first); default: its first folder, if it serves any.")] = None,
    web: Annotated[bool, Field(
        description="Also research the web with the server's search backend.")] = False,
    max_subtasks: Annotated[int, Field(
        ge=1, le=MAX_SUBTASKS, description="The most subtasks the lead may plan.")] = 6,
    budget: Annotated[int | str | None, Field(
        description="The run's token budget: N (input and output together) or "
        "\"IN:OUT\" (either may be empty).")] = None,
    wait_s: WaitS = None,
) -> Annotated[CallToolResult, render.RunAnswer]:
    """Research a question: the answer with numbered sources [n] and what is not covered."""
    app = _app(ctx)
    try:
        job = intake.ask_job(app.config, question, docs=docs, web=web,
                             max_subtasks=max_subtasks, budget=budget)
    except ArgumentRefused as exc:
        raise ToolError(str(exc)) from None
    return await _answer(app, ctx, job, tool="ask", wait_s=wait_s)


async def run_job(
    job: Annotated[str, Field(min_length=1, max_length=MAX_JOB_BYTES,
                              description="A fanout job (or scenario) file's YAML text.")],
    ctx: Context[App, Any],
    speed: Annotated[float, Field(
        gt=0, le=10_000, description="Run simulated latencies X times faster.")] = 1.0,
    wait_s: WaitS = None,
) -> Annotated[CallToolResult, render.RunAnswer]:
    """Run a fanout job YAML: its report's answer, sources and gaps."""
    app = _app(ctx)
    try:
        prepared = intake.run_job(app.config, job)
    except ArgumentRefused as exc:
        raise ToolError(str(exc)) from None
    return await _answer(app, ctx, prepared, tool="run_job", speed=speed, wait_s=wait_s)


async def get_report(
    run_id: Annotated[str, Field(description="A run id, as ask, run_job or list_runs give.")],
    ctx: Context[App, Any],
    format: Annotated[Literal["md", "json"], Field(
        description="md: Markdown for people and models; json: the whole report.")] = "md",
) -> str:
    """A stored run's coverage report; an unfinished run's shows what it has so far, and
    the escalations that wait for a decision (decide takes one)."""
    app = _app(ctx)
    try:
        return await _report_with_pending(app, run_id, format)
    except ArgumentRefused as exc:
        raise ToolError(str(exc)) from None


async def _report_with_pending(app: App, run_id: str, fmt: reading.ReportFormat) -> str:
    """The report, and what waits for a person on the run when it goes on here (read on
    the loop, where the run's desk lives)."""
    text = await anyio.to_thread.run_sync(_report_text, app.store, run_id, fmt)
    pending = _pending(app.door.live.get(run_id))
    if pending is None:
        return text
    if fmt == "json":
        return json.dumps({**json.loads(text), "pending": pending}, indent=2,
                          ensure_ascii=False)
    more = pending_text(run_id, pending)
    return f"{text.rstrip()}\n\n{more}\n" if more else text


def _report_text(store: RunStore, run_id: str, fmt: reading.ReportFormat) -> str:
    return reading.render_report(store, reading.run_row(store, run_id), fmt)


async def decide(
    run_id: Annotated[str, Field(description="The run, as ask, run_job or list_runs give it.")],
    escalation: Annotated[str, Field(
        description="The escalation's id (SUBTASK_ID:N), as get_report lists it.")],
    ctx: Context[App, Any],
    option: Annotated[str | None, Field(
        description="The option's id (o1, o2, ...); or give do instead.")] = None,
    do: Annotated[Do | None, Field(
        description="The option by kind: the first option of that kind.")] = None,
    text: Annotated[str | None, Field(
        description="answer: the fact (it becomes a finding cited as given by you); "
        "requery: the changed query.")] = None,
    source: Annotated[str | None, Field(
        description="answer: an http(s) URL the fact comes from.")] = None,
) -> Annotated[CallToolResult, Decision]:
    """Decide an escalation that waits for a person: the waiting subtask goes on as the
    chosen option says (retry, use_tool, requery, answer, accept, stop)."""
    app = _app(ctx)
    try:
        reading.check_run_id(run_id)
    except ArgumentRefused as exc:
        raise ToolError(str(exc)) from None
    ticket = app.door.live.get(run_id)
    if ticket is None or ticket.desk is None:
        why = ("no run of this server goes on with that id" if ticket is None else
               "no person is attached to it (its job sets no escalations, and the client "
               "that started it cannot elicit)")
        raise ToolError(f"run_id: expected a run of this server that waits for decisions, "
                        f"got {run_id!r}: {why}")
    request = {k: v for k, v in {"escalation": escalation, "option": option, "do": do,
                                 "text": text, "source": source}.items() if v is not None}
    try:
        made = ticket.desk.decide(request, by=client_name(ctx.session))
    except NotWaiting as exc:
        raise ToolError(f"escalation: {exc} (get_report lists what waits)") from None
    except DecisionError as exc:
        raise ToolError(str(exc)) from None
    said = (f"Decided {made.escalation} of run {run_id}: {made.option} ({made.do}: "
            f"{made.choice}), by {made.by}.")
    return CallToolResult(content=[TextContent(type="text", text=said)],
                          structured_content=made.model_dump(mode="json"))


async def review_plan(
    run_id: Annotated[str, Field(description="The run, as ask, run_job or list_runs give it.")],
    verdict: Annotated[Literal["approve", "reject", "edit"], Field(
        description="approve: run the plan; reject: end the run (failed, plan_rejected); "
        "edit: run the plan given in edit.")],
    ctx: Context[App, Any],
    edit: Annotated[str | None, Field(
        description="For edit: the plan's subtasks as get_report shows them, edited "
        "(removed, changed, added), as YAML or JSON.")] = None,
) -> Annotated[CallToolResult, PlanReview]:
    """Review the lead's plan that waits on a run (its job sets review_plan): approve,
    reject or edit it; an edit is checked as a job file's subtasks are."""
    app = _app(ctx)
    try:
        reading.check_run_id(run_id)
    except ArgumentRefused as exc:
        raise ToolError(str(exc)) from None
    ticket = app.door.live.get(run_id)
    desk = ticket.desk if ticket is not None else None
    plan = desk.pending()["plan"] if desk is not None else None
    if desk is None or plan is None:
        why = ("no run of this server goes on with that id" if ticket is None else
               "its plan does not wait for review (get_report shows what waits)")
        raise ToolError(f"run_id: expected a run of this server whose plan waits for "
                        f"review, got {run_id!r}: {why}")
    try:
        review: Any = verdict if verdict != "edit" else edit_of(plan["subtasks"], edit)
        made = desk.review(review, by=client_name(ctx.session))
    except NotWaiting as exc:
        raise ToolError(f"run_id: {exc} (get_report shows what waits)") from None
    except PlanEditError as exc:
        raise ToolError(str(exc)) from None
    kept = "" if made.subtasks is None else f": {len(made.subtasks)} subtask(s)"
    done = {"approve": "approved", "reject": "rejected", "edit": "edited"}[made.verdict]
    said = f"The plan of run {run_id} is {done}{kept}, by {made.by}."
    return CallToolResult(content=[TextContent(type="text", text=said)],
                          structured_content=made.model_dump(mode="json"))


async def list_runs(
    ctx: Context[App, Any],
    limit: Annotated[int, Field(ge=1, le=1000, description="How many, newest first.")] = 20,
) -> Annotated[CallToolResult, RunsList]:
    """The runs in the server's store, newest first."""
    app = _app(ctx)
    rows = await anyio.to_thread.run_sync(reading.run_rows, app.store, limit)
    lines = [f"{r['id']}  {r['status']}  {r['outcome'] or '-'}  "
             f"coverage {r['coverage'] if r['coverage'] is not None else '-'}  {r['query']}"
             for r in rows] or ["no runs yet"]
    return CallToolResult(content=[TextContent(type="text", text="\n".join(lines))],
                          structured_content=RunsList(runs=rows).model_dump(mode="json"))


async def cancel_run(
    run_id: Annotated[str, Field(description="The run to cancel, as ask, run_job or "
                                 "list_runs give it.")],
    ctx: Context[App, Any],
) -> Annotated[CallToolResult, render.RunAnswer]:
    """Cancel a run still going (one a call stopped waiting for): running subagents hand
    up what they found, the rest become gaps, and the partial report is kept; the run's
    status and report. Cancelling a cancelled run again is no error."""
    app = _app(ctx)
    try:
        # On Temporal too: the run's cancel is the workflow's `cancel` signal (the
        # executor sends it when the door's cancel reaches the run), and the workflow
        # ends with its partial report as a local run does.
        reading.check_run_id(run_id)
    except ArgumentRefused as exc:
        raise ToolError(str(exc)) from None
    ticket = app.door.cancel(run_id)
    if ticket is not None:
        with anyio.move_on_after(CANCEL_WAIT_S):
            await ticket.ended.wait()
    try:
        row = await anyio.to_thread.run_sync(reading.run_row, app.store, run_id)
        if ticket is None and run_id not in app.door.cancelled:
            reading.check_cancellable(row)
    except ArgumentRefused as exc:
        raise ToolError(str(exc)) from None
    report = ticket.report if ticket is not None else None
    if report is None and row.report is not None:
        report = CoverageReport.model_validate(row.report)
    if report is None:
        return _result(render.unfinished(run_id), f"Cancelling run {run_id}: it is winding "
                       "down and keeps what it has found.")
    said = (f"Run {run_id} is cancelled: it ended with what it had found."
            if reading.was_cancelled(report) else
            f"Run {run_id} has ended: no subtask was still going when the cancel reached "
            "it.")
    return _result(render.finished(run_id, report), said)


async def _resource(ctx: Context[App, Any], run_id: str, fmt: reading.ReportFormat) -> str:
    try:
        return await _report_with_pending(_app(ctx), run_id, fmt)
    except ArgumentRefused as exc:
        raise ResourceError(str(exc)) from None


async def report_md(run_id: str, ctx: Context[App, Any]) -> str:
    """A run's coverage report as Markdown."""
    return await _resource(ctx, run_id, "md")


async def report_json(run_id: str, ctx: Context[App, Any]) -> str:
    """A run's coverage report as JSON."""
    return await _resource(ctx, run_id, "json")


def _fields(exc: ValidationError) -> str:
    """Pydantic's argument errors as one line per field: ``field: what, got VALUE``."""
    lines = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "arguments"
        if error["type"] == "missing":
            lines.append(f"{field}: required")
            continue
        got = repr(error.get("input"))
        got = got if len(got) <= 80 else got[:77] + "..."
        lines.append(f"{field}: {error['msg'][:1].lower()}{error['msg'][1:]}, got {got}")
    return "\n".join(lines)


class FanoutServer(MCPServer[App]):
    """The SDK's server, with argument errors worded as fanout words its input errors."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[App, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {_fields(cause)}") from cause


def build_server(app: App) -> FanoutServer:
    """The MCP server of ``app``: seven tools and two resource templates."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[App]) -> AsyncIterator[App]:
        yield app

    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("fanout")
    except PackageNotFoundError:
        release = "0"
    server = FanoutServer("fanout", version=release, instructions=INSTRUCTIONS,
                          lifespan=lifespan, subscriptions=False,
                          log_level=_LEVELS.get(app.config.log_level, "WARNING"))
    server.add_tool(ask, annotations=RUNS_AT_ONCE)
    server.add_tool(run_job, annotations=RUNS_AT_ONCE)
    server.add_tool(get_report, annotations=READS)
    server.add_tool(list_runs, annotations=READS)
    server.add_tool(cancel_run, annotations=CANCELS)
    server.add_tool(decide, annotations=DECIDES)
    server.add_tool(review_plan, annotations=DECIDES)
    server.resource("fanout://runs/{run_id}/report.md", name="report.md",
                    mime_type="text/markdown")(report_md)
    server.resource("fanout://runs/{run_id}/report.json", name="report.json",
                    mime_type="application/json")(report_json)
    return server
