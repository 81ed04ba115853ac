"""The live view: a subagent waiting for its endpoint's rate limit says so."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import run_scenario
from coordinator.report import CoverageReport
from coordinator.views.live import LiveBoard
from shared.clock import run_in_virtual_time
from subagents.result import ProgressEvent

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "model_rate_limits.yaml"


def test_a_throttled_subagent_shows_waiting_for_the_rate_limit() -> None:
    """While the limiter holds a subagent, its row reads "waiting for the rate limit"."""
    scenario = load_scenario(SCENARIO)
    board = LiveBoard(scenario.job)
    shown: list[str] = []

    def observe(event: ProgressEvent) -> None:
        board(event)
        if event.kind == "state" and event.state == "throttled" and not shown:
            console = Console(record=True, width=120, color_system=None)
            console.print(board)
            shown.append(console.export_text())

    async def main() -> CoverageReport:
        return await run_scenario(scenario, observer=observe)

    report = run_in_virtual_time(main)
    assert report.outcome == "complete"
    assert shown and "waiting for the rate limit" in shown[0]
    # Once the wait is over, no row still claims it.
    console = Console(record=True, width=120, color_system=None)
    console.print(board)
    assert "waiting for the rate limit" not in console.export_text()
