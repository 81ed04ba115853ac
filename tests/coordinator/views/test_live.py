"""The live board of `fanout run`: the lead's row follows its phases."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from rich.console import Console

from coordinator.fanout import ResearchHooks, run_research
from coordinator.jobfile.loader import load_scenario
from coordinator.lead import JobPlanning
from coordinator.report import CoverageReport
from coordinator.views.live import BoardLive, LiveBoard
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


DEMO = SCENARIO.parent / "research_lead.yaml"


def _frame(board: LiveBoard, width: int = 80, height: int = 24) -> list[str]:
    """What the board draws in a terminal of ``width`` × ``height`` (it fits itself)."""
    console = Console(record=True, width=width, height=height, color_system=None,
                      file=io.StringIO())
    console.print(board)
    return console.export_text().splitlines()


def _run_demo(observe: Callable[[ProgressEvent], None], board: LiveBoard) -> CoverageReport:
    """`make demo`'s job in virtual time, the board hearing what `fanout run` hears."""
    scenario = load_scenario(DEMO)

    async def main() -> CoverageReport:
        clock = AnyioClock()
        planning = JobPlanning(scenario, clock=clock)
        try:
            return await run_research(
                scenario, SimulatedTools(scenario.tools, clock), planning=planning,
                clock=clock, trace_ids=SeededTraceIds(scenario.seed),
                hooks=ResearchHooks(observer=observe, on_plan=board.plan,
                                    on_followups=board.follow_up),
            )
        finally:
            await planning.aclose()

    return run_in_virtual_time(main)


def test_the_demo_fits_an_80_by_24_terminal_a_line_per_row_footer_always_shown() -> None:
    """Every frame of the demo in 80×24: at most 23 lines of at most 80 columns, no row
    wrapped onto a second line, and the coverage footer on screen (it was cut off with
    "…" after six subtasks, each row three or four lines)."""
    board = LiveBoard(load_scenario(DEMO).job, height=24)
    frames: list[list[str]] = []

    def observe(event: ProgressEvent) -> None:
        # Asserted after the run: an assertion in here would fail the subagent instead.
        board(event)
        frames.append(_frame(board))

    _run_demo(observe, board)
    assert len(frames) > 100
    for lines in frames:
        assert len(lines) <= 23 and all(len(line) <= 80 for line in lines), lines
        # A row that wrapped continues under an empty first cell.
        assert not [line for line in lines if re.match(r"│\s+│", line)], lines
        assert any("subtasks finished" in line and "%" in line for line in lines), lines
    shown = "\n".join(frames[-1])
    assert "↳ patents_web" in shown and "↳ supply_chain_pa" in shown


def test_the_footer_counts_what_the_report_counts() -> None:
    """At the end the footer says 10 of 10 subtasks (the follow-ups included) and the
    report's 90%, where it said 8/8 and 70% beside an 11-row table."""
    board = LiveBoard(load_scenario(DEMO).job, height=24)
    report = _run_demo(board, board)
    footer = board.footer(80).plain
    assert footer.startswith(f"{len(report.subtasks)}/{len(report.subtasks)} subtasks finished")
    assert "(2 follow-ups)" in footer and f"{report.coverage:.0%}" in footer
    assert board.coverage_so_far() == report.coverage == 0.9
    # The lead is no subtask: a rule sets its row apart.
    lines = _frame(board)
    lead = next(i for i, line in enumerate(lines) if line.startswith("│ lead "))
    assert lines[lead + 1].startswith("├")
    # A subtask that finished with partial data reads so, as the report's status does.
    board.height = None  # every row (not a terminal)
    [supply] = [line for line in _frame(board) if line.startswith("│ supply_chain ")]
    assert "partial" in supply


@pytest.mark.parametrize(("width", "columns", "left_out"), [
    pytest.param(120, ["subtask", "state", "tool", "attempts", "findings", "last result"], [],
                 id="120"),
    pytest.param(80, ["subtask", "state", "tries", "found", "last result"], ["tool"], id="80"),
    pytest.param(50, ["subtask", "state", "last result"], ["tries", "found"], id="50"),
])
def test_narrower_terminals_drop_the_less_important_columns(
    width: int, columns: list[str], left_out: list[str]
) -> None:
    """The tool goes first (the last result names it), then the counts; the subtask, its
    state and its last result stay."""
    board = LiveBoard(load_scenario(DEMO).job, height=24)
    _run_demo(board, board)
    lines = _frame(board, width)
    header = next(line for line in lines if "subtask" in line)
    assert [c.strip() for c in re.split(r"[┃│]", header) if c.strip()] == columns
    assert not any(c in header for c in left_out)
    assert all(len(line) <= width for line in lines)


def test_rows_that_do_not_fit_are_summed_up_finished_ones_first() -> None:
    """In 16 lines the finished rows give way to one "+N more: N done" line; the footer
    is the last line drawn and what still runs stays in view."""
    board = LiveBoard(load_scenario(DEMO).job, height=16)
    seen: list[tuple[list[str], list[str]]] = []

    def observe(event: ProgressEvent) -> None:
        # Asserted after the run: an assertion in here would fail the subagent instead.
        board(event)
        running = [sid for sid, row in board.rows.items() if row.state == "running"]
        seen.append((running, _frame(board, height=16)))

    _run_demo(observe, board)
    for running, lines in seen:
        assert len(lines) <= 15 and any("subtasks finished" in line for line in lines), lines
        for sid in running:
            assert any(re.match(rf"│ (↳ )?{re.escape(sid[:10])}", line) for line in lines), (
                sid, lines)
    assert any("more" in line and "done" in line for _, lines in seen for line in lines)


def test_the_answer_shows_while_written_and_is_left_to_the_report_at_the_end() -> None:
    """While the run lasts the board shows the answer's last lines; its last picture,
    which stays above the printed report, has none (the answer was printed twice)."""
    board = LiveBoard(load_scenario(DEMO).job)
    _run_demo(board, board)
    during = "\n".join(_frame(board))
    assert "answer:" in during and "[8]" in during
    out = io.StringIO()
    live = BoardLive(board, console=Console(file=out, width=80, color_system=None))
    live.start()
    live.stop()
    printed = out.getvalue()
    assert "subtasks finished" in printed and "answer:" not in printed
    assert printed.count("│ market ") == 1
