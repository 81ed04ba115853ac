"""A person's review of the lead's plan: approve, edit or reject (docs/design.md §17).

An edit adds, removes or changes subtasks (a subtask's query, tools or weight). It is
checked as a job file's subtasks are: a new subtask takes the job's defaults, ids are
unique, tools are the job's, and an error names the field (``edit.change.news.weight``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from coordinator.decision import DecisionError
from subagents.spec import SubtaskSettings, SubtaskSpec

__all__ = [
    "PlanEdit",
    "PlanEditError",
    "PlanReview",
    "SubtaskChange",
    "Verdict",
    "apply_plan_edit",
    "parse_review",
]

Verdict = Literal["approve", "edit", "reject"]

PLAN_REJECTED = "plan_rejected"
"""The lead's gap when a person rejects its plan (the run ends ``failed``)."""

_NEW_KEYS = ("id", "query", "tools", "weight")


class PlanEditError(DecisionError):
    """A plan edit that is not a valid plan; ``field`` is its path (``edit.add[0].query``)."""


class SubtaskChange(BaseModel):
    """What an edit changes of one subtask of the plan; what it leaves out stays."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str | None = Field(default=None, min_length=1)
    tools: list[str] | None = None
    weight: float | None = Field(default=None, ge=0, le=1e9)


class PlanEdit(BaseModel):
    """A person's edit of the plan: subtasks removed, changed, then added (in that order)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    remove: list[str] = Field(default_factory=list, description="Ids of subtasks to drop.")
    change: dict[str, SubtaskChange] = Field(
        default_factory=dict, description="Per subtask id: a new query, tools or weight."
    )
    add: list[dict[str, Any]] = Field(
        default_factory=list,
        description="New subtasks: id, query, tools and weight (the job's defaults apply).",
    )


class PlanReview(BaseModel):
    """A person's verdict on the plan, and the plan the run goes on with (``edit``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: Verdict
    subtasks: list[SubtaskSpec] | None = Field(default=None, exclude_if=lambda v: v is None)
    by: str
    at: str | None = Field(default=None, exclude_if=lambda v: v is None)
    at_s: float | None = Field(default=None, exclude_if=lambda v: v is None)
    # The edit as the person wrote it, for an engine that checks it again where the plan
    # waits (Temporal's review_plan update); not part of the review's wire form.
    _edit: PlanEdit | None = PrivateAttr(default=None)

    def with_edit(self, edit: PlanEdit | None) -> PlanReview:
        """This review, remembering the ``edit`` it was made from."""
        self._edit = edit
        return self

    def verdict_as_given(self) -> Any:
        """The verdict as a door gives it (:func:`parse_review` reads it again):
        ``"approve"``, ``"reject"`` or ``{"edit": {...}}``."""
        if self.verdict == "edit" and self._edit is not None:
            return {"edit": self._edit.model_dump(mode="json", exclude_defaults=True)}
        return self.verdict


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "…"


def _path(parts: Sequence[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _pydantic_error(exc: ValidationError, where: Sequence[str | int]) -> PlanEditError:
    err = exc.errors(include_url=False)[0]
    loc = [*where, *(p for p in err["loc"] if isinstance(p, str | int))]
    expected = err["msg"][0].lower() + err["msg"][1:] if err["msg"] else "a valid value"
    got = None if err["type"] == "missing" else _shown(err.get("input"))
    return PlanEditError(_path(loc), expected, got)


def parse_review(data: Any) -> tuple[Verdict, PlanEdit | None]:
    """A review as a door sends it: ``approve``, ``reject`` or ``{"edit": {...}}``.

    Raises:
        PlanEditError: anything else, or an edit of the wrong shape, naming the field.
    """
    if data in ("approve", "reject"):
        return data, None
    if isinstance(data, dict) and set(data) == {"edit"}:
        try:
            return "edit", PlanEdit.model_validate(data["edit"], strict=True)
        except ValidationError as exc:
            raise _pydantic_error(exc, ["edit"]) from None
    raise PlanEditError("review_plan", "approve, reject, or edit: {remove, change, add}",
                        _shown(data))


def apply_plan_edit(
    subtasks: Sequence[SubtaskSpec],
    edit: PlanEdit,
    *,
    defaults: SubtaskSettings | None = None,
    tools: Collection[str] | None = None,
    planner: Literal["scripted", "model"] = "model",
) -> list[SubtaskSpec]:
    """The plan ``subtasks`` after ``edit``; a new subtask merges ``defaults`` and is
    planned by ``planner``; ``tools`` (when given) are the names a subtask may allow.

    Raises:
        PlanEditError: an id that is no subtask of the plan, a duplicate id, an unknown
            tool, an empty plan, or a value of the wrong type, naming its field.
    """
    ids = [s.id for s in subtasks]
    for i, sid in enumerate(edit.remove):
        if sid not in ids:
            raise PlanEditError(_path(["edit", "remove", i]), _ids_phrase(ids), _shown(sid))
    for sid in edit.change:
        if sid not in ids or sid in edit.remove:
            raise PlanEditError(_path(["edit", "change", sid]), _ids_phrase(ids, edit.remove),
                                _shown(sid))
    known = None if tools is None else set(tools)
    out: list[SubtaskSpec] = []
    for spec in subtasks:
        if spec.id in edit.remove:
            continue
        change = edit.change.get(spec.id)
        if change is not None:
            if change.tools is not None:
                _check_tools(["edit", "change", spec.id, "tools"], change.tools, known)
            update = change.model_dump(exclude_none=True)
            spec = spec.model_copy(update=update)
        out.append(spec)
    taken = {s.id for s in out}
    base = (defaults or SubtaskSettings()).model_dump()
    for i, raw in enumerate(edit.add):
        where: list[str | int] = ["edit", "add", i]
        for key in raw:
            if key not in _NEW_KEYS:
                raise PlanEditError(_path([*where, str(key)]),
                                    f"a known field (one of {', '.join(_NEW_KEYS)})")
        try:
            spec = SubtaskSpec.model_validate({**base, **raw, "planner": planner}, strict=True)
        except ValidationError as exc:
            raise _pydantic_error(exc, where) from None
        if spec.id in taken:
            raise PlanEditError(_path([*where, "id"]), "a subtask id not in the plan",
                                _shown(spec.id))
        _check_tools([*where, "tools"], spec.tools, known)
        taken.add(spec.id)
        out.append(spec)
    if not out:
        raise PlanEditError("edit", "a plan with at least one subtask", "every subtask removed")
    return out


def _ids_phrase(ids: Sequence[str], removed: Sequence[str] = ()) -> str:
    left = [i for i in ids if i not in removed]
    return f"the id of a subtask of the plan (one of {', '.join(left) or 'none'})"


def _check_tools(where: list[str | int], names: Sequence[str], known: set[str] | None) -> None:
    if known is None:
        return
    for i, name in enumerate(names):
        if name not in known:
            raise PlanEditError(_path([*where, i]),
                                f"a tool of the job (one of {', '.join(sorted(known))})",
                                _shown(name))
