"""The person at the terminal (``--ask``, ``--review``): asked on the run's desk as an
escalation happens, or as the lead's plan waits (docs/design.md §17).

:class:`TerminalPerson` attends a run's :class:`~coordinator.people.Desk`: each
``decision.needed`` pauses the live board, shows what waits and asks, in a worker thread
(the run's loop goes on: every other subtask keeps running), then hands the answer back
to the loop with :meth:`Desk.decide` or :meth:`Desk.review`, ``by`` the OS user. A choice
the desk refuses (a :class:`~coordinator.decision.DecisionError`) is said, naming its
field, and asked again. One thing is asked at a time; what was decided meanwhile (a
timeout) is not asked. With stdin closed there is nobody to ask: what waits is decided
as the job's timeout would decide it (``escalations.on_timeout``; the plan: approve).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
import anyio.to_thread
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.prompt import Prompt
from rich.table import Table

from coordinator.decision import DecisionError
from coordinator.jobfile.scenario import Scenario
from coordinator.people import Desk
from coordinator.views.live import LiveBoard
from shared.escalation import Escalation
from subagents.spec import SubtaskSpec

__all__ = ["TerminalPerson", "reviewed", "wall_now"]


def wall_now() -> datetime:
    """The wall time, for a decision's ``at``."""
    return datetime.now(UTC)


class _Gone(Exception):
    """stdin is closed: nobody is at the terminal to answer."""


class TerminalPerson:
    """The person at this terminal, answering what waits on a run's desk.

    Args:
        console: where the escalations, the plan and the prompts are shown.
        live: the run's live board, paused while a question is asked.
        by: who decides (the OS user).
        escalations: ask about escalations (``--ask``).
        plans: ask about the lead's plan (``--review``).
        on_timeout: what stdin closed decides for an escalation (the job's ``on_timeout``).
    """

    def __init__(
        self,
        console: Console,
        live: Live | None,
        *,
        by: str,
        escalations: bool = True,
        plans: bool = False,
        on_timeout: Literal["accept", "stop"] = "accept",
    ) -> None:
        self.console = console
        self.live = live
        self.by = by
        self.escalations = escalations
        self.plans = plans
        self.on_timeout = on_timeout
        self.gone = False
        """Whether stdin closed (nobody is asked from then on)."""

    async def attend(self, desk: Desk) -> None:
        """Answer what waits on ``desk`` now and from now on, one at a time, until cancelled."""
        with desk.needs() as needs:
            async for data in needs:
                if "escalation" in data and self.escalations:
                    await self._decide(desk, str(data["escalation"]["id"]))
                elif "plan" in data and self.plans:
                    await self._review(desk)

    # --- the board ---------------------------------------------------------------------

    @contextmanager
    def _paused(self) -> Iterator[None]:
        """The live board stopped (its last picture left above) while a question is
        asked; it starts again afterwards, showing the run as it has gone on."""
        live = self.live
        was_live = live is not None and live.is_started
        if was_live:
            assert live is not None
            live.stop()
        try:
            yield
        finally:
            if was_live:
                assert live is not None
                board = live.get_renderable()
                if isinstance(board, LiveBoard):
                    board.closing = False
                self.console.print()
                live.start()

    def _ask(self, prompt: str, **kwargs: Any) -> str:
        """One answer typed at the terminal (run in a worker thread)."""
        try:
            return Prompt.ask(prompt, console=self.console, **kwargs)
        except EOFError:
            raise _Gone from None

    # --- escalations -------------------------------------------------------------------

    async def _decide(self, desk: Desk, escalation_id: str) -> None:
        escalation = _waiting(desk, escalation_id)
        if escalation is None:
            return  # decided already (a timeout)
        if self.gone:
            self._decide_for_nobody(desk, escalation)
            return
        with self._paused():
            self._show_escalation(escalation)
            while True:
                try:
                    request = await anyio.to_thread.run_sync(
                        self._ask_escalation, escalation, abandon_on_cancel=True)
                except _Gone:
                    self.gone = True
                    self._decide_for_nobody(desk, escalation)
                    return
                if _waiting(desk, escalation_id) is None:
                    self.console.print(f"[yellow]{escape(escalation_id)} no longer waits[/] "
                                       "(decided meanwhile)")
                    return
                try:
                    decision = desk.decide(request, by=self.by)
                except DecisionError as exc:
                    self.console.print(f"[bold red]refused:[/] {escape(str(exc))}; "
                                       "choose again")
                    continue
                self.console.print(f"[green]decided[/] {escape(escalation_id)}: "
                                   f"[bold]{decision.do}[/] {escape(decision.choice)}")
                return

    def _decide_for_nobody(self, desk: Desk, escalation: Escalation) -> None:
        assert escalation.id is not None
        self.console.print(f"[yellow]stdin closed:[/] {escape(escalation.id)} decided "
                           f"{self.on_timeout}, as a timeout would")
        desk.decide({"escalation": escalation.id, "do": self.on_timeout}, by=self.by)

    def _show_escalation(self, escalation: Escalation) -> None:
        c = self.console
        c.rule(f"[bold red]escalation {escape(escalation.id or '')}: "
               f"{escape(escalation.subtask_id)}")
        c.print(f"[bold]{escalation.trigger}[/] ({escalation.category or 'no category'}): "
                f"{escape(escalation.message)}")
        c.print(f"tried: {escape(escalation.attempted_query)}")
        for option in escalation.options or []:
            c.print(f"  [cyan]{option.id}[/]: {option.do} — {escape(option.text)}")

    def _ask_escalation(self, escalation: Escalation) -> dict[str, Any]:
        """The decision request typed for ``escalation`` (in a worker thread)."""
        options = escalation.options or []
        accept = next((o.id for o in options if o.do == "accept"), None)
        choice = self._ask("option", choices=[o.id for o in options], default=accept)
        option = next(o for o in options if o.id == choice)
        request: dict[str, Any] = {"escalation": escalation.id, "option": option.id}
        if option.do == "answer":
            request["text"] = self._ask("your answer")
            source = self._ask("its source (an http(s) URL; Enter: none)", default="",
                               show_default=False)
            if source.strip():
                request["source"] = source.strip()
        elif option.do == "requery" and option.query:
            request["text"] = self._ask("query", default=option.query)
        return request

    # --- the plan ----------------------------------------------------------------------

    async def _review(self, desk: Desk) -> None:
        plan = desk.pending()["plan"]
        if plan is None:
            return
        if self.gone:
            desk.review("approve", by=self.by)
            return
        subtasks = [SubtaskSpec.model_validate(s) for s in plan["subtasks"]]
        with self._paused():
            self.console.rule("[bold]the lead's plan waits for your review")
            self.console.print(plan_table(subtasks))
            while True:
                try:
                    verdict = await anyio.to_thread.run_sync(
                        self._ask_review, subtasks, abandon_on_cancel=True)
                except _Gone:
                    self.gone = True
                    self.console.print("[yellow]stdin closed:[/] the plan is approved, "
                                       "as a timeout would")
                    verdict = "approve"
                if not desk.plan_waits():
                    self.console.print("[yellow]the plan no longer waits[/] (decided meanwhile)")
                    return
                try:
                    review = desk.review(verdict, by=self.by)
                except DecisionError as exc:
                    self.console.print(f"[bold red]refused:[/] {escape(str(exc))}; "
                                       "review again")
                    continue
                shown = "" if review.subtasks is None else f": {len(review.subtasks)} subtasks"
                done = {"approve": "approved", "reject": "rejected", "edit": "edited"}
                self.console.print(f"[green]plan {done[review.verdict]}[/]{shown}")
                return

    def _ask_review(self, subtasks: list[SubtaskSpec]) -> str | Mapping[str, Any]:
        """The review typed for the plan (in a worker thread): a verdict or an edit."""
        verdict = self._ask("approve, reject or edit", choices=["approve", "reject", "edit"],
                            default="approve")
        if verdict != "edit":
            return verdict
        remove = self._ask("remove (subtask ids, comma-separated; Enter: none)", default="",
                           show_default=False)
        edit: dict[str, Any] = {}
        ids = [part.strip() for part in remove.split(",") if part.strip()]
        if ids:
            edit["remove"] = ids
        change: dict[str, dict[str, str]] = {}
        while True:
            line = self._ask("change a query as ID=NEW QUERY (Enter: done)", default="",
                             show_default=False)
            if not line.strip():
                break
            sid, sep, query = line.partition("=")
            if not sep:
                self.console.print("[bold red]refused:[/] expected ID=NEW QUERY")
                continue
            change[sid.strip()] = {"query": query.strip()}
        if change:
            edit["change"] = change
        return {"edit": edit}


def _waiting(desk: Desk, escalation_id: str) -> Escalation | None:
    return next((e for e in desk.waiting() if e.id == escalation_id), None)


def plan_table(subtasks: list[SubtaskSpec]) -> Table:
    """The lead's plan as a table: each subtask's id, query, tools and weight."""
    table = Table(show_header=True, header_style="bold")
    for column in ("id", "query", "tools", "weight"):
        table.add_column(column)
    for spec in subtasks:
        table.add_row(escape(spec.id), escape(spec.query), escape(", ".join(spec.tools)),
                      f"{spec.weight:g}")
    return table


def reviewed(scenario: Scenario, err: Console) -> Scenario:
    """``scenario`` whose lead's plan waits for review (``--review``)."""
    if scenario.job.subtasks:
        err.print("[yellow]warning:[/] --review: the job's subtasks are its file's; there "
                  "is no lead's plan to review")
        return scenario
    job = scenario.job.model_copy(update={"review_plan": True})
    return scenario.model_copy(update={"job": job})
