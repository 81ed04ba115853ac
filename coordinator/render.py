"""Rendering reports for people with rich: tables, a coverage bar, the gap report."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from coordinator.replay import ReplaySummary
from coordinator.report import CoverageReport, Gap
from shared.errors import InputFileError

STATUS_STYLE = {
    "complete": "green",
    "empty": "cyan",
    "partial": "yellow",
    "gap": "red",
    "queued": "dim",
    "running": "blue",
    "retrying": "magenta",
    "done": "green",
    "escalated": "red",
}
OUTCOME_STYLE = {"complete": "bold green", "partial": "bold yellow", "failed": "bold red"}


def coverage_bar(coverage: float, width: int = 30) -> Text:
    """A bar of ``width`` cells filled to ``coverage``, with the percentage."""
    filled = round(coverage * width)
    bar = Text("█" * filled, style="green")
    bar.append("░" * (width - filled), style="red")
    bar.append(f" {coverage:.0%}")
    return bar


def header(report: CoverageReport) -> Panel:
    """The job's headline: query, outcome, coverage and virtual or wall duration."""
    text = Text()
    text.append(report.query + "\n", style="bold")
    text.append("outcome ")
    text.append(report.outcome, style=OUTCOME_STYLE[report.outcome])
    text.append(f"   elapsed {report.elapsed_s:.3g}s   " if report.elapsed_s < 100 else
                f"   elapsed {report.elapsed_s:.0f}s   ")
    text.append_text(coverage_bar(report.coverage))
    return Panel(text, title="fanout", expand=False)


def subtasks_table(report: CoverageReport) -> Table:
    """One row per subtask: status, weight, attempts, rounds, steps, findings."""
    table = Table(title="Subtasks", title_justify="left")
    for column in ("subtask", "status", "weight", "attempts", "rounds", "steps", "findings"):
        table.add_column(column, justify="left" if column in ("subtask", "status") else "right")
    for s in report.subtasks:
        table.add_row(
            s.id,
            Text(s.status, style=STATUS_STYLE[s.status]),
            f"{s.weight:g}",
            str(s.attempts),
            str(s.rounds),
            str(s.steps),
            str(s.findings),
        )
    return table


def gaps_view(gaps: Sequence[Gap]) -> RenderableType:
    """The coverage-gap report: each gap as a block that reads well in any width."""
    blocks: list[RenderableType] = [Text(f"Coverage gaps ({len(gaps)})", style="bold")]
    for g in gaps:
        head = Text("✗ ", style="red")
        head.append(g.subtask_id, style="bold")
        head.append(f"  {g.category or 'no category'} / {g.trigger} → ")
        head.append(g.route, style="bold red" if g.route == "escalate" else "yellow")
        lines = [head]
        lines.append(Text(f"    tried:    {g.attempted_query}"))
        lines.append(Text(f"    why:      {g.message}"))
        lines.append(Text(f"    partial:  {len(g.partial_results)} result(s) kept"))
        if g.alternatives:
            lines.append(Text("    next:"))
            lines.extend(Text(f"      • {a}", style="cyan") for a in g.alternatives)
        blocks.append(Group(*lines))
    return Group(*blocks)


def report_view(report: CoverageReport) -> RenderableType:
    """The whole report for a terminal."""
    parts: list[RenderableType] = [header(report), subtasks_table(report)]
    if report.gaps:
        parts.append(gaps_view(report.gaps))
    else:
        parts.append(Text("No coverage gaps.", style="green"))
    if report.escalations:
        parts.append(
            Text(
                f"{len(report.escalations)} escalation(s) handed to a person: "
                + ", ".join(e.subtask_id for e in report.escalations),
                style="bold red",
            )
        )
    for d in report.decisions:
        parts.append(Text(f"decision for {d.subtask_id}: {d.choice}", style="cyan"))
    parts.append(Text(report.answer.summary, style="italic"))
    return Group(*parts)


def replay_view(summary: ReplaySummary) -> RenderableType:
    """One row per scenario, then every mismatch as path, expected, actual."""
    table = Table(title="Scenario replay", title_justify="left")
    for column in ("scenario", "file", "result", "outcome", "coverage", "virtual s", "wall ms"):
        table.add_column(column)
    for r in summary.scenarios:
        table.add_row(
            r.scenario,
            r.file,
            Text("pass", style="green") if r.passed else Text("FAIL", style="bold red"),
            str(r.report.get("outcome")),
            f"{r.report.get('coverage', 0):.0%}",
            f"{r.report.get('elapsed_s', 0):g}",
            f"{r.wall_s * 1000:.1f}",
        )
    parts: list[RenderableType] = [table]
    failed = [r for r in summary.scenarios if not r.passed]
    if failed:
        mism = Table(title="Mismatches", title_justify="left")
        for column in ("scenario", "path", "expected", "actual"):
            mism.add_column(column, overflow="fold")
        for r in failed:
            for m in r.mismatches:
                mism.add_row(r.scenario, m.path, repr(m.expected), repr(m.actual))
        parts.append(mism)
    style = "bold green" if not summary.failed else "bold red"
    parts.append(Text(f"{summary.passed} passed, {summary.failed} failed", style=style))
    return Group(*parts)


def print_input_error(console: Console, error: InputFileError) -> None:
    """A bad input file, one problem per line, without a traceback."""
    console.print(Text("error: cannot run this file", style="bold red"))
    for line in error.describe().splitlines():
        console.print(Text("  " + line))
