"""The live display of ``fanout run``: one line per subagent and the coverage so far."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from coordinator.job import JobSpec
from coordinator.views.terminal import STATUS_STYLE, coverage_bar
from shared.envelope import ToolResult
from subagents.result import LEAD, ProgressEvent
from subagents.spec import SubtaskSpec


class BoardLive(Live):
    """rich's Live, whose last picture ends its line wherever the output goes.

    Into a file or a pipe rich prints the last picture once, at stop, without a newline
    after it (on a terminal it moves to a fresh line itself), so what came next was glued
    to it: Ctrl-C's ``interrupted:`` line read ``18.0sinterrupted:``.
    """

    def stop(self) -> None:
        """Stop the display; its last line ends on any output."""
        started = self.is_started
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
    trigger: str = ""


def _model_last(result: ToolResult) -> str:
    """What the model last did: the tools it called, an answer, or how its call failed."""
    if not result.ok:
        return f"model {result.category}: {result.error_type}"
    data = result.data if isinstance(result.data, dict) else {}
    calls = [str(c.get("name", "?")) for c in data.get("calls") or []]
    if calls:
        return "model → " + ", ".join(calls)
    return f"model answered ({data.get('stop_reason', 'end_turn')})"


ANSWER_TAIL = 1200
"""Characters of the answer the live display shows (the last ones: where it is written)."""

_LEAD_PHASES = {
    "planning": "planning — choosing the subtasks",
    "waiting": "waiting for the subtasks",
    "synthesizing": "synthesizing — writing the answer",
}


class LiveBoard:
    """Collects progress events and renders them; safe to render from rich's thread."""

    def __init__(self, job: JobSpec, *, speed: float = 1.0) -> None:
        self.job = job
        self.speed = speed
        self.rows = {s.id: _Row() for s in job.subtasks}
        # A job without subtasks starts with its lead planning them: its row says so
        # from the first frame (it showed `queued` through planning and synthesis).
        self.planned = bool(job.subtasks)
        if not self.planned:
            self.rows[LEAD] = _Row(state="planning")
        self.started = time.monotonic()
        # A line under the table when something outside the run needs a person's hand
        # (a Temporal run whose task queue no worker polls).
        self.notice: str | None = None
        # The lead's answer as it is written (answer.delta), then as checked (answer):
        # a rejected answer's replacement, with the reason (DESIGN §8, "Streaming").
        self.answer = ""
        self.answer_note = ""
        self.answer_final = False

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

    def __call__(self, event: ProgressEvent) -> None:
        """The observer run_job calls for every event."""
        # The lead agent's events (decomposition, synthesis) get a row of their own.
        row = self.rows.setdefault(event.subtask_id, _Row())
        if event.kind in ("answer.delta", "answer"):
            self._answer(event)
            return
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
                row.last = "empty" if result.empty else "ok"
            else:
                row.last = f"{result.category}: {result.error_type}"

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

    def _state_text(self, row: _Row) -> Text:
        if row.state == "retrying" and row.wait_until is not None:
            left = max(0.0, (row.wait_until - time.monotonic()) * self.speed)
            return Text(f"retrying — attempt {row.attempt}, next try in {left:.1f}s", "magenta")
        if row.state == "thinking":
            return Text("thinking — waiting on its model", STATUS_STYLE["thinking"])
        if row.state in _LEAD_PHASES:
            return Text(_LEAD_PHASES[row.state], "cyan")
        if row.state == "throttled":
            return Text("waiting for the rate limit", STATUS_STYLE["throttled"])
        if row.state == "escalated" and row.trigger:
            return Text(f"escalated — {row.trigger}", "red")
        if row.state == "running" and row.attempt > 1:
            return Text(f"running — attempt {row.attempt}", "blue")
        return Text(row.state, STATUS_STYLE.get(row.state, ""))

    def coverage_so_far(self) -> float:
        """The weighted share of finished subtasks that are covered so far."""
        total = sum(s.weight for s in self.job.subtasks) or 1.0
        covered = sum(
            s.weight
            for s in self.job.subtasks
            if (row := self.rows.get(s.id, _Row())).state == "done" and not row.incomplete
        )
        return covered / total

    def __rich__(self) -> RenderableType:
        table = Table(title=self.job.query, title_justify="left", expand=False)
        for column in ("subtask", "state", "tool", "attempts", "findings", "last result"):
            table.add_column(column)
        for sid, row in self.rows.items():
            table.add_row(
                sid,
                self._state_text(row),
                row.tool,
                str(row.attempts),
                str(row.findings),
                row.last,
            )
        subtasks = [self.rows[s.id] for s in self.job.subtasks if s.id in self.rows]
        done = sum(r.state in ("done", "escalated") for r in subtasks)
        footer = Text(f"{done}/{len(subtasks)} finished   coverage so far ")
        footer.append_text(coverage_bar(self.coverage_so_far(), width=20))
        footer.append(f"   {time.monotonic() - self.started:.1f}s")
        parts: list[RenderableType] = [table, footer]
        if self.notice:
            parts.append(Text(f"waiting: {self.notice}", style="yellow"))
        if self.answer or self.answer_note:
            parts.append(self._answer_text())
        return Group(*parts)

    def _answer_text(self) -> Text:
        """The answer so far: its last lines (a live display must fit the screen)."""
        head = "answer" if self.answer_final else "answer (being written)"
        text = Text(f"{head}:", style="bold")
        if self.answer_note:
            text.append(f" {self.answer_note}", style="yellow")
        shown = self.answer
        if len(shown) > ANSWER_TAIL:
            shown = "…" + shown[-ANSWER_TAIL:]
        text.append("\n" + shown)
        return text
