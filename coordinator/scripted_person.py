"""A scenario's ``people:`` block: its steps, and the scripted person who plays them
against a run's desk at their virtual times (docs/design.md §17).

The models validate each step's shape (the loader reads them with line-numbered errors,
and :func:`coordinator.jobfile.people.check_people` checks what they cannot see).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from coordinator.decision import DecisionError, DecisionRequest
from coordinator.people import Desk, Refused
from coordinator.plan_review import PlanEdit, PlanEditError
from shared.clock import MAX_SECONDS
from shared.escalation import Do

__all__ = [
    "SCRIPTED_BY",
    "DecideSpec",
    "PersonStep",
    "RequestSpec",
    "ReviewSpec",
    "ScriptedPerson",
]

log = logging.getLogger("fanout.people")

SCRIPTED_BY = "scenario"
"""The ``by`` of what a scenario's people block decides, unless a step names someone."""

_SPEC = ConfigDict(frozen=True, extra="forbid")
_KINDS = ("decide", "review_plan", "request")


class DecideSpec(BaseModel):
    """A scripted decision: the subtask's next escalation, an option by kind or id."""

    model_config = _SPEC

    subtask: str = Field(min_length=1, description="The subtask whose escalation is decided.")
    do: Do | None = Field(default=None, description="The first option of this kind.")
    option: str | None = Field(default=None, min_length=1, description="An option id: o1, o2, …")
    text: str | None = Field(default=None, min_length=1, description="answer: the fact given.")
    source: str | None = Field(default=None, min_length=1, description="answer: its URL.")
    by: str = Field(default=SCRIPTED_BY, min_length=1, description="Who decides.")

    @model_validator(mode="after")
    def _one_choice(self) -> DecideSpec:
        if (self.do is None) == (self.option is None):
            raise ValueError("exactly one of do, option")
        if self.do == "answer" and self.text is None:
            raise ValueError("text with do: answer (the person's answer)")
        return self


class RequestSpec(BaseModel):
    """A scripted request to a running subtask: stop and hand up, or a hint."""

    model_config = _SPEC

    subtask: str = Field(min_length=1, description="The running subtask asked.")
    stop: Literal[True] | None = Field(default=None, description="Stop and hand up what it has.")
    hint: str | None = Field(default=None, min_length=1, description="Read at its next turn.")
    by: str = Field(default=SCRIPTED_BY, min_length=1, description="Who asks.")

    @model_validator(mode="after")
    def _one_request(self) -> RequestSpec:
        if (self.stop is None) == (self.hint is None):
            raise ValueError("exactly one of stop: true, hint")
        return self


class ReviewSpec(BaseModel):
    """A scripted plan review: ``approve``, ``reject`` or ``{edit: {...}}`` in the file."""

    model_config = _SPEC

    verdict: Literal["approve", "edit", "reject"]
    edit: PlanEdit | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any) -> Any:
        # One shape per verdict in the file; a union of them would report a mistake in an
        # edit twice (once per member), so the word and the mapping are told apart here.
        if data in ("approve", "reject"):
            return {"verdict": data}
        if isinstance(data, dict) and "verdict" not in data:
            return {"verdict": "edit", **data}
        if isinstance(data, dict):
            return data
        raise ValueError("approve, reject, or edit: {remove, change, add}")

    @model_validator(mode="after")
    def _edit_given(self) -> ReviewSpec:
        if (self.verdict == "edit") != (self.edit is not None):
            raise ValueError("approve, reject, or edit: {remove, change, add}")
        return self


class PersonStep(BaseModel):
    """One thing the scripted person does, ``after_s`` seconds after the job starts."""

    model_config = _SPEC

    after_s: float = Field(ge=0, le=MAX_SECONDS, description="Seconds from the job's start.")
    decide: DecideSpec | None = None
    review_plan: ReviewSpec | None = None
    request: RequestSpec | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> PersonStep:
        present = [k for k in _KINDS if getattr(self, k) is not None]
        if len(present) != 1:
            raise ValueError("exactly one of decide, review_plan, request")
        return self

    @property
    def kind(self) -> Literal["decide", "review_plan", "request"]:
        """Which of decide, review_plan or request this step is."""
        if self.decide is not None:
            return "decide"
        return "review_plan" if self.review_plan is not None else "request"


class ScriptedPerson:
    """A scenario's ``people:`` block, played against a desk at its virtual times.

    Steps are delivered in ``after_s`` order (file order on ties), from one task, so a
    replay is deterministic. A decision for a subtask that has not escalated yet waits
    for its escalation; a request, for the subtask to run; a review, for the plan. A
    step the run cannot take (an option the escalation does not offer, a hint to a
    subtask that asks no model, a request on an engine that carries none) is skipped,
    said in :attr:`problems` and logged as a warning. :meth:`run` returns when every
    step is delivered: the flow runs it beside the job and cancels it when the job ends.
    """

    def __init__(self, desk: Desk, steps: Sequence[PersonStep]) -> None:
        self.desk = desk
        order = sorted(range(len(steps)), key=lambda i: (steps[i].after_s, i))
        self._todo: list[tuple[int, PersonStep]] = [(i, steps[i]) for i in order]
        self.problems: list[str] = []

    @property
    def left(self) -> int:
        """How many steps are not delivered yet."""
        return len(self._todo)

    async def run(self) -> None:
        """Deliver every step at its time, waiting for what it needs."""
        desk = self.desk
        while self._todo:
            now = desk.now_s()
            change = desk.change()
            delivered = [(i, s) for i, s in self._todo if s.after_s <= now and self._deliver(i, s)]
            if delivered:
                self._todo = [p for p in self._todo if p not in delivered]
                continue
            later = [s.after_s for _, s in self._todo if s.after_s > now]
            timeout = min(later) - now if later else None
            with desk.clock.move_on_after(timeout):
                await change.wait()

    def _deliver(self, index: int, step: PersonStep) -> bool:
        desk = self.desk
        where = f"people[{index}]"
        try:
            if step.decide is not None:
                d = step.decide
                waiting = desk.waiting(d.subtask)
                if not waiting:
                    return False
                desk.decide(DecisionRequest(escalation=waiting[0].id or "", option=d.option,
                                            do=d.do, text=d.text, source=d.source), by=d.by)
            elif step.review_plan is not None:
                if not desk.plan_waits():
                    return False
                r = step.review_plan
                verdict: Any = r.verdict if r.edit is None else {
                    "edit": r.edit.model_dump(mode="json", exclude_none=True)}
                desk.review(verdict, by=SCRIPTED_BY)
            elif step.request is not None:
                q = step.request
                if not desk.running(q.subtask):
                    return False
                desk.request(q.subtask, by=q.by, stop=bool(q.stop), hint=q.hint)
        except (DecisionError, PlanEditError, Refused) as exc:
            # The script chose what this run does not offer: said, and the step is spent.
            self.problems.append(f"{where}: {exc}")
            log.warning("the scenario's %s was not taken: %s", where, exc)
        return True

