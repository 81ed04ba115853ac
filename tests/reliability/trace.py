"""Per-attempt visibility into a replay: every progress event and every tool execution.

A replay is run with an observer (the coordinator's progress events: calls, attempt
starts and ends, waits, state changes) and with :class:`ObservedTools`, simulated tools
that also log each execution with the idempotency key of its logical call and the
response it was scripted to give. :func:`logical_calls` folds the events into the
logical calls each subtask made, round by round.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator.jobfile.scenario import Scenario
from coordinator.replay import run_scenario
from coordinator.report import CoverageReport
from shared.clock import AnyioClock, run_in_virtual_time
from shared.envelope import ToolResult
from subagents.result import ProgressEvent
from subagents.simulated.spec import ResponseSpec, SimToolSpec
from subagents.simulated.tools import SimulatedTools
from subagents.tool import CallContext, Tool


@dataclass(frozen=True)
class Execution:
    """One execution of a simulated tool body (the call passed the allowlist and schema)."""

    subtask_id: str
    tool: str
    key: str
    kind: str
    error: str | None


class ObservedTools(SimulatedTools):
    """Simulated tools that log every execution with its logical call's idempotency key."""

    def __init__(
        self,
        specs: Mapping[str, SimToolSpec],
        clock: AnyioClock,
        alive: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(specs, clock)
        self.log: list[Execution] = []
        self._key = ""
        # A simulated kill (tests/reliability/memstore.py) stops the world at once; the
        # code that still runs until its next await is not really there: not logged.
        self._alive = alive or (lambda: True)

    def _tool(self, name: str, spec: SimToolSpec, subtask_id: str) -> Tool:
        tool = super()._tool(name, spec, subtask_id)
        inner = tool.body

        async def body(ctx: CallContext, **args: Any) -> Any:
            # The inner body picks its response synchronously, before its first await,
            # so the key set here is the one _next_response logs with.
            self._key = ctx.idempotency_key
            return await inner(ctx, **args)

        return dataclasses.replace(tool, body=body)

    def _next_response(
        self, name: str, spec: SimToolSpec, subtask_id: str, args: Mapping[str, Any]
    ) -> ResponseSpec:
        chosen = super()._next_response(name, spec, subtask_id, args)
        if self._alive():
            self.log.append(Execution(subtask_id, name, self._key, chosen.kind, chosen.error))
        return chosen


@dataclass
class Attempt:
    """One attempt of a logical call: when it started, and its envelope unless it was cut."""

    start: float
    end: float | None = None
    result: ToolResult | None = None


@dataclass
class LogicalCall:
    """One step the planner proposed, with its attempts and the waits between them."""

    subtask_id: str
    round: int
    tool: str
    step: int
    attempts: list[Attempt] = field(default_factory=list)
    waits: list[tuple[float, int]] = field(default_factory=list)

    @property
    def final(self) -> ToolResult | None:
        """The envelope of the last attempt that ended."""
        ended = [a.result for a in self.attempts if a.result is not None]
        return ended[-1] if ended else None


@dataclass
class Observed:
    """A replay with everything it did."""

    report: CoverageReport
    events: list[ProgressEvent]
    executions: list[Execution]

    def wire(self) -> str:
        """The report as the JSON ``fanout replay --json`` would print."""
        return json.dumps(self.report.to_wire(), ensure_ascii=False)

    def trace_text(self) -> str:
        """Each subtask's events as one comparable text (results by their wire form).

        Subagents at the same virtual instant may interleave in any order (trio shuffles
        runnable tasks on purpose); each subagent's own sequence is what must repeat.
        """
        rows = []
        for e in sorted(self.events, key=lambda e: e.subtask_id):
            row = {k: v for k, v in vars_of(e).items() if v is not None and k != "result"}
            if e.result is not None:
                row["result"] = e.result.to_wire()
            rows.append(row)
        return json.dumps(rows, ensure_ascii=False)


def vars_of(event: ProgressEvent) -> dict[str, Any]:
    """A progress event's fields (it is a slotted dataclass)."""
    return {name: getattr(event, name) for name in event.__dataclass_fields__}


def observe(scenario: Scenario) -> Observed:
    """Replay ``scenario`` in virtual time, keeping every event and execution."""
    events: list[ProgressEvent] = []
    tools = ObservedTools(scenario.tools, AnyioClock())
    run = functools.partial(run_scenario, scenario, observer=events.append, tools=tools)
    report = run_in_virtual_time(run)
    return Observed(report, events, tools.log)


def logical_calls(events: list[ProgressEvent]) -> dict[str, list[LogicalCall]]:
    """Each subtask's logical calls in order, folded from its progress events.

    A subagent's events are sequential, so every ``start``, ``attempt`` and ``wait``
    belongs to the subtask's latest ``call``; a ``queued`` state begins a round.
    """
    calls: dict[str, list[LogicalCall]] = {}
    rounds: dict[str, int] = {}
    current: dict[str, LogicalCall | None] = {}
    for e in events:
        sid = e.subtask_id
        if e.kind == "state":
            if e.state == "queued":
                rounds[sid] = rounds.get(sid, 0) + 1
                current[sid] = None
            elif e.state in ("done", "escalated"):
                current[sid] = None
        elif e.kind == "call":
            call = LogicalCall(sid, rounds.get(sid, 1), e.tool or "", e.step or 0)
            calls.setdefault(sid, []).append(call)
            current[sid] = call
        elif e.kind in ("start", "attempt", "wait"):
            open_call = current.get(sid)
            assert open_call is not None, f"{sid}: {e.kind} outside a logical call"
            if e.kind == "start":
                open_call.attempts.append(Attempt(start=e.at))
            elif e.kind == "attempt":
                last = open_call.attempts[-1]
                assert last.result is None, f"{sid}: two ends for one attempt"
                last.end, last.result = e.at, e.result
            else:
                open_call.waits.append((e.wait_s or 0.0, e.attempt or 0))
    return calls
