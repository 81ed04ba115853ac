"""Replaying scenarios in virtual time and checking what they expect."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from coordinator.fanout import ResearchHooks, run_research
from coordinator.jobfile.expect import Mismatch, check_expect
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import JobPlanning
from coordinator.report import CoverageReport
from coordinator.routing import EscalationHandler
from shared.clock import AnyioClock, Clock, run_in_virtual_time
from shared.ids import SeededTraceIds
from subagents.result import ProgressObserver
from subagents.simulated.tools import SimulatedTools

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider


class ScenarioResult(BaseModel):
    """One replayed scenario: did its report meet ``expect``, and the report itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    file: str
    passed: bool
    mismatches: list[Mismatch] = Field(default_factory=list)
    report: dict[str, Any]
    wall_s: float = Field(default=0.0, exclude=True)


class ReplaySummary(BaseModel):
    """What ``fanout replay --json`` prints."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    passed: int
    failed: int
    scenarios: list[ScenarioResult]


async def run_scenario(
    scenario: Scenario,
    *,
    clock: Clock | None = None,
    observer: ProgressObserver | None = None,
    handler: EscalationHandler | None = None,
    tools: SimulatedTools | None = None,
    planning: JobPlanning | None = None,
    tracer_provider: TracerProvider | None = None,
) -> CoverageReport:
    """Run a scenario's job on its simulated tools with its seed (any clock).

    Subtasks without a plan are planned by the scenario's model (scripted in replays).
    Its spans go to ``tracer_provider`` (the global provider by default, docs/design.md §13).
    """
    clock = clock or AnyioClock()
    sim = tools or SimulatedTools(scenario.tools, clock)
    planning = planning or JobPlanning(scenario, clock=clock)
    try:
        return await run_research(
            scenario,
            sim,
            planning=planning,
            clock=clock,
            trace_ids=SeededTraceIds(scenario.seed),
            hooks=ResearchHooks(observer=observer, handler=handler,
                                tracer_provider=tracer_provider),
        )
    finally:
        await planning.aclose()


def replay(scenario: Scenario) -> ScenarioResult:
    """Replay ``scenario`` in virtual time and check its ``expect`` block."""
    started = time.perf_counter()
    report = run_in_virtual_time(run_scenario, scenario)
    wall = time.perf_counter() - started
    wire = report.to_wire()
    expect = scenario.expect.model_dump(exclude_none=True) if scenario.expect else {}
    mismatches = check_expect(expect, wire)
    return ScenarioResult(
        scenario=scenario.scenario,
        file=scenario.source,
        passed=not mismatches,
        mismatches=mismatches,
        report=wire,
        wall_s=wall,
    )


async def _noop() -> None:
    return None


def replay_all(scenarios: Sequence[Scenario]) -> ReplaySummary:
    """Replay every scenario, in order."""
    # Load the trio backend once, outside any scenario's timing. The token encoding is
    # not loaded here: most scenarios never need an exact count, and the one that does
    # first loads it (~0.15 s of its wall time, none of its virtual time).
    run_in_virtual_time(_noop)
    results = [replay(s) for s in scenarios]
    passed = sum(r.passed for r in results)
    return ReplaySummary(passed=passed, failed=len(results) - passed, scenarios=results)


LIVE_DIR = "live"
"""Jobs under a directory of this name call real MCP servers: ``fanout run`` runs them,
a directory given to ``fanout replay`` is searched without them."""


def scenario_files(paths: Sequence[str | Path]) -> list[Path]:
    """The scenario files named by ``paths``: files as given, directories searched.

    A directory is searched recursively, skipping ``live/`` directories below it (jobs
    on real MCP servers cannot replay in virtual time).
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.rglob("*.y*ml")
                    if p.suffix in (".yaml", ".yml")
                    and LIVE_DIR not in p.relative_to(path).parts[:-1]
                )
            )
        else:
            files.append(path)
    return files
