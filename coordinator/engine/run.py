"""A run opened in one place (docs/design.md §15): the job, its tools, its recorder, its trace.

Every door — ``fanout run``/``resume``/``ask``, ``POST /runs`` and ``POST /ask``,
``ask()``/``run_file()`` — parses its input into a :class:`RunRequest` and hands it to
an executor; the local executor opens it here with :func:`open_run`, which yields one
frozen :class:`Run`:

- the job's tool source, one :func:`~subagents.toolsource.combine` of its simulated
  tools, its MCP servers' tools (started, and checked against the calls the job makes),
  its built-in research tools (opened, the folder indexed) and the caller's Python
  functions, in that order (a later source wins a name clash);
- where the run starts (:class:`~coordinator.engine.resume.Start`: fresh, or resumed
  from the store);
- the recorder: the one given (a resumed run's, the service's), or a new run created in
  ``store`` once the tools are open — a server that cannot start, or a folder that cannot
  be read, is an error before anything is recorded — or none (``ask()`` without a store);
- the trace ids, seeded by the job's seed and the run id.

What the run's hooks hear (the live view, the escalation handler, the cancel) is not
part of the run: it is the door's, and goes to the executor beside it (:class:`Hooks`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordinator.engine.resume import Start
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import FollowupHook, PlanHook
from coordinator.routing import EscalationHandler
from coordinator.store.recorder import RunRecorder
from coordinator.store.runs import RunStore
from shared.clock import Clock
from shared.ids import SeededTraceIds
from subagents.result import ProgressObserver
from subagents.tool import Tool, described
from subagents.toolsource import ToolSource, combine

if TYPE_CHECKING:
    import anyio
    from opentelemetry.trace import TracerProvider

    from coordinator.jobfile.research import ResearchPolicy
    from coordinator.people import Desk

__all__ = ["Hooks", "Run", "RunRequest", "open_run", "record_run"]

# Where an unrecorded run (``ask()`` without a store) keeps a folder's document index:
# where the default store would keep it.
UNRECORDED_HOME = Path(".fanout")


@dataclass(frozen=True)
class RunRequest:
    """What a door parsed: the job, the text the store keeps of it, and what only the
    caller can give (Python tools, the research policy of where it runs).

    ``file`` is what the store names as the job's file (a path, ``fanout ask``,
    ``ask()``, the service's submission marker).
    """

    scenario: Scenario
    spec_text: str
    file: str
    speed: float = 1.0
    python_tools: Mapping[str, Tool] = field(default_factory=dict)
    policy: ResearchPolicy | None = None


@dataclass(frozen=True)
class Hooks:
    """What the door hears of a run and how it steers it; every field is optional.

    ``on_recorded`` hears the run's id once the run is in the store (the CLI prints
    it); ``on_notice`` hears a hint while a run waits for something outside it (on
    Temporal: no worker polls the task queue; None once one does); ``desk`` is the run's
    person (docs/design.md §17): None, no person is attached and escalations are recorded.
    """

    observer: ProgressObserver | None = None
    handler: EscalationHandler | None = None
    cancel: anyio.Event | None = None
    on_plan: PlanHook | None = None
    on_followups: FollowupHook | None = None
    on_recorded: Callable[[str], None] | None = None
    on_notice: Callable[[str | None], None] | None = None
    tracer_provider: TracerProvider | None = None
    desk: Desk | None = None


@dataclass(frozen=True)
class Run:
    """One run, open in this process: everything an executor needs to run it.

    ``catalogue`` is the MCP and research tools' descriptions and schemas (a recording
    stands simulated tools in for them); ``recorder`` None: the run is not recorded.
    """

    scenario: Scenario
    clock: Clock
    start: Start
    source: ToolSource
    trace_ids: SeededTraceIds
    recorder: RunRecorder | None
    catalogue: Mapping[str, Any]

    @property
    def run_id(self) -> str | None:
        """The recorded run's id (None: not recorded)."""
        return None if self.recorder is None else self.recorder.run_id


@asynccontextmanager
async def open_run(
    request: RunRequest,
    start: Start,
    *,
    clock: Clock,
    store: RunStore | None = None,
    recorder: RunRecorder | None = None,
    on_recorded: Callable[[str], None] | None = None,
) -> AsyncIterator[Run]:
    """Open ``request`` from ``start``: its tools, its recorder, its trace ids.

    On leaving, the tools close (servers stop), the model client closes, and a recorder
    made here is flushed and closed; a ``recorder`` given stays the caller's to close.

    Raises:
        McpServerStartError: a declared server cannot start (nothing is recorded).
        InputFileErrors: the job calls a tool its server does not offer, or its research
            tools cannot open (the policy forbids the folder, a key is unset).
    """
    scenario = start.scenario
    async with AsyncExitStack() as stack:
        stack.push_async_callback(start.planning.aclose)
        if recorder is not None:
            home = _home_of(recorder)
        else:
            home = store.backend.home() if store is not None else UNRECORDED_HOME
        source, catalogue = await _open_tools(stack, request, start, home)
        if recorder is None and store is not None:
            recorder = record_run(store, request)
            stack.push_async_callback(recorder.aclose)
            if on_recorded is not None:
                on_recorded(recorder.run_id)
        trace_ids = start.trace_ids or SeededTraceIds(
            f"{scenario.seed}" if recorder is None else f"{scenario.seed}/{recorder.run_id}"
        )
        yield Run(scenario, clock, start, source, trace_ids, recorder, catalogue)


def record_run(store: RunStore, request: RunRequest) -> RunRecorder:
    """Create the run of ``request`` in ``store`` (``fanout runs`` lists it at once): the
    one place a run is registered, whichever executor then runs it."""
    scenario = request.scenario
    return store.create_run(
        job=scenario.scenario,
        query=scenario.job.query,
        file=request.file,
        spec_text=request.spec_text,
        seed=str(scenario.seed),
        speed=request.speed,
    )


def _home_of(recorder: RunRecorder) -> Path:
    # A recorder stand-in without a backend (the reliability tests' memory recorder)
    # runs jobs without research tools: the home is never used then.
    backend = getattr(recorder, "backend", None)
    return UNRECORDED_HOME if backend is None else Path(backend.home())


async def _open_tools(
    stack: AsyncExitStack, request: RunRequest, start: Start, home: Path
) -> tuple[ToolSource, dict[str, Any]]:
    """The job's tool source and the catalogue of its MCP and research tools."""
    scenario = start.scenario
    mcp = research = None
    catalogue: dict[str, Any] = {}
    if scenario.mcp_servers:
        # Imported here: the MCP SDK is loaded only by jobs that use it.
        from coordinator.jobfile.mcp import job_servers

        mcp = await stack.enter_async_context(job_servers(scenario))
        if mcp is not None:
            catalogue.update(described(mcp.tools))
    if scenario.research_tools is not None:
        from coordinator.jobfile.research import job_research_tools

        research = await stack.enter_async_context(
            job_research_tools(scenario, home, request.policy)
        )
        if research is not None:
            catalogue.update(described(research.tools))
    source = combine(start.simulated, mcp, research, request.python_tools)
    return source, catalogue
