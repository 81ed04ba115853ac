"""The live board of a run a person attends (docs/design.md §17): what waits for the
person shows on its subtask's row and under the table; a resumed run's finished
subtasks show as they stood, not queued."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
from rich.console import Console

from coordinator.fanout import ResearchHooks, run_research
from coordinator.jobfile.loader import load_scenario
from coordinator.lead import JobPlanning
from coordinator.people import Desk
from coordinator.views.live import LiveBoard
from shared.clock import AnyioClock, run_in_virtual_time
from shared.ids import SeededTraceIds
from subagents.run import SubagentRun
from subagents.simulated.tools import SimulatedTools

WAITS = Path(__file__).resolve().parents[1] / "data" / "person_waits.yaml"


def _frame(board: LiveBoard, width: int = 100) -> str:
    """What the board draws in a terminal ``width`` columns wide."""
    console = Console(record=True, width=width, height=24, color_system=None,
                      file=io.StringIO())
    console.print(board)
    return console.export_text()


def test_an_escalation_that_waits_for_a_person_shows_until_it_is_decided() -> None:
    """While patents:1 waits, patents' row and a line under the table say so; once
    decided, neither does."""
    scenario = load_scenario(WAITS)
    board = LiveBoard(scenario.job)
    frames: dict[str, str] = {}

    async def main() -> None:
        clock = AnyioClock()
        desk = Desk(clock)
        desk.listen(board.heard)
        planning = JobPlanning(scenario, clock=clock)

        async def person() -> None:
            while not desk.pending()["escalations"]:
                await desk.change().wait()
            frames["waiting"] = _frame(board)
            desk.decide({"escalation": "patents:1", "do": "accept"}, by="test")

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(person)
                await run_research(
                    scenario, SimulatedTools(scenario.tools, clock), planning=planning,
                    clock=clock, trace_ids=SeededTraceIds(scenario.seed),
                    hooks=ResearchHooks(observer=board, desk=desk),
                )
        finally:
            await planning.aclose()
        frames["end"] = _frame(board)

    run_in_virtual_time(main)
    [row] = [line for line in frames["waiting"].splitlines() if line.startswith("│ patents")]
    assert "waits for a person" in row
    assert "waiting for a person (1): patents:1" in frames["waiting"]
    assert "waits for a person" not in frames["end"]
    assert "waiting for a person" not in frames["end"]
    narrow = _frame(board, 50)
    assert all(len(line) <= 50 for line in narrow.splitlines())


def test_a_resumed_runs_finished_subtasks_show_as_they_stood() -> None:
    """Restored runs that had finished show done (or escalated, with its trigger), with
    their attempts and findings; one still under way stays queued until it runs."""
    scenario = load_scenario(WAITS)
    board = LiveBoard(scenario.job)
    patents, overview = (SubagentRun.for_subtask(s) for s in scenario.job.subtasks)
    overview.state, overview.attempts = "done", 1
    board.restored([patents, overview])
    assert (board.rows["overview"].state, board.rows["overview"].attempts) == ("done", 1)
    assert board.rows["patents"].state == "queued"
    board.heard("decision.needed", {"escalation": {"id": "patents:1",
                                                   "subtask_id": "patents"}})
    patents.state = "escalated"
    board.restored([patents])
    assert "escalated — waits for a person" in _frame(board)
