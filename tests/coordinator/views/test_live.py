"""The live board of `fanout run`: the lead's row follows its phases."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from coordinator.jobfile.loader import load_scenario
from coordinator.lead import JobPlanning, ResearchHooks, run_research
from coordinator.views.live import LiveBoard
from shared.clock import AnyioClock, run_in_virtual_time
from shared.ids import SeededTraceIds
from subagents.result import LEAD, ProgressEvent
from subagents.simulated.tools import SimulatedTools
from subagents.spec import SubtaskSpec

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "lead_decomposes.yaml"


def test_the_lead_row_shows_planning_then_synthesizing_never_queued() -> None:
    """Through a decomposed run the lead's row reads planning, then waiting for the
    subtasks, then synthesizing, then done: never `queued` (what it showed throughout)."""
    scenario = load_scenario(SCENARIO)
    board = LiveBoard(scenario.job)
    seen: list[str] = [board.rows[LEAD].state]

    def observe(event: ProgressEvent) -> None:
        board(event)
        if seen[-1] != board.rows[LEAD].state:
            seen.append(board.rows[LEAD].state)

    def plan(
        subtasks: Sequence[SubtaskSpec], at: float, lead_gap: object = None
    ) -> None:
        board.plan(subtasks, at)
        seen.append(board.rows[LEAD].state)

    async def main() -> None:
        clock = AnyioClock()
        planning = JobPlanning(scenario, clock=clock)
        try:
            await run_research(
                scenario, SimulatedTools(scenario.tools, clock), planning=planning,
                clock=clock, trace_ids=SeededTraceIds(scenario.seed),
                hooks=ResearchHooks(observer=observe, on_plan=plan),
            )
        finally:
            await planning.aclose()

    run_in_virtual_time(main)
    assert "queued" not in seen
    phases = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert phases[0] == "planning" and phases[-1] == "done"
    assert phases.index("waiting") < phases.index("synthesizing")
    assert str(board._state_text(board.rows[LEAD])) == "done"
    fresh = LiveBoard(scenario.job)
    assert fresh._state_text(fresh.rows[LEAD]).plain == "planning — choosing the subtasks"
