"""Checks of a scenario's ``people:`` block beyond its models
(:mod:`coordinator.scripted_person`; docs/design.md §17).

The models validate each step's shape; :func:`check_people` checks what they cannot
see (the subtasks a step names, a plan review in a job that asks for none, ``expect``'s
``decisions`` keys), each problem with its file, line and field.
"""

from __future__ import annotations

from typing import Any

from coordinator.jobfile.errors import Suggestions, listing
from coordinator.jobfile.yamlpos import FieldPath, ParsedYaml, format_path, show
from shared.errors import InputFileError
from shared.options import parse_escalation_id

__all__ = ["check_people"]


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
