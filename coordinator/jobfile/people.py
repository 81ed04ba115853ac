"""A scenario's ``people:`` block: decisions, plan reviews and requests at virtual times
(docs/design.md §17, the scenario format in docs/scenarios.md).

The models validate each step's shape; :func:`check_people` checks what they cannot
see (the subtasks a step names, a plan review in a job that asks for none, ``expect``'s
``decisions`` keys), each problem with its file, line and field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from coordinator.jobfile.errors import Suggestions, listing
from coordinator.jobfile.yamlpos import FieldPath, ParsedYaml, format_path, show
from coordinator.plan_review import PlanEdit
from shared.clock import MAX_SECONDS
from shared.errors import InputFileError
from shared.escalation import Do
from shared.options import parse_escalation_id

__all__ = ["SCRIPTED_BY", "DecideSpec", "PersonStep", "RequestSpec", "ReviewSpec", "check_people"]

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


def check_people(data: dict[Any, Any], parsed: ParsedYaml, file: str) -> list[InputFileError]:
    """What the models cannot see of ``people`` and ``expect.decisions`` in raw ``data``."""
    problems: list[InputFileError] = []

    def add(path: FieldPath, expected: str, got: str | None = None) -> None:
        problems.append(InputFileError(file, parsed.line_of(path), format_path(path),
                                       expected, got=got))

    job = data.get("job") if isinstance(data.get("job"), dict) else {}
    assert isinstance(job, dict)
    subtasks = job.get("subtasks")
    ids: list[str] | None = None
    if isinstance(subtasks, list) and subtasks:
        ids = [str(s["id"]) for s in subtasks if isinstance(s, dict) and "id" in s]
    suggest_id = Suggestions(ids or ())

    def unknown(path: FieldPath, name: Any) -> None:
        if ids is None or not isinstance(name, str) or name in ids:
            return
        close = suggest_id(name)
        hint = f" (did you mean {close!r}?)" if close else f" (one of {listing(ids)})"
        add(path, f"the id of a subtask in job{hint}", show(name))

    people = data.get("people")
    if isinstance(people, list):
        for i, step in enumerate(people):
            if not isinstance(step, dict):
                continue
            for kind in ("decide", "request"):
                body = step.get(kind)
                if isinstance(body, dict):
                    unknown(("people", i, kind, "subtask"), body.get("subtask"))
            if "review_plan" in step and job.get("review_plan") is not True:
                add(("people", i, "review_plan"),
                    "a job that sets review_plan: true (otherwise no plan waits for review)",
                    show(step.get("review_plan")))
    expect = data.get("expect")
    decisions = expect.get("decisions") if isinstance(expect, dict) else None
    if isinstance(decisions, dict):
        for key in decisions:
            parsed_id = parse_escalation_id(str(key))
            sid = parsed_id[0] if parsed_id is not None else str(key)
            unknown(("expect", "decisions", str(key)), sid)
    return problems
