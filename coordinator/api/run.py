"""Running a job from Python: ``ask()`` and ``run_file()`` (docs/design.md §14).

Both end in :func:`execute`: the job's MCP servers are started, its Python tools served
beside its simulated ones, every progress event handed to ``on_event`` in order, every
escalation routed ``escalate`` to ``on_escalation``, and the run recorded when a store is
given. The result is the :class:`~coordinator.report.CoverageReport` the CLI prints.

Cancellation: cancelling the caller's task cancels the job the way a person cancels a run
of the service (``run_job``'s cancel): running subagents hand up what they found with
trigger ``cancelled``, queued ones become gaps, the whole report is built, recorded in the
store when one was given, and heard by an event stream; then the cancellation propagates
(it is never turned into a return value: an asyncio caller that cancels a task expects
``CancelledError``). Waiting for the job to wind down is shielded, so it is as quick as
the tools' own handling of cancellation.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any, Literal, NamedTuple

import anyio

from coordinator.api.person import EscalationCallback, PlanCallback, PythonPerson, attach
from coordinator.api.tools import ToolLike, sort_tools
from coordinator.engine.executor import Executor, LocalExecutor
from coordinator.engine.resume import Start
from coordinator.engine.run import Hooks, RunRequest
from coordinator.jobfile.ask import compose_ask_job
from coordinator.jobfile.loader import load_scenario
from coordinator.jobfile.scenario import Scenario
from coordinator.people import Desk
from coordinator.report import CoverageReport
from coordinator.store.runs import RunStore, store_path
from shared.clock import AnyioClock
from shared.tokens import load_encoding
from subagents.models.factory import MissingModelKey
from subagents.result import ProgressEvent
from subagents.tool import Tool

__all__ = [
    "EscalationCallback",
    "EventCallback",
    "ExecutorName",
    "PlanCallback",
    "Prepared",
    "StoreLike",
    "ask",
    "execute",
    "plainly",
    "prepare_ask",
    "prepare_file",
    "run_file",
]

EventCallback = Callable[[ProgressEvent], Awaitable[None] | None]
"""``on_event``: hears every progress event, as the live view sees it (sync or async)."""
StoreLike = str | PathLike[str] | RunStore
"""``store``: a run store path (SQLite), or an open :class:`RunStore`."""
ExecutorName = Literal["local", "temporal"]
"""``executor``: run in this process, or on Temporal workers (docs/design.md §15)."""


def open_store(store: StoreLike) -> RunStore:
    """The run store ``store`` names: a RunStore, a SQLite path or a ``postgresql://`` URL.

    Raises:
        StoreError: a store fanout cannot open (another kind of URL, Postgres missing).
    """
    if isinstance(store, RunStore):
        return store
    return RunStore(store_path(str(store)))


async def _deliver(
    receive: anyio.abc.ObjectReceiveStream[ProgressEvent], on_event: EventCallback
) -> None:
    """Hand each event to ``on_event`` in order; an async callback is awaited."""
    # Shielded like the job: the events of a cancelled job winding down are heard too;
    # the loop ends when the job closes its end of the stream.
    with anyio.CancelScope(shield=True):
        async with receive:
            async for event in receive:
                outcome = on_event(event)
                if inspect.isawaitable(outcome):
                    await outcome


async def execute(
    job: Prepared,
    *,
    on_event: EventCallback | None = None,
    on_escalation: EscalationCallback | None = None,
    store: StoreLike | None = None,
    speed: float = 1.0,
    on_report: Callable[[CoverageReport], None] | None = None,
    allow_private_fetch: bool = False,
    executor: ExecutorName = "local",
    temporal: Mapping[str, str] | None = None,
    on_plan: PlanCallback | None = None,
    desk: Desk | None = None,
) -> CoverageReport:
    """Run ``job`` in real time with its MCP servers and Python tools.

    A person is attached to the run (docs/design.md §17) when ``desk`` is given (a door's)
    or ``on_escalation``/``on_plan`` is: then a new desk, which the callbacks answer
    (:class:`~coordinator.api.person.PythonPerson`). ``on_plan`` makes the plan wait for
    review (the job's ``review_plan``). A callback that fails cancels the run; its error
    is raised once the run has wound down.

    ``on_report`` hears the report before the call returns or, when the caller is
    cancelled, before the cancellation propagates (an event stream keeps it).
    ``allow_private_fetch`` lets ``web.fetch`` read loopback and private addresses: the
    caller's permission (a job file cannot give it). ``executor="temporal"`` submits the
    job to the Temporal workers at ``temporal`` (``address``, ``namespace``,
    ``task_queue``), recorded in ``store`` (the default store when None: the workers
    record into it, so they must reach it); the events come from the store.

    Raises:
        MissingModelKey: the model's key variable is not set (nothing ran).
        McpServerStartError: an MCP server cannot start (nothing ran).
        InputFileErrors: the job calls a tool its MCP server does not offer.
        ValueError: an unknown executor or ``temporal`` option, or a job that cannot run
            on Temporal (Python tools run only in this process).
    """
    from coordinator.jobfile.research import ResearchPolicy

    scenario, spec_text, python_tools = job
    if on_plan is not None and not scenario.job.review_plan:
        scenario = scenario.model_copy(
            update={"job": scenario.job.model_copy(update={"review_plan": True})})
    request = RunRequest(
        scenario, spec_text, scenario.source, speed=speed, python_tools=python_tools,
        policy=ResearchPolicy(allow_private_fetch=allow_private_fetch),
    )
    runner = _executor(request, store, executor, temporal)
    cancel = anyio.Event()
    person: PythonPerson | None = None
    if on_escalation is not None or on_plan is not None:
        person = PythonPerson(on_escalation, on_plan, on_failure=cancel.set)
        if desk is None:
            desk = Desk(AnyioClock(speed=speed), wall=_now)
    finished = anyio.Event()
    box: list[CoverageReport] = []
    send, receive = anyio.create_memory_object_stream[ProgressEvent](math.inf)

    failures: list[Exception] = []

    def observer(event: ProgressEvent) -> None:
        # Once a failing callback has closed the stream, the job runs on unheard.
        with contextlib.suppress(anyio.BrokenResourceError):
            send.send_nowait(event)

    async def deliver() -> None:
        assert on_event is not None  # started only with a callback
        try:
            await _deliver(receive, on_event)
        except Exception as exc:
            # A bug in the caller's callback: the job runs on (its events are dropped
            # now); the error is raised once the job has ended.
            failures.append(exc)
            receive.close()

    hooks = Hooks(
        observer=observer if on_event is not None else None,
        handler=person if on_escalation is not None else None, cancel=cancel, desk=desk,
    )

    async def shielded() -> None:
        # The job winds down on `cancel`, never by the caller's cancel scope: it then
        # still hands up, builds and records its whole report.
        try:
            with anyio.CancelScope(shield=True):
                async with send:
                    box.append(await runner.execute(request, hooks))
        except Exception as exc:
            # Raised as itself once the task group has ended, not in an exception group.
            failures.append(exc)
        finally:
            finished.set()

    async with anyio.create_task_group() as tg:
        if on_event is not None:
            tg.start_soon(deliver)
        else:
            receive.close()
        tg.start_soon(shielded)
        attending = attach(person, desk, tg) if person is not None and desk is not None else None
        try:
            await finished.wait()
        except anyio.get_cancelled_exc_class():
            cancel.set()
            with anyio.CancelScope(shield=True):
                await finished.wait()
            if box and on_report is not None:
                on_report(box[0])
            raise
        finally:
            if attending is not None:
                attending.cancel()
    if person is not None:
        failures[:0] = person.failures  # the caller's bug first: it cancelled the run
    if failures:
        raise failures[0]
    report = box[0]
    if on_report is not None:
        on_report(report)
    return report


def _now() -> datetime:
    return datetime.now(UTC)


def _executor(
    request: RunRequest,
    store: StoreLike | None,
    executor: str,
    temporal: Mapping[str, str] | None,
) -> Executor:
    """The executor a Python caller asked for, ready (a local one's model client open).

    Raises:
        ValueError: an unknown executor, ``temporal`` options without it, or a job
            that cannot run on Temporal.
        MissingModelKey: a local run whose model's key variable is not set.
    """
    if executor == "temporal":
        from coordinator.engine.executor import TemporalExecutor, TemporalTarget, not_on_temporal

        reason = not_on_temporal(request)
        if reason is not None:
            raise ValueError(f"executor='temporal': {reason}")
        target = TemporalTarget.of(dict(temporal or {}))
        return TemporalExecutor(open_store(store if store is not None else store_path()), target)
    if executor != "local":
        raise ValueError(f"executor: expected 'local' or 'temporal', got {executor!r}")
    if temporal is not None:
        raise ValueError("temporal: given without executor='temporal'")
    load_encoding()  # load the encoding now, not on the job's clock
    clock = AnyioClock(speed=request.speed)
    start = Start.fresh(request.scenario, clock)
    start.planning.open()  # a missing key fails here, before anything runs or is recorded
    return LocalExecutor(
        open_store(store) if store is not None else None, start=start, clock=clock
    )


class Prepared(NamedTuple):
    """A job ready for :func:`execute`: the scenario, its stored text, its Python tools."""

    scenario: Scenario
    spec_text: str
    python_tools: dict[str, Tool]


def prepare_ask(
    question: str,
    *,
    tools: Iterable[ToolLike] = (),
    model: str | Mapping[str, Any] | None = None,
    base_url: str | None = None,
    subtasks: Sequence[Mapping[str, Any]] | None = None,
    max_subtasks: int = 6,
    concurrency: int = 4,
    deadline_s: float | None = None,
    seed: int | str = 0,
) -> Prepared:
    """The job ``ask()`` runs, validated (see :func:`ask` for the arguments)."""
    sorted_tools = sort_tools(tools)
    scenario, text = compose_ask_job(
        question,
        model=model,
        base_url=base_url,
        python_tools=sorted_tools.tools,
        mcp_servers=sorted_tools.mcp_servers,
        research=sorted_tools.research,
        subtasks=subtasks,
        max_subtasks=max_subtasks,
        concurrency=concurrency,
        deadline_s=deadline_s,
        seed=seed,
    )
    return Prepared(scenario, text, sorted_tools.tools)


def prepare_file(path: str | PathLike[str]) -> Prepared:
    """The job file at ``path``, validated (file, line, field in every error)."""
    scenario = load_scenario(Path(path))
    return Prepared(scenario, Path(path).read_text(encoding="utf-8"), {})


async def ask(
    question: str,
    *,
    tools: Iterable[ToolLike] = (),
    model: str | Mapping[str, Any] | None = None,
    base_url: str | None = None,
    subtasks: Sequence[Mapping[str, Any]] | None = None,
    max_subtasks: int = 6,
    concurrency: int = 4,
    deadline_s: float | None = None,
    on_event: EventCallback | None = None,
    on_escalation: EscalationCallback | None = None,
    on_plan: PlanCallback | None = None,
    store: StoreLike | None = None,
    seed: int | str = 0,
    allow_private_fetch: bool = False,
    executor: ExecutorName = "local",
    temporal: Mapping[str, str] | None = None,
) -> CoverageReport:
    """Research ``question`` with ``tools`` and ``model``; the report the CLI prints.

    Args:
        question: what to research; the lead decomposes it unless ``subtasks`` are given.
        tools: functions (type hints → schema, docstring → description), ``Tool``s,
            ``{"mcp": {"command": [...]}}`` server specs, ``"web"``, ``"docs:DIR"``.
        model: ``"PROVIDER:NAME"`` (anthropic, openai, scripted) or a model block as a
            dict, validated as a job file's (``{"provider": "scripted", "turns": ...}``);
            None: retrieval only (docs/design.md §7), the question searched with the ``"docs:DIR"``
            and ``"web"`` tools and answered with the best passages, each cited.
        base_url: another endpoint for the model (a gateway, vLLM, Ollama).
        subtasks: the job's subtasks as dicts, as in a job file; None: the lead plans.
        max_subtasks: the most subtasks the lead may plan.
        concurrency: how many subagents run at once.
        deadline_s: the job's deadline; what still runs then hands up what it found.
        on_event: hears every progress event (sync or async callable).
        on_escalation: decides each escalation routed ``escalate`` (sync or async): it
            gets the escalation with its ``id`` and ``options`` and returns a
            ``Decision``, a decision mapping (``{"do": "retry"}``, ``{"option": "o2"}``,
            ``{"do": "answer", "text": ...}``), an option id, an alternative's text, or
            None (accept the gap); the report's ``decisions`` keep it, ``by`` the OS
            user (docs/design.md §17).
        on_plan: reviews the lead's plan before the fan-out (sync or async): it gets
            the planned subtasks and returns ``"approve"`` (or None), ``"reject"``, or
            an edit ``{"edit": {"remove": [...], "change": {...}, "add": [...]}}``.
        store: a run store path to record the run in; None: not recorded.
        seed: seeds retry jitter and trace ids (same seed, same schedule).
        allow_private_fetch: let ``web.fetch`` read loopback and private addresses (a
            server on this machine); only the caller can allow it, never a job file.
        executor: ``"local"`` (this process) or ``"temporal"`` (the workers at
            ``temporal``: ``{"address": ..., "namespace": ..., "task_queue": ...}``;
            the run is recorded in ``store``, or the default store, which they reach).
        temporal: where the Temporal workers are (defaults: 127.0.0.1:7233, default,
            fanout).

    Raises:
        ValueError: a tool, the question or the model is not usable as given.
        InputFileErrors: the composed job is invalid; each error names its field.
        MissingModelKey: the provider's key variable is not set (nothing ran).
    """
    job = prepare_ask(
        question,
        tools=tools,
        model=model,
        base_url=base_url,
        subtasks=subtasks,
        max_subtasks=max_subtasks,
        concurrency=concurrency,
        deadline_s=deadline_s,
        seed=seed,
    )
    try:
        return await execute(job, on_event=on_event, on_escalation=on_escalation,
                             on_plan=on_plan, store=store,
                             allow_private_fetch=allow_private_fetch, executor=executor,
                             temporal=temporal)
    except MissingModelKey as exc:
        raise plainly(exc) from None


async def run_file(
    path: str | PathLike[str],
    *,
    on_event: EventCallback | None = None,
    on_escalation: EscalationCallback | None = None,
    on_plan: PlanCallback | None = None,
    store: StoreLike | None = None,
    speed: float = 1.0,
    allow_private_fetch: bool = False,
    executor: ExecutorName = "local",
    temporal: Mapping[str, str] | None = None,
) -> CoverageReport:
    """Run the job file at ``path`` in real time (what ``fanout run`` does, without a view).

    ``speed`` runs simulated latencies faster; real tools and models keep real time.
    ``allow_private_fetch`` is ``--allow-private-fetch`` (the file itself cannot set it).
    ``on_escalation``, ``on_plan``, ``executor`` and ``temporal`` are :func:`ask`'s.

    Raises:
        InputFileErrors: the file is invalid (file, line, field, expected).
        MissingModelKey: the provider's key variable is not set (nothing ran).
    """
    if speed <= 0:
        raise ValueError(f"speed: expected a positive number, got {speed!r}")
    try:
        return await execute(
            prepare_file(path),
            on_event=on_event,
            on_escalation=on_escalation,
            on_plan=on_plan,
            store=store,
            speed=speed,
            allow_private_fetch=allow_private_fetch,
            executor=executor,
            temporal=temporal,
        )
    except MissingModelKey as exc:
        raise plainly(exc) from None


def plainly(exc: MissingModelKey) -> MissingModelKey:
    """A missing key as the caller should see it: raised from the call they made, not
    from fanout's insides (its traceback is their line and ours, a few frames instead of
    a screenful); its one-line message names the variable to export."""
    return exc.with_traceback(None)
