"""Rendering reports for people with rich: tables, a coverage bar, the gap report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.style import Style
from rich.table import Table
from rich.text import Text

from coordinator.views.answer_marks import extractive_note, marked_lines, nothing_missing
from coordinator.views.decisions import decision_line
from coordinator.views.followups import followup_lines
from coordinator.views.not_covered import filled_lines, missing_lines
from coordinator.views.words import gap_words, route_words

if TYPE_CHECKING:  # types only: showing a report loads neither the engine nor the store
    from coordinator.replay import ReplaySummary
    from coordinator.report import CoverageReport, Gap
    from coordinator.store.runs import RunRow
    from shared.errors import InputFileError

STATUS_STYLE = {
    "complete": "green",
    "empty": "cyan",
    "partial": "yellow",
    "gap": "red",
    "queued": "dim",
    "running": "blue",
    "thinking": "cyan",
    "throttled": "yellow",
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
    text.append(
        f"   elapsed {report.elapsed_s:.3g}s   "
        if report.elapsed_s < 100
        else f"   elapsed {report.elapsed_s:.0f}s   "
    )
    text.append_text(coverage_bar(report.coverage))
    return Panel(text, title="fanout", expand=False)


def subtasks_table(report: CoverageReport) -> Table:
    """One row per subtask: status, weight, attempts, rounds, steps, findings."""
    table = Table(title="Subtasks", title_justify="left")
    columns = ["subtask", "status", "weight", "attempts", "rounds", "steps", "findings"]
    # Tokens only for a job that counted some (or has a budget): other tables stay as
    # they were.
    tokens = report.tokens is not None
    if tokens:
        columns.append("tokens in/out")
    for column in columns:
        table.add_column(column, justify="left" if column in ("subtask", "status") else "right")
    for s in report.subtasks:
        cells: list[str | Text] = [
            s.id,
            Text(s.status, style=STATUS_STYLE[s.status]),
            f"{s.weight:g}",
            str(s.attempts),
            str(s.rounds),
            str(s.steps),
            str(s.findings),
        ]
        if tokens:
            cells.append(
                f"{s.tokens.input_tokens:,}/{s.tokens.output_tokens:,}" if s.tokens else "–"
            )
        table.add_row(*cells)
    return table


def tokens_line(report: CoverageReport) -> Text | None:
    """The job's tokens in all (the lead's included) and its budget, if it counted any."""
    spend = report.tokens
    if spend is None:
        return None
    text = Text(
        f"tokens: {spend.input_tokens:,} in, {spend.output_tokens:,} out"
        + (
            f" (lead {spend.lead.input_tokens:,}/{spend.lead.output_tokens:,})"
            if spend.lead
            else ""
        )
    )
    b = spend.budget
    if b is not None:
        limits = [
            f"{name} {limit:,}"
            for name, limit in (
                ("in", b.input_tokens),
                ("out", b.output_tokens),
                ("total", b.total_tokens),
            )
            if limit is not None
        ]
        text.append(f"   budget: {', '.join(limits)}", style="dim")
    return text


def _labelled(
    lines: Sequence[tuple[str, RenderableType]], indent: int = 4, label_width: int = 0
) -> Table:
    """Label and value pairs whose values wrap under themselves, not under the label
    (``label_width``: the labels' width, so blocks of them line up)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=indent - 1 if indent else 0)
    grid.add_column(no_wrap=True, min_width=label_width)
    grid.add_column(ratio=1)
    for label, value in lines:
        grid.add_row("", label, value)
    return grid


def gaps_view(gaps: Sequence[Gap], followups: Mapping[str, str] | None = None) -> RenderableType:
    """The coverage-gap report: each gap as a block that reads well in any width, its
    cause and route in plain words (``--json`` keeps the wire's)."""
    followups = followups or {}
    blocks: list[RenderableType] = [Text(f"Coverage gaps ({len(gaps)})", style="bold")]
    for g in gaps:
        head = Text("✗ ", style="red")
        head.append(g.subtask_id, style="bold")
        head.append(f"  {gap_words(g.category, g.trigger)} → ")
        head.append(route_words(g.route),
                    style="bold red" if g.route == "escalate" else "yellow")
        lines: list[tuple[str, RenderableType]] = [
            ("tried:", Text(g.attempted_query)),
            ("why:", Text(g.message)),
            ("partial:", Text(f"{len(g.partial_results)} result(s) kept")),
        ]
        if g.alternatives:
            lines.append(("next:", Group(*(Text(f"• {a}", style="cyan")
                                            for a in g.alternatives))))
        if g.subtask_id in followups:
            style = "green" if g.filled_by else "yellow"
            lines.append(("followed:", Text(followups[g.subtask_id], style=style)))
        blocks.append(Group(head, _labelled(lines, label_width=len("followed:"))))
    return Group(*blocks)


def _plain(text: str) -> str:
    """Text from outside for a terminal: one line, no control characters (no escapes)."""
    return "".join(c if c.isprintable() else " " for c in " ".join(text.split()))


def _marked(line: list[tuple[str, list[str]]]) -> Text:
    """One line of the answer, a sentence that failed a check in yellow with its marks."""
    text = Text()
    for i, (sentence, marks) in enumerate(line):
        text.append((" " if i else "") + sentence, style="yellow" if marks else "")
        for mark in marks:
            text.append(f" {mark}", style="bold yellow")
    return text


def synthesis_view(report: CoverageReport) -> RenderableType:
    """The lead agent's answer with its sources, and the list of what is not covered."""
    answer = report.answer
    lines: list[RenderableType] = []
    shown = answer.model_dump(mode="json", include={"kind", "text", "sources", "rejected",
                                                    "checks", "verified"},
                           exclude_none=True)
    note = extractive_note(shown)
    if note is not None:
        lines.append(Text(note, style="yellow"))
    marked = marked_lines(shown)
    if marked is not None:
        lines.extend(_marked(line) for line in marked)
    elif answer.text:
        lines.append(Text(answer.text))  # Text, not markup: the model's words stay words
    if answer.text:
        if answer.sources:
            lines.append(Text("Sources", style="bold"))
            for source in answer.sources:
                where = source.url or source.path
                line = Text(f"  [{source.n}] ", style="cyan")
                # Titles and URLs come from the web: plain text, control characters out.
                line.append(_plain(source.title))
                if where:
                    # An http(s) page is a link in terminals that show them (OSC 8).
                    web = source.url is not None and _plain(source.url).lower().startswith(
                        ("http://", "https://"))
                    style = Style(color="blue", link=_plain(source.url or "")) if web else "dim"
                    line.append(f" — {_plain(where)}", style=style)
                line.append(f"  ({_plain(source.subtask)})", style="dim")
                lines.append(line)
        else:
            lines.append(Text("sources: none cited", style="dim"))
    if answer.synthesis_error is not None:
        message = str(answer.synthesis_error.get("message", ""))
        lines.append(Text(f"the lead's synthesis failed: {message}", style="red"))
    # Not covered: the gaps still open; a gap a follow-up filled is covered, and said so.
    wire = report.to_wire()
    still = missing_lines(wire)
    lines.append(Text("Not covered", style="bold yellow" if still else "bold green"))
    items = [("•", Text(line)) for line in still] or [("•", Text(nothing_missing(shown)))]
    lines.append(_labelled(items, indent=2))
    filled = filled_lines(wire)
    if filled:
        lines.append(Text("Covered by a follow-up", style="bold green"))
        lines.append(_labelled([("•", Text(line)) for line in filled], indent=2))
    return Panel(Group(*lines), title="Answer", title_align="left", border_style="cyan")


def report_view(report: CoverageReport) -> RenderableType:
    """The whole report for a terminal: the lead's answer first, when there is one."""
    parts: list[RenderableType] = [header(report)]
    answer = report.answer
    if answer.text is not None or answer.synthesis_error is not None or answer.kind:
        parts.append(synthesis_view(report))
    parts.append(subtasks_table(report))
    spent = tokens_line(report)
    if spent is not None:
        parts.append(spent)
    if report.gaps:
        parts.append(gaps_view(report.gaps, followup_lines(report.to_wire())))
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
        parts.append(Text(decision_line(d.model_dump(mode="json")), style="cyan"))
    parts.append(Text(report.answer.summary, style="italic"))
    return Group(*parts)


# Below this width the replay table would squeeze its columns to "p…": a line per
# scenario instead.
_REPLAY_TABLE_MIN = 64


def replay_view(summary: ReplaySummary, width: int | None = None) -> RenderableType:
    """One row per scenario, then every mismatch as path, expected, actual.

    The short columns never wrap or shorten; a long scenario name folds onto more lines
    (an 80-column terminal, or the 80 columns of a pipe). Under 64 columns each scenario is
    one line of text instead of a table row.
    """
    rows = [
        (
            r.scenario,
            Text("pass", style="green") if r.passed else Text("FAIL", style="bold red"),
            str(r.report.get("outcome")),
            f"{r.report.get('coverage', 0):.0%}",
            f"{r.report.get('elapsed_s', 0):g}",
            f"{r.wall_s * 1000:.1f}",
        )
        for r in summary.scenarios
    ]
    listing: RenderableType
    if width is not None and width < _REPLAY_TABLE_MIN:
        lines = [Text("Scenario replay", style="italic")]
        for name, result, outcome, coverage, virtual, wall in rows:
            line = Text(f"{name}: ")
            line.append_text(result)
            line.append(f" {outcome} {coverage} {virtual}s ({wall} ms)")
            lines.append(line)
        listing = Group(*lines)
    else:
        table = Table(title="Scenario replay", title_justify="left")
        table.add_column("scenario", overflow="fold", min_width=12, ratio=1)
        for column in ("result", "outcome", "coverage", "virtual s", "wall ms"):
            table.add_column(column, no_wrap=True,
                             justify="left" if column in ("result", "outcome") else "right")
        for row in rows:
            table.add_row(*row)
        listing = table
    parts: list[RenderableType] = [listing]
    failed = [r for r in summary.scenarios if not r.passed]
    if failed:
        mism = Table(title="Mismatches", title_justify="left")
        for column in ("file", "path", "expected", "actual"):
            mism.add_column(column, overflow="fold")
        for r in failed:
            for m in r.mismatches:
                mism.add_row(r.file, m.path, repr(m.expected), repr(m.actual))
        parts.append(mism)
    style = "bold green" if not summary.failed else "bold red"
    parts.append(Text(f"{summary.passed} passed, {summary.failed} failed", style=style))
    return Group(*parts)


def print_input_error(console: Console, error: InputFileError) -> None:
    """A bad input file, one problem per line, without a traceback."""
    problems = getattr(error, "errors", [error])
    # Problems that name a command-line option or argument (`--model`, `QUESTION`) or the
    # command itself (`fanout ask` with no tools file), not a file: "this file" would point
    # at a file the user never gave.
    from_options = all(
        p.file.startswith(("-", "fanout ")) or p.file.isupper() for p in problems
    )
    heading = "error: cannot run this command" if from_options else "error: cannot run this file"
    console.print(Text(heading, style="bold red"))
    for line in error.describe().splitlines():
        console.print(Text("  " + line))


def runs_table(rows: Sequence[RunRow], width: int | None = None) -> RenderableType:
    """The stored runs, newest first.

    Under 120 columns (an 80-column terminal) each run stays one line: the ``started``
    column is left out (a run id begins with its start time, ``YYYYMMDD-HHMMSS``), status
    and outcome share one column (a finished run's outcome, else its status:
    ``interrupted``, ``running``) and the job name is cut short with "…", so the id, the
    outcome, the coverage and the time, what a person acts on, stay whole. A run whose
    escalations wait for a person says so after its status: ``running · waiting (1)``.
    """
    if not rows:
        return Text("No runs recorded yet: `fanout run JOB.yaml` records one.", style="dim")
    narrow = width is not None and width < 120
    status_style = {"finished": "green", "interrupted": "bold red", "running": "blue",
                    "queued": "dim"}
    cells: list[tuple[str, str, tuple[Text | str, ...], str, str]] = []
    for r in rows:
        started = r.started_at.replace("T", " ").removesuffix("+00:00")
        status = Text(r.status, style=status_style.get(r.status, ""))
        if r.waiting:
            # Its escalations wait for a person (docs/design.md §17): an interrupted run's
            # wait again once `fanout resume RUN --ask` attends it.
            status.append(" · waits" if narrow else f" · waiting ({r.waiting})",
                          style="bold yellow")
        outcome = Text(r.outcome or "—", style=OUTCOME_STYLE.get(r.outcome or "", ""))
        middle: tuple[Text | str, ...] = (
            (outcome if r.status == "finished" and r.outcome else status,) if narrow
            else (started, status, outcome))
        cells.append((r.id, r.job, middle,
                      "—" if r.coverage is None else f"{r.coverage:.0%}",
                      "—" if r.elapsed_s is None else f"{r.elapsed_s:.1f}s"))
    table = Table(title="Runs", title_justify="left")
    table.add_column("id", no_wrap=True)
    if narrow:
        assert width is not None
        # The job name gives up what the other columns need (else rich cuts them all,
        # the id too). 16: the rules and the padding of five columns.
        widest = [max(len(head), *(Text(str(c[i])).cell_len for c in cells))
                  for i, head in ((0, "id"), (3, "coverage"), (4, "elapsed"))]
        outcome_width = max(len("outcome"), *(Text(str(c[2][0])).cell_len for c in cells))
        room = width - sum(widest) - outcome_width - 16
        table.add_column("job", no_wrap=True, overflow="ellipsis", min_width=6, ratio=1,
                         max_width=max(6, room))
    else:
        table.add_column("job", overflow="fold", min_width=8, ratio=1)
        table.add_column("started", no_wrap=True)
        table.add_column("status", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("coverage", justify="right", no_wrap=True)
    table.add_column("elapsed", justify="right", no_wrap=True)
    for rid, job, middle, coverage, elapsed in cells:
        table.add_row(rid, job, *middle, coverage, elapsed)
    return table


def trace_entries(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per attempt envelope: trace id, subtask, tool, attempt, time, envelope."""
    out = []
    for e in events:
        if e["kind"] != "attempt" or "result" not in e:
            continue
        envelope = e["result"]
        entry = {
            "trace_id": envelope.get("trace_id"),
            "subtask_id": e["subtask_id"],
            "tool": e.get("tool"),
            "attempt": e.get("attempt"),
            "at": e["at"],
            "elapsed_s": envelope.get("elapsed_s"),
            "session": e["session"],
            "envelope": envelope,
        }
        data = envelope.get("data")
        if e.get("tool") == "model" and isinstance(data, dict):
            # A model call: what it answered with, and what it cost in tokens.
            entry["stop_reason"] = data.get("stop_reason")
            entry["usage"] = data.get("usage")
        out.append(entry)
    return out


def model_detail(entry: dict[str, Any]) -> str:
    """A model call's stop reason, tool calls and token usage, in one cell."""
    data = entry["envelope"].get("data") or {}
    parts = [f"stop {entry.get('stop_reason')}"]
    calls = [c.get("name", "?") for c in data.get("calls") or []]
    if calls:
        parts.append("→ " + ", ".join(calls))
    usage = entry.get("usage")
    if isinstance(usage, dict):
        parts.append(f"{usage.get('input_tokens', 0)}+{usage.get('output_tokens', 0)} tokens")
    return "; ".join(parts)


def trace_table(run_id: str, entries: Sequence[dict[str, Any]], width: int | None = None) -> Table:
    """The trace for people: one row per attempt.

    Under 120 columns the trace id and session columns are dropped (``--json`` keeps
    them) and the detail goes under the outcome in one folding column, so an 80-column
    terminal shows every row readably.
    """
    table = Table(title=f"Trace of {run_id}", title_justify="left")
    wide = width is None or width >= 120
    for column in ("at", "subtask", "tool", "attempt" if wide else "try", "elapsed"):
        right = column in ("at", "attempt", "try", "elapsed")
        table.add_column(column, justify="right" if right else "left", no_wrap=right)
    table.add_column("outcome", overflow="fold", min_width=16, ratio=1)
    if wide:
        for column in ("detail", "trace id", "session"):
            table.add_column(column, overflow="fold" if column == "detail" else "ellipsis")
    for e in entries:
        env = e["envelope"]
        if env.get("ok"):
            outcome = Text("empty" if env.get("empty") else "ok", style="green")
            if not env.get("complete", True):
                outcome = Text("partial", style="yellow")
        else:
            outcome = Text(f"{env.get('errorCategory')}: {env.get('error_type')}", style="red")
        elapsed = e.get("elapsed_s")
        detail = model_detail(e) if e["tool"] == "model" and env.get("ok") else ""
        if not env.get("ok"):
            detail = str(env.get("message") or "")[:80]
        cells: list[RenderableType] = [
            f"{e['at']:.2f}",
            e["subtask_id"],
            str(e["tool"]),
            str(e["attempt"]),
            "" if elapsed is None else f"{elapsed:.2f}s",
        ]
        if wide:
            cells += [outcome, detail, str(e["trace_id"]), str(e["session"])]
        else:
            below = ("\n", Text(detail, style="dim")) if detail else ()
            cells.append(Text.assemble(outcome, *below))
        table.add_row(*cells)
    return table
