"""Checks of a file's ``model`` block and of who plans each subtask (docs/design.md §7).

A subtask without ``plan`` is planned by the job's model; without a ``model`` block that
is a load error, as is a job without subtasks and no model to decompose its query. A key
is read from the environment only: a file that holds one inline is refused, wherever it
is written, so it never reaches the store, a trace, a report or a recording.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from coordinator.jobfile.yamlpos import FieldPath, ParsedYaml, format_path
from shared.errors import InputFileError
from subagents.result import LEAD

# Field names that would hold a secret, not name one.
_KEY_FIELDS = frozenset(
    {"api_key", "apikey", "key", "token", "secret", "password", "authorization", "auth"}
)
# Strings shaped like a provider's key (Anthropic, OpenAI, and bearer headers).
_KEY_SHAPES = re.compile(
    r"^(?:sk-ant-[A-Za-z0-9_-]{8,}|sk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}|Bearer\s+\S{8,})$"
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _strings(root: Any) -> Iterator[tuple[FieldPath, str]]:
    """Every string in the data with its path; iterative, and each node visited once.

    YAML aliases can make a node appear many times, even inside itself: the walk
    follows each container once, so an alias bomb costs its size, not its expansion.
    """
    seen: set[int] = set()
    stack: list[tuple[FieldPath, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            yield path, node
        elif isinstance(node, dict | list):
            if id(node) in seen:
                continue
            seen.add(id(node))
            items = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(
                ((*path, k if isinstance(k, int) and isinstance(node, list) else str(k)), v)
                for k, v in items
            )


def check_model_block(data: dict[Any, Any], parsed: ParsedYaml, file: str) -> list[InputFileError]:
    """Every problem with the file's model block and its subtasks' planners."""
    problems: list[InputFileError] = []

    def add(path: FieldPath, expected: str, got: str | None = None) -> None:
        line = parsed.line_of(path)
        problems.append(InputFileError(file, line, format_path(path), expected, got=got))

    for path, text in _strings(data):
        if _KEY_SHAPES.match(text.strip()):
            add(
                path,
                "no secret in the file: put the key in an environment variable and name it "
                "with model.api_key_env",
                got="what looks like an API key (not shown)",
            )
    model = data.get("model")
    if isinstance(model, dict):
        for key in model:
            if str(key).lower().replace("-", "_") in _KEY_FIELDS:
                add(
                    ("model", str(key)),
                    "no key in the file: model.api_key_env names the environment variable "
                    "that holds it",
                    got=f"{key} (value not shown)",
                )
        env = model.get("api_key_env")
        if isinstance(env, str) and not _ENV_NAME.match(env):
            add(
                ("model", "api_key_env"),
                "the NAME of an environment variable (letters, digits, _)",
                got="a value that is not a variable name (not shown)",
            )
    job = data.get("job")
    subtasks = job.get("subtasks") if isinstance(job, dict) else None
    has_model = model is not None
    if isinstance(job, dict) and not has_model and (subtasks is None or subtasks == []):
        add(
            ("job", "subtasks") if subtasks is not None else ("job",),
            "at least one subtask (or a model block, whose lead agent decomposes the query)",
            got="no subtasks",
        )
    ids: set[str] = set()
    if isinstance(subtasks, list):
        for index, sub in enumerate(subtasks):
            if not isinstance(sub, dict):
                continue
            if isinstance(sub.get("id"), str):
                ids.add(sub["id"])
            if "plan" not in sub and "planner" not in sub and not has_model:
                add(
                    ("job", "subtasks", index),
                    "a plan, or a model block at the top level to plan this subtask",
                    got="a subtask with neither",
                )
    if isinstance(model, dict) and isinstance(model.get("turns"), dict) and ids:
        ids |= followup_ids(model)
        for key in model["turns"]:
            if str(key) != LEAD and str(key) not in ids:
                shown = sorted(ids)[:10]
                more = f", … {len(ids) - 10} more" if len(ids) > 10 else ""
                add(
                    ("model", "turns", str(key)),
                    f"a subtask id or {LEAD!r} (one of {', '.join(shown)}{more}, {LEAD})",
                    got=repr(key),
                )
    return problems


def followup_ids(model: Any) -> set[str]:
    """The ids of the follow-ups a scripted lead plans (its ``followups`` turns,
    docs/design.md §11):
    they run as subtasks too, so their turns and expectations name them."""
    turns = model.get("turns") if isinstance(model, dict) else None
    lead = turns.get(LEAD) if isinstance(turns, dict) else None
    out: set[str] = set()
    for turn in lead if isinstance(lead, list) else ():
        items = turn.get("followups") if isinstance(turn, dict) else None
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                out.add(item["id"])
    return out


def without_keys(data: dict[Any, Any]) -> dict[Any, Any]:
    """The file's data with inline key fields dropped (already reported, never kept)."""
    model = data.get("model")
    if not isinstance(model, dict):
        return data
    kept = {k: v for k, v in model.items() if str(k).lower().replace("-", "_") not in _KEY_FIELDS}
    return {**data, "model": kept}


def mark_planners(job: Any, has_model: bool) -> Any:
    """The job with each subtask's ``planner``: its plan, or (without one) the model."""
    if not has_model or not isinstance(job, dict) or not isinstance(job.get("subtasks"), list):
        return job
    subtasks = [
        {**sub, "planner": "model"}
        if isinstance(sub, dict) and "plan" not in sub and "planner" not in sub
        else sub
        for sub in job["subtasks"]
    ]
    return {**job, "subtasks": subtasks}
