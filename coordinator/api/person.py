"""A Python caller as the run's person (docs/design.md §17): ``on_escalation`` decides
what waits on the run's desk, ``on_plan`` reviews the lead's plan.

:class:`PythonPerson` attaches to a run's :class:`~coordinator.people.Desk` (passed to the
engine in ``Hooks(desk=...)``) and answers each ``decision.needed`` by calling the
caller's callback (sync or async) and then :meth:`Desk.decide` or :meth:`Desk.review`,
``by`` the OS user (``"python"`` when there is none). What ``on_escalation`` may return:

- a :class:`~coordinator.report.Decision`, or a decision mapping (``{"do": "retry"}``,
  ``{"option": "o2"}``, ``{"do": "answer", "text": ..., "source": ...}``; the escalation's
  id is filled in);
- an option id (``"o2"``), or an option's text;
- an alternative's text, as before options existed: the option whose text it is (or
  holds), else ``accept`` (the gap stays, as a chosen alternative always left it);
- None: ``accept``.

``on_plan`` takes the plan's subtasks and returns ``"approve"`` (or None), ``"reject"``,
or an edit (``{"edit": {...}}``, a :class:`~coordinator.plan_review.PlanEdit`).

A callback that raises, or returns what the desk refuses (a
:class:`~coordinator.decision.DecisionError` naming the field), is a bug of the caller:
the person records it and calls ``on_failure`` (the run is cancelled; the error is raised
once it has wound down), rather than leave the run waiting for a decision that never comes.

The same callback also serves the engine's older :class:`EscalationHandler` path
(:meth:`PythonPerson.handle`), which asks after the rounds and records a choice; an
escalation answered on the desk is not asked again there.
"""

from __future__ import annotations

import getpass
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.abc

from coordinator.decision import DecisionError
from coordinator.people import Desk
from coordinator.plan_review import PlanEdit
from coordinator.report import Decision
from shared.escalation import Escalation, Option
from shared.options import offer
from subagents.spec import SubtaskSpec

__all__ = [
    "EscalationCallback",
    "EscalationReply",
    "PlanCallback",
    "PlanReply",
    "PythonPerson",
    "as_request",
    "as_review",
    "os_user",
]

EscalationReply = Decision | Mapping[str, Any] | str | None
"""What ``on_escalation`` returns: a decision, a decision mapping, an option id or text,
an alternative's text, or None (accept)."""
EscalationCallback = Callable[[Escalation], Awaitable[EscalationReply] | EscalationReply]
"""``on_escalation``: takes an escalation (with its id and options), returns a decision."""
PlanReply = str | Mapping[str, Any] | PlanEdit | None
"""What ``on_plan`` returns: ``"approve"`` (or None), ``"reject"``, or an edit."""
PlanCallback = Callable[[list[SubtaskSpec]], Awaitable[PlanReply] | PlanReply]
"""``on_plan``: takes the lead's planned subtasks, returns a review."""

_REQUEST_KEYS = ("escalation", "option", "do", "text", "source")


def os_user() -> str:
    """Who decides for a Python caller: the OS user, else ``"python"``."""
    try:
        return getpass.getuser() or "python"
    except (KeyError, OSError):  # no user name in the environment nor the password db
        return "python"


def _option_for_text(options: list[Option], text: str) -> Option | None:
    exact = next((o for o in options if o.text == text), None)
    if exact is not None:
        return exact
    # retry's text holds the alternative that says what to fix ("retry once this is done: …").
    return next((o for o in options if text and text in o.text), None)


def as_request(escalation: Escalation, reply: EscalationReply) -> dict[str, Any]:
    """The decision request ``reply`` (what ``on_escalation`` returned) makes on
    ``escalation`` (offered: with its id and options).

    Raises:
        DecisionError: a reply of another type (field ``on_escalation``), or a mapping
            naming another escalation.
    """
    esc_id = escalation.id or ""
    options = escalation.options or []
    if reply is None:
        return {"escalation": esc_id, "do": "accept"}
    if isinstance(reply, Decision):
        request: dict[str, Any] = {"escalation": esc_id}
        if reply.option is not None:
            request["option"] = reply.option
        elif reply.do is not None:
            request["do"] = reply.do
        else:
            return as_request(escalation, reply.choice)
        for key in ("text", "source"):
            if getattr(reply, key) is not None:
                request[key] = getattr(reply, key)
        return request
    if isinstance(reply, Mapping):
        request = {"escalation": esc_id, **reply}
        return request
    if isinstance(reply, str):
        by_id = next((o for o in options if o.id == reply), None)
        chosen = by_id or _option_for_text(options, reply)
        if chosen is not None:
            return {"escalation": esc_id, "option": chosen.id}
        return {"escalation": esc_id, "do": "accept"}
    raise DecisionError("on_escalation", "a Decision, a decision mapping, an option id or "
                        "text, an alternative, or None", type(reply).__name__)


def as_review(reply: PlanReply) -> Any:
    """The review ``reply`` (what ``on_plan`` returned) makes, as :meth:`Desk.review`
    takes it (the desk checks its shape and names the field)."""
    if reply is None:
        return "approve"
    if isinstance(reply, PlanEdit):
        return {"edit": reply.model_dump(exclude_defaults=True)}
    if isinstance(reply, Mapping):
        return dict(reply)
    return reply


async def _called(callback: Callable[[Any], Any], arg: Any) -> Any:
    out = callback(arg)
    if inspect.isawaitable(out):
        out = await out
    return out


class PythonPerson:
    """The caller's callbacks as the run's person, on a desk and on the handler path."""

    def __init__(
        self,
        on_escalation: EscalationCallback | None = None,
        on_plan: PlanCallback | None = None,
        *,
        by: str | None = None,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self.on_escalation = on_escalation
        self.on_plan = on_plan
        self.by = by if by is not None else os_user()
        self.on_failure = on_failure
        self.failures: list[Exception] = []
        """What went wrong in a callback (or what the desk refused), in order."""
        # Escalations answered on the desk, by what identifies them without an id: the
        # handler path is not asked again about one (its choice is the decision's).
        self._answered: dict[tuple[str, str, str], str] = {}

    # --- the desk ----------------------------------------------------------------------

    async def attend(self, desk: Desk) -> None:
        """Answer what waits on ``desk`` now and from now on, until cancelled."""
        with desk.needs() as needs:
            async with anyio.create_task_group() as tg:
                async for data in needs:
                    if "escalation" in data:
                        tg.start_soon(self._decide, desk, str(data["escalation"]["id"]))
                    elif "plan" in data:
                        tg.start_soon(self._review, desk, data["plan"])

    def _failed(self, exc: Exception) -> None:
        self.failures.append(exc)
        if self.on_failure is not None:
            self.on_failure()

    async def _decide(self, desk: Desk, escalation_id: str) -> None:
        escalation = next((e for e in desk.waiting() if e.id == escalation_id), None)
        if escalation is None:
            return  # decided already (by another door, or a timeout)
        if self.on_escalation is None:
            return  # only the plan is this person's: the escalation waits as the job says
        try:
            reply = await _called(self.on_escalation, escalation)
            request = as_request(escalation, reply)
            if not any(e.id == escalation_id for e in desk.waiting()):
                return  # decided meanwhile: the callback's answer comes too late
            decision = desk.decide(request, by=self.by)
        except Exception as exc:  # the caller's bug: raised after the run, not in it
            self._failed(exc)
            return
        self._answered[_key(escalation)] = decision.choice

    async def _review(self, desk: Desk, plan: Mapping[str, Any]) -> None:
        if self.on_plan is None:
            return
        subtasks = [SubtaskSpec.model_validate(s) for s in plan["subtasks"]]
        try:
            reply = await _called(self.on_plan, subtasks)
            if not desk.plan_waits():
                return
            desk.review(as_review(reply), by=self.by)
        except Exception as exc:
            self._failed(exc)

    # --- the handler path (the engine asks after the rounds) ---------------------------

    async def handle(self, escalation: Escalation) -> str | None:
        """Ask ``on_escalation`` about ``escalation`` and return the choice in words (an
        escalation already answered on the desk is not asked again)."""
        known = self._answered.get(_key(escalation))
        if known is not None:
            return known
        if self.on_escalation is None:
            return None
        reply = await _called(self.on_escalation, escalation)
        if reply is None:
            return None
        offered = escalation if escalation.options else offer(escalation, [], 1)
        if isinstance(reply, str):
            by_id = next((o for o in offered.options or [] if o.id == reply), None)
            # Any other text is the choice as given (an alternative), as this path took it.
            return by_id.text if by_id is not None else reply
        if isinstance(reply, Decision) and reply.do is None and reply.option is None:
            return reply.choice
        return _resolved(offered, as_request(offered, reply)).text


def _key(escalation: Escalation) -> tuple[str, str, str]:
    return (escalation.subtask_id, escalation.message, escalation.attempted_query)


def _resolved(escalation: Escalation, request: Mapping[str, Any]) -> Option:
    from coordinator.decision import parse_request, resolve

    return resolve(parse_request(request), escalation)


def attach(person: PythonPerson, desk: Desk, task_group: anyio.abc.TaskGroup) -> anyio.CancelScope:
    """Start ``person`` attending ``desk`` in ``task_group``; the scope that stops it."""
    scope = anyio.CancelScope()

    async def run() -> None:
        with scope:
            await person.attend(desk)

    task_group.start_soon(run)
    return scope
