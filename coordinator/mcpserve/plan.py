"""The MCP client reviews the lead's plan (docs/design.md §17): asked with
``elicitation/create``, or through the ``review_plan`` tool with the plan in
``get_report``.

The form has ``verdict`` (``approve``, ``reject`` or ``edit``) and ``edit``, a text
field holding the edited subtasks as YAML or JSON: the plan as the message shows it
(a list of ``{id, query, tools, weight}``), with subtasks removed, changed or added.
:func:`edit_of` turns that list into the desk's edit (``remove``, ``change``, ``add``),
which is then checked as a job file's subtasks are (ids unique, tools the job's, a new
subtask taking the job's defaults); an error names the field, ``edit[1].weight``
(the item's place in the person's list), and the client is asked again with it, at most
:data:`~coordinator.mcpserve.person.ASKS` times in all. ``decline`` approves the plan (an
explicit no to reviewing it: the run should not wait on someone who will not answer);
``cancel`` decides nothing, the plan waits on for ``review_plan`` or the review's
timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

import anyio
import yaml
from mcp.server.session import ServerSession
from mcp.types import ElicitRequestedSchema

from coordinator.people import Desk, NotWaiting
from coordinator.plan_review import PlanEditError

__all__ = [
    "EDITABLE",
    "ask_plan",
    "edit_of",
    "plan_message",
    "plan_schema",
    "plan_text",
    "plan_yaml",
    "review_of",
]

log = logging.getLogger("fanout.mcp")

EDITABLE: Final = ("id", "query", "tools", "weight")
"""The keys of a subtask a person edits (the rest of a subtask is the job's)."""
_ASKS: Final = 3


def plan_yaml(subtasks: Sequence[dict[str, Any]]) -> str:
    """The plan as a person edits it: YAML, a list of ``{id, query, tools, weight}``."""
    items = [{k: s[k] for k in EDITABLE if k in s} for s in subtasks]
    return yaml.safe_dump(items, sort_keys=False, allow_unicode=True, width=100)


def plan_schema() -> ElicitRequestedSchema:
    """The form: ``verdict`` (approve, reject, edit) and ``edit`` (the edited subtasks)."""
    return {
        "type": "object",
        "properties": {
            "verdict": {
                "type": "string",
                "title": "Run this plan?",
                "enum": ["approve", "reject", "edit"],
            },
            "edit": {
                "type": "string",
                "title": "The edited subtasks, as YAML or JSON (for edit)",
                "description": "The plan's list of subtasks as the message shows it, with "
                               "subtasks removed, changed (query, tools, weight) or added "
                               "(id, query, tools, weight). Leave empty otherwise.",
            },
        },
        "required": ["verdict"],
    }


def plan_message(subtasks: Sequence[dict[str, Any]], run_id: str | None, note: str = "") -> str:
    """What the person reads: which run, and its plan as they would edit it."""
    return (f"{note}Run {run_id or '(starting)'}: the lead planned {len(subtasks)} "
            "subtask(s). Approve the plan, reject it (the run ends), or edit it:\n\n"
            f"{plan_yaml(subtasks)}")


def edit_of(subtasks: Sequence[dict[str, Any]], text: str | None) -> dict[str, Any]:
    """The desk's edit (``{"edit": {remove, change, add}}``) from the edited list
    ``text`` of the plan ``subtasks``.

    Raises:
        PlanEditError: no text, text that is not YAML or JSON, not a list of subtasks, an
            item without an id, a duplicate id or an unknown key; ``field`` names where
            (``edit``, ``edit[2].id``).
    """
    if text is None or not text.strip():
        raise PlanEditError("edit", "the edited subtasks, as YAML or JSON", "nothing")
    try:
        items = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise PlanEditError("edit", "YAML or JSON", f"text that does not parse{where}") from None
    if isinstance(items, dict) and set(items) == {"subtasks"}:
        items = items["subtasks"]
    if not isinstance(items, list):
        raise PlanEditError("edit", "a list of subtasks", type(items).__name__)
    planned = {str(s["id"]): s for s in subtasks}
    change: dict[str, dict[str, Any]] = {}
    add: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PlanEditError(f"edit[{i}]", "a subtask: {id, query, tools, weight}",
                                type(item).__name__)
        for key in item:
            if key not in EDITABLE:
                raise PlanEditError(f"edit[{i}].{key}",
                                    f"a key a person edits (one of {', '.join(EDITABLE)})")
        sid = item.get("id")
        if not isinstance(sid, str) or not sid:
            raise PlanEditError(f"edit[{i}].id", "a subtask id", repr(sid))
        if sid in seen:
            raise PlanEditError(f"edit[{i}].id", "an id not already in the list", repr(sid))
        seen.add(sid)
        old = planned.get(sid)
        if old is None:
            add.append(dict(item))
            continue
        changed = {k: v for k, v in item.items() if k != "id" and v != old.get(k)}
        if changed:
            change[sid] = changed
    remove = [sid for sid in planned if sid not in seen]
    return {"edit": {"remove": remove, "change": change, "add": add}}


def review_of(subtasks: Sequence[dict[str, Any]], content: dict[str, Any] | None) -> Any:
    """The review an accepted form makes: ``approve``, ``reject`` or an edit.

    Raises:
        PlanEditError: no verdict, or an edit :func:`edit_of` refuses.
    """
    content = content or {}
    verdict = content.get("verdict")
    if verdict in ("approve", "reject"):
        return verdict
    if verdict == "edit":
        return edit_of(subtasks, content.get("edit"))
    raise PlanEditError("verdict", "approve, reject or edit",
                        repr(verdict) if verdict is not None else None)


def _edit_field(error: PlanEditError, subtasks: Sequence[dict[str, Any]],
                text: str | None) -> PlanEditError:
    """``error`` from checking an edit (``edit.change.news.weight``, ``edit.add[0].id``),
    its field said as the item of the person's list (``edit[1].weight``)."""
    try:
        items = yaml.safe_load(text or "")
    except yaml.YAMLError:
        return error
    if isinstance(items, dict):
        items = items.get("subtasks")
    if not isinstance(items, list):
        return error
    ids = [item.get("id") if isinstance(item, dict) else None for item in items]
    parts = (error.field or "").split(".")
    index: int | None = None
    if parts[:2] == ["edit", "change"] and len(parts) > 2 and parts[2] in ids:
        index, rest = ids.index(parts[2]), parts[3:]
    elif len(parts) > 1 and parts[0] == "edit" and parts[1].startswith("add["):
        planned = {str(s["id"]) for s in subtasks}
        new = [i for i, sid in enumerate(ids) if sid not in planned]
        nth = int(parts[1][4:-1])
        if nth < len(new):
            index, rest = new[nth], parts[2:]
    if index is None:
        return error
    return PlanEditError(".".join([f"edit[{index}]", *rest]), error.expected, error.got)


async def ask_plan(desk: Desk, session: ServerSession, related: Any, by: str,
                   run_id: str | None, scope: anyio.CancelScope) -> None:
    """Ask the client to review the plan waiting on ``desk`` (until it is reviewed)."""
    note = ""
    with scope:
        for _ in range(_ASKS):
            plan = desk.pending()["plan"]
            if plan is None:
                return
            subtasks: list[dict[str, Any]] = plan["subtasks"]
            try:
                result = await session.elicit_form(
                    plan_message(subtasks, run_id, note), plan_schema(),
                    related_request_id=related)
            except Exception as exc:  # the client's error, or no channel back: it waits on
                log.info("could not ask for a review of the plan: %s", exc)
                return
            if result.action == "cancel":
                return
            text = (result.content or {}).get("edit")
            try:
                # decline: an explicit no to reviewing; the plan runs as the lead made it.
                review = (review_of(subtasks, result.content) if result.action == "accept"
                          else "approve")
                desk.review(review, by=by)
                return
            except NotWaiting:
                return  # reviewed meanwhile
            except PlanEditError as exc:
                said = _edit_field(exc, subtasks, text if isinstance(text, str) else None)
                note = f"That could not be done ({said}). Please review again.\n\n"


def plan_text(run_id: str, plan: dict[str, Any] | None) -> str:
    """The plan that waits on a run, in Markdown, with the ``review_plan`` call."""
    if plan is None:
        return ""
    return "\n".join([
        "## The lead's plan waits for review", "", "```yaml",
        plan_yaml(plan["subtasks"]).rstrip(), "```", "",
        f"Review with review_plan(run_id=\"{run_id}\", verdict=\"approve\") (or "
        "verdict=\"reject\", or verdict=\"edit\" with edit= the list above edited, "
        "as YAML or JSON).",
    ])
