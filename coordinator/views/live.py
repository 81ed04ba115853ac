"""The live display of ``fanout run``: one line per subagent and the coverage so far.

It fits the terminal: one line per row whatever its width (columns are cut short with
"…", and the less important ones left out below 100 and 60 columns), and its footer, the
coverage so far, always on screen: rows that do not fit the terminal's height are
summed up in one line (``+4 more: 3 done, 1 queued``), the finished ones first.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.table import Table
from rich.text import Text

from coordinator.job import JobSpec
from coordinator.people import DECISION_MADE, DECISION_NEEDED
from coordinator.views.terminal import STATUS_STYLE, coverage_bar
from coordinator.views.words import failure_words, model_words, trigger_words
from shared.envelope import ToolResult
from subagents.result import LEAD, ProgressEvent
from subagents.run import SubagentRun
from subagents.spec import SubtaskSpec


class BoardLive(Live):
    """rich's Live, whose last picture ends its line wherever the output goes, and leaves
    out the answer (the report printed next shows it, once).

    Into a file or a pipe rich prints the last picture once, at stop, without a newline
    after it (on a terminal it moves to a fresh line itself), so what came next was glued
    to it: Ctrl-C's ``interrupted:`` line read ``18.0sinterrupted:``.
    """

    def stop(self) -> None:
        """Stop the display; its last line ends on any output."""
        started = self.is_started
        board = self.get_renderable()
        if isinstance(board, LiveBoard):
            board.closing = True
        super().stop()
        if started and not self.console.is_terminal and not self.transient:
            self.console.line()


@dataclass
class _Row:
    state: str = "queued"
    tool: str = ""
    attempt: int = 0
    attempts: int = 0
    findings: int = 0
    incomplete: bool = False
    wait_until: float | None = None
    last: str = ""
    last_tool: str = ""
    trigger: str = ""
    changed: int = 0  # when its state last changed (the board's event count)
    followup_of: str | None = field(default=None)


def _model_last(result: ToolResult) -> str:
    """What the model last did: the tools it called, an answer, or how its call failed."""
    if not result.ok:
        return f"model {failure_words(result.category, result.error_type)}"
    data = result.data if isinstance(result.data, dict) else {}
    return model_words(data)


ANSWER_TAIL = 1200
"""Characters of the answer the live display shows (the last ones: where it is written)."""

_LEAD_PHASES = {
    "planning": ("planning — choosing the subtasks", "planning"),
    "waiting": ("waiting for the subtasks", "waiting"),
    "synthesizing": ("synthesizing — writing the answer", "writing the answer"),
}
# Widths below which columns go: the tool (shown in the last result instead), then the
# attempt and finding counts.
_FULL, _NARROW = 100, 60
# Which rows stay when they do not all fit: what is under way, then what needs a person,
# then what is next in line; what has finished goes first (the report lists it).
_ACTIVE = frozenset({"running", "retrying", "thinking", "throttled", "planning", "synthesizing"})


class LiveBoard:
    """Collects progress events and renders them; safe to render from rich's thread.

    ``height`` fixes the lines it may take (None: the terminal's, or every row when the
    output is not a terminal).
    """

    def __init__(self, job: JobSpec, *, speed: float = 1.0, height: int | None = None) -> None:
        self.job = job
        self.speed = speed
        self.height = height
        self.rows = {s.id: _Row() for s in job.subtasks}
        # A job without subtasks starts with its lead planning them: its row says so
        # from the first frame (it showed `queued` through planning and synthesis).
        self.planned = bool(job.subtasks)
        if not self.planned:
            self.rows[LEAD] = _Row(state="planning")
        # The lead's follow-ups: subtasks of weight 0, counted like any other.
        self.followups: list[SubtaskSpec] = []
        self.started = time.monotonic()
        self._events = itertools.count(1)
        # A line under the table when something outside the run needs a person's hand
        # (a Temporal run whose task queue no worker polls).
        self.notice: str | None = None
        # The escalations that wait for a person on the run's desk, by id: their
        # subtasks' (docs/design.md §17).
        self.waiting: dict[str, str] = {}
        # The lead's answer as it is written (answer.delta), then as checked (answer):
        # a rejected answer's replacement, with the reason (docs/design.md §8, "Streaming").
        self.answer = ""
        self.answer_note = ""
        self.answer_final = False
        # The display is stopping: its last picture stays on screen above the report,
        # which shows the answer; the picture leaves it out, so it is printed once.
        self.closing = False

    def plan(
        self, subtasks: Sequence[SubtaskSpec], at: float = 0.0, lead_gap: object = None
    ) -> None:
        """The lead agent decided the subtasks (or degraded its plan): a row for each."""
        self.job = self.job.model_copy(update={"subtasks": list(subtasks)})
        self.planned = True
        if LEAD in self.rows:
            self.rows[LEAD].state = "waiting"
        for spec in subtasks:
            self.rows.setdefault(spec.id, _Row())

    def follow_up(self, specs: Sequence[SubtaskSpec], at: float = 0.0) -> None:
        """The lead planned follow-ups for its gaps: a row for each, counted as subtasks."""
        known = {s.id for s in self.followups}
        for spec in specs:
            if spec.id not in known:
                self.followups.append(spec)
            self.rows.setdefault(spec.id, _Row()).followup_of = spec.followup_of

    def restored(self, runs: Iterable[SubagentRun]) -> None:
        """A resumed run's subagents as they stood when it stopped: those that had
        finished show so (not queued) from the first frame."""
        for run in runs:
            row = self.rows.get(run.spec.id)
            if row is None or not run.finished:
                continue
            row.state = run.state
            row.trigger = run.escalation.trigger if run.escalation is not None else ""
            row.attempts, row.findings = run.attempts, len(run.findings)
            row.incomplete = run.incomplete_tool is not None
            row.changed = next(self._events)

    def heard(self, event: str, data: dict[str, Any]) -> None:
        """A listener of the run's desk: an escalation that comes to wait for a person,
        and its decision (its subtask's row and a line under the table say it waits)."""
        escalation, decision = data.get("escalation"), data.get("decision")
        if event == DECISION_NEEDED and isinstance(escalation, dict):
            self.waiting[str(escalation.get("id"))] = str(escalation.get("subtask_id"))
        elif event == DECISION_MADE and isinstance(decision, dict):
            self.waiting.pop(str(decision.get("escalation")), None)

    def __call__(self, event: ProgressEvent) -> None:
        """The observer run_job calls for every event."""
        # The lead agent's events (decomposition, synthesis) get a row of their own.
        row = self.rows.setdefault(event.subtask_id, _Row())
        if event.kind in ("answer.delta", "answer"):
            self._answer(event)
            return
        before = row.state
        if event.subtask_id == LEAD:
            self._lead_state(row, event)
        if event.kind == "state" and event.state is not None:
            row.state = event.state
            row.trigger = event.trigger or ""
            if event.state != "retrying":
                row.wait_until = None
        elif event.kind == "call":
            row.tool = event.tool or ""
        elif event.kind == "start":
            row.attempts += 1
            row.attempt = event.attempt or 0
        elif event.kind == "wait" and event.wait_s is not None:
            row.wait_until = time.monotonic() + event.wait_s / self.speed
            row.attempt = event.attempt or 0
        elif event.kind == "attempt" and event.result is not None:
            result = event.result
            row.last_tool = event.tool or ""
            if event.tool == "model":
                row.last = _model_last(result)
                data = result.data if result.ok and isinstance(result.data, dict) else {}
                if data.get("text") and not data.get("calls"):
                    # An answer without a tool call is the subtask's written finding.
                    row.findings += 1
                    row.incomplete = row.incomplete or data.get("stop_reason") == "max_tokens"
            elif result.ok:
                row.findings += 1
                row.incomplete = row.incomplete or not result.complete
                if result.empty:
                    row.last = "nothing found"
                else:
                    row.last = "ok" if result.complete else "partial data"
            else:
                row.last = failure_words(result.category, result.error_type)
        elif event.kind == "hint":
            row.last = f"read a person's hint (turn {event.turn})"
        elif event.kind == "hint.unread":
            row.last = "a person's hint went unread"
        if row.state != before:
            row.changed = next(self._events)

    def _answer(self, event: ProgressEvent) -> None:
        """The answer as it is written, or (``answer``) as it was checked."""
        if event.kind == "answer.delta":
            self.answer = (event.text or "") if event.restart else self.answer + (event.text or "")
            return
        self.answer = event.text or ""
        self.answer_final = True
        if event.answer_kind == "extractive":
            self.answer_note = f"the model's answer was rejected ({event.reason}): extractive"
        elif event.answer_kind is None and event.reason:
            self.answer_note = event.reason
        else:
            self.answer_note = ""

    def _lead_state(self, row: _Row, event: ProgressEvent) -> None:
        """The lead emits model-call events only: its phase follows from them and the plan."""
        if event.kind == "start":
            row.state = "synthesizing" if self.planned else "planning"
        elif event.kind == "wait":
            row.state = "retrying"
        elif event.kind == "attempt" and self.planned and event.result and event.result.ok:
            row.state = "done"

    def _state_text(self, row: _Row, compact: bool = False, sid: str = "") -> Text:
        """The row's state; ``compact``: in the few words a narrow terminal has room for."""
        if row.state == "escalated" and sid in list(self.waiting.values()):
            # (Which escalation: the line under the table says.)
            return Text("waits for a person" if compact else "escalated — waits for a person",
                        "bold yellow")
        if row.state == "retrying" and row.wait_until is not None:
            left = max(0.0, (row.wait_until - time.monotonic()) * self.speed)
            if compact:
                return Text(f"retry #{row.attempt} in {left:.1f}s", "magenta")
            return Text(f"retrying — attempt {row.attempt}, next try in {left:.1f}s", "magenta")
        if row.state == "thinking":
            return Text("thinking" if compact else "thinking — waiting on its model",
                        STATUS_STYLE["thinking"])
        if row.state in _LEAD_PHASES:
            return Text(_LEAD_PHASES[row.state][compact], "cyan")
        if row.state == "throttled":
            return Text("rate limited" if compact else "waiting for the rate limit",
                        STATUS_STYLE["throttled"])
        if row.state == "escalated" and row.trigger and not compact:
            return Text(f"escalated — {trigger_words(row.trigger)}", "red")
        if row.state == "done" and row.incomplete:
            # Finished with partial data: the report counts it partial, not covered.
            return Text("partial" if compact else "done — partial data", STATUS_STYLE["partial"])
        if row.state == "running" and row.attempt > 1:
            return Text(f"running #{row.attempt}" if compact else
                        f"running — attempt {row.attempt}", "blue")
        return Text(row.state, STATUS_STYLE.get(row.state, ""))

    def _subtasks(self) -> list[SubtaskSpec]:
        """Every subtask the report will count: the planned ones and the follow-ups."""
        planned = {s.id for s in self.job.subtasks}
        return [*self.job.subtasks, *(s for s in self.followups if s.id not in planned)]

    def coverage_so_far(self) -> float:
        """The weighted share of the subtasks that are covered so far, as the report counts
        it: finished with whole data, or a gap a follow-up has filled."""
        subtasks = self._subtasks()
        total = sum(s.weight for s in subtasks)

        def covered(sid: str) -> bool:
            row = self.rows.get(sid, _Row())
            return row.state == "done" and not row.incomplete

        filled = {s.followup_of for s in self.followups if covered(s.id)}
        done = [s for s in subtasks if covered(s.id) or s.id in filled]
        if total <= 0:  # weights all 0: every subtask counts the same (as the report's)
            return len(done) / len(subtasks) if subtasks else 0.0
        return sum(s.weight for s in done) / total

    def footer(self, width: int = 80) -> Text:
        """The line under the table: subtasks finished (follow-ups included), the coverage
        so far, the time; in ``width`` columns."""
        subtasks = self._subtasks()
        done = sum(self.rows.get(s.id, _Row()).state in ("done", "escalated") for s in subtasks)
        head = f"{done}/{len(subtasks)} subtasks finished"
        if self.followups:
            head += f" ({len(self.followups)} follow-up{'s' * (len(self.followups) > 1)})"
        elapsed = f"{time.monotonic() - self.started:.1f}s"
        coverage = self.coverage_so_far()
        # The longest wording that fits: the count and the percentage always do.
        heads = [head, f"{done}/{len(subtasks)} finished", f"{done}/{len(subtasks)}"]
        tails = [("coverage so far", 20), ("covered", 20), ("covered", 10), ("covered", 0)]
        options = [(h, label, bar) for h in heads[:2] for label, bar in tails]
        options += [(heads[2], "covered", 0), (heads[2], "", 0)]
        for head, label, bar in options:
            tail = f"   {label} " + (" " * (bar + 1) if bar else "") + f"{coverage:.0%}"
            if len(head) + len(tail) + 3 + len(elapsed) <= width:
                break
        text = Text(head)
        text.append(f"   {label} " if label else " ")
        if bar:
            text.append_text(coverage_bar(coverage, width=bar))
        else:
            text.append(f"{coverage:.0%}")
        text.append(f"   {elapsed}")
        text.no_wrap, text.overflow = True, "ellipsis"
        return text

    def _table(self, width: int, rows: list[tuple[str, _Row]], hidden: list[_Row]) -> Table:
        """The rows as a table in ``width`` columns, a line each; ``hidden`` summed up."""
        full, narrow = width >= _FULL, width < _NARROW
        title = Text(self.job.query, no_wrap=True, overflow="ellipsis")
        table = Table(title=title, title_justify="left", expand=False)
        columns = ["subtask", "state"]
        if full:
            columns.append("tool")
        if not narrow:
            columns += ["attempts" if full else "tries", "findings" if full else "found"]
        columns.append("last result")
        for column in columns:
            count = column in ("attempts", "tries", "findings", "found")
            table.add_column(column, no_wrap=count, justify="right" if count else "left")

        def cell(value: str | Text, style: str = "") -> Text:
            text = value if isinstance(value, Text) else Text(value, style=style)
            text.no_wrap, text.overflow = True, "ellipsis"
            return text

        for i, (sid, row) in enumerate(rows):
            name = f"↳ {sid}" if row.followup_of else sid
            last = row.last
            if not full and row.last_tool and row.last_tool != "model":
                last = f"{row.last_tool}: {last}"
            cells: list[str | Text] = [cell(name, "italic" if sid == LEAD else ""),
                     cell(self._state_text(row, compact=not full, sid=sid))]
            if full:
                cells.append(cell(row.tool))
            if not narrow:
                cells += [str(row.attempts), str(row.findings)]
            cells.append(cell(last))
            # The lead is no subtask: a line sets its row apart from theirs.
            lead_ends = sid == LEAD and i < len(rows) - 1
            table.add_row(*cells, end_section=lead_ends)
        if hidden:
            counts: dict[str, int] = {}
            for row in hidden:
                counts[row.state] = counts.get(row.state, 0) + 1
            said = ", ".join(f"{n} {state}" for state, n in counts.items())
            table.add_row(cell(f"+{len(hidden)} more", "dim"), cell(said, "dim"),
                          *([""] * (len(columns) - 2)))
        return table

    def _answer_lines(self, console: Console, options: ConsoleOptions, most: int) -> list[Text]:
        """The answer so far in at most ``most`` lines: its head and its last lines."""
        head = Text("answer" if self.answer_final else "answer (being written)", style="bold")
        head.append(":")
        if self.answer_note:
            head.append(f" {self.answer_note}", style="yellow")
        shown = self.answer[-ANSWER_TAIL:]
        body: list[Text] = list(Text(shown).wrap(console, options.max_width)) if shown else []
        head_lines = list(head.wrap(console, options.max_width))
        lines = [*head_lines, *body]
        if len(lines) <= most:
            return lines
        keep = max(0, most - len(head_lines[:1]))
        tail = body[-keep:] if keep else []
        if tail:
            # "…" for what came before; the line loses its first character if it is full.
            first = tail[0][1:] if tail[0].cell_len >= options.max_width else tail[0]
            tail[0] = Text("…") + first
        return [*head_lines[:1], *tail]

    def _fitted(
        self, rows: list[tuple[str, _Row]], room: int
    ) -> tuple[list[tuple[str, _Row]], list[_Row]]:
        """The rows that fit ``room`` lines (one of them the "+N more" line), in order."""
        if len(rows) <= room:
            return rows, []
        if room < 1:
            return [], []
        keep = room - 1
        order = {sid: i for i, (sid, _) in enumerate(rows)}

        def rank(item: tuple[str, _Row]) -> tuple[int, int]:
            sid, row = item
            if row.state in _ACTIVE or sid == LEAD:
                return (0, order[sid])
            if row.state == "escalated":
                return (1, order[sid])
            if row.state == "queued":
                return (2, order[sid])
            return (3, -row.changed)  # finished: the latest stay longest

        kept = {sid for sid, _ in sorted(rows, key=rank)[:keep]}
        return ([r for r in rows if r[0] in kept],
                [row for sid, row in rows if sid not in kept])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        height = self.height
        if height is None and console.is_terminal:
            height = options.size.height
        rows = list(self.rows.items())
        footer = self.footer(width)
        extra: list[Text] = []
        if self.notice:
            extra.append(Text(f"waiting: {self.notice}", style="yellow"))
        waiting = list(self.waiting)  # (the loop's thread may change it meanwhile)
        if waiting:
            line = Text(f"waiting for a person ({len(waiting)}): " + ", ".join(waiting),
                        style="bold yellow")
            line.no_wrap, line.overflow = True, "ellipsis"
            extra.append(line)
        answer: list[Text] = []
        show_answer = (self.answer or self.answer_note) and not self.closing
        if height is None:
            if show_answer:
                answer = self._answer_lines(console, options, 1 << 30)
            yield Group(self._table(width, rows, []), footer, *extra, *answer)
            return
        # One line is left free: a picture as tall as the terminal scrolls it by a line.
        free = height - 1 - 1 - len(extra)
        frame = 5  # the title, the top rule, the header, its rule, the bottom rule
        if show_answer:
            # The answer gets a third of the screen at most, the rows what is left.
            wanted = free - frame - min(len(rows), 3)
            answer = self._answer_lines(console, options, max(2, min(wanted, height // 3)))
        room = free - frame - len(answer)
        shown, hidden = self._fitted(rows, room)
        if _lead_rule(shown) and len(shown) + bool(hidden) + 1 > room:
            shown, hidden = self._fitted(rows, room - 1)  # the rule under the lead's row
        if not shown and not hidden:
            yield Group(footer, *extra, *answer[: max(0, free - 1)])
            return
        yield Group(self._table(width, shown, hidden), footer, *extra, *answer)


def _lead_rule(rows: Sequence[tuple[str, _Row]]) -> bool:
    """Whether the table draws a rule under the lead's row (it is not the last one)."""
    return any(sid == LEAD for sid, _ in rows[:-1])
