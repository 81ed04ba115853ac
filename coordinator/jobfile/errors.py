"""Pydantic validation errors of an input file, said as a person fixing the file needs them.

A pydantic error carries a location such as
``("job", "subtasks", 0, "plan", 1, "CallStep", "args")`` and a message written for
programmers. This module walks the model's annotations alongside that location, so it
knows which parts are union tags (dropped), which model owns an unknown key (for a
"did you mean" suggestion) and which closed vocabulary a value missed, and turns each
error into an :class:`~shared.errors.InputFileError` with the file's line.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from coordinator.jobfile.yamlpos import ParsedYaml, format_path, show
from shared.errors import InputFileError
from subagents.simulated.spec import ResponseSpec, SimToolSpec, WhenRule
from subagents.spec import CallStep, EscalateStep, FinishStep

STEP_KINDS: dict[str, type[BaseModel]] = {
    "call": CallStep,
    "escalate": EscalateStep,
    "finish": FinishStep,
}
"""The key that makes a plan step each kind, and the model it is validated as."""

_KIND_OF_MODEL = {model.__name__: kind for kind, model in STEP_KINDS.items()}

_RESPONSE_KINDS = ("ok", "empty", "partial", "error")

_TYPE_PHRASES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "none_required": "null",
    "finite_number": "a finite number",
    "invalid_key": "a field name that is a string",
}

_PLAIN_TYPES: dict[Any, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
}


def step_kind(step: Any) -> str | None:
    """The kind of a raw plan step (call, escalate or finish), None unless exactly one."""
    if not isinstance(step, dict):
        return None
    present = [kind for kind in STEP_KINDS if kind in step]
    return present[0] if len(present) == 1 else None


def suggest(word: str, choices: Iterable[str]) -> str | None:
    """The closest of ``choices`` to a misspelt ``word``, if one is close enough."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


class Suggestions:
    """"Did you mean" against one set of names, for every misspelling in a file.

    Each word is compared with every name, so a file with as many misspellings as
    names (an ``expect`` block naming 20,000 subtasks wrongly) would cost their
    product; each distinct word is worked out once, and once ``budget`` comparisons
    are spent the rest go without a suggestion.
    """

    def __init__(self, choices: Iterable[str], budget: int = 200_000) -> None:
        self.choices = list(choices)
        self._budget = budget
        self._known: dict[str, str | None] = {}

    def __call__(self, word: str) -> str | None:
        if word not in self._known:
            if self._budget < len(self.choices):
                return None
            self._budget -= len(self.choices)
            self._known[word] = suggest(word, self.choices)
        return self._known[word]


def listing(names: Sequence[str], limit: int = 10) -> str:
    """Names for a message: all of them, or the first ``limit`` and how many more."""
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])}, … ({len(names) - limit:,} more)"


@dataclass
class _Resolved:
    """A pydantic location read against the model: the file's path and what it names."""

    path: list[str | int] = field(default_factory=list)
    annotation: Any = Any
    nullable: bool = False
    owner: type[BaseModel] | None = None
    tags: list[tuple[int, str]] = field(default_factory=list)
    is_key: bool = False


def translate(
    exc: ValidationError, root: type[BaseModel], data: Any, parsed: ParsedYaml, file: str
) -> list[InputFileError]:
    """Every error of ``exc`` (validating ``data`` as ``root``) as an InputFileError."""
    found: dict[tuple[str | int, ...], list[tuple[_Resolved, ErrorDetails]]] = {}
    for err in exc.errors(include_url=False):
        where = _resolve(root, err["loc"])
        if _superseded(err, where, data):
            continue
        found.setdefault(tuple(where.path), []).append((where, err))
    result: list[InputFileError] = []
    for path, group in found.items():
        line = parsed.line_of(path)
        name = format_path(path)
        untagged = [(w, e) for w, e in group if not _union_tagged(w)]
        tagged = [(w, e) for w, e in group if _union_tagged(w)]
        for where, err in untagged:
            expected, got = _describe_error(err, where, data)
            result.append(InputFileError(file, line, name, expected, got=got))
        if tagged:
            # Every member of a union failed: one error saying what any member takes.
            phrases = list(dict.fromkeys(_describe_error(e, w, data)[0] for w, e in tagged))
            got = _describe_error(tagged[0][1], tagged[0][0], data)[1]
            result.append(InputFileError(file, line, name, " or ".join(phrases), got=got))
    return result


def _superseded(err: ErrorDetails, where: _Resolved, data: Any) -> bool:
    """Whether an error is noise, or already reported better by the loader's own checks."""
    if err["type"] == "value_error" and "duplicate subtask id" in str(err.get("msg")):
        return True  # the loader points at the second id's own line
    for depth, tag in where.tags:
        if tag in _KIND_OF_MODEL:
            # A plan step is validated against every kind; only the kind its key names
            # speaks for it, and a step with no (or several) kinds is reported already.
            return step_kind(_get(data, where.path[:depth])) != _KIND_OF_MODEL[tag]
    return False


def _union_tagged(where: _Resolved) -> bool:
    """Whether an error comes from one member of a union of plain types (not a plan step)."""
    return any(tag not in _KIND_OF_MODEL for _, tag in where.tags)


def _describe_error(err: ErrorDetails, where: _Resolved, data: Any) -> tuple[str, str | None]:
    """What was expected and what the file has, for one pydantic error."""
    kind = err["type"]
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    got: str | None = show(err["input"])
    responses = where.owner in (WhenRule, SimToolSpec) and where.path[-1:] == ["responses"]
    if responses and kind in ("missing", "too_short"):
        got = None if kind == "missing" else got
        return "at least one response (ok, empty, partial or error)", got
    if kind == "extra_forbidden":
        return _unknown_field(where), None
    if kind == "missing":
        return f"{_phrase(where.annotation)} (this field is required)", None
    if kind == "literal_error":
        options = ", ".join(re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
        expected = f"one of {options}"
        if where.is_key:
            expected = f"a key that is {expected}"
        elif where.nullable and where.owner is None:
            # null as a mapping's value means something (a routing override of null
            # removes the route); an optional field's null only means "not set".
            expected += ", or null"
        return expected, got
    if kind == "value_error":
        if _model_at(where) is ResponseSpec:
            return _response_problem(_get(data, where.path), str(ctx.get("error", "")))
        return str(ctx.get("error", err["msg"])), got
    bound = _bound(kind, ctx, "an integer" if where.annotation is int else "a number")
    if bound is not None:
        return bound, got
    expected = _TYPE_PHRASES.get(kind, err["msg"])
    return (f"a key that is {expected}" if where.is_key else expected), got


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _bound(kind: str, ctx: dict[str, Any], noun: str) -> str | None:
    ctx = {key: _number(value) for key, value in ctx.items()}
    if kind == "greater_than":
        return f"{noun} > {ctx['gt']}"
    if kind == "greater_than_equal":
        return f"{noun} ≥ {ctx['ge']}"
    if kind == "less_than":
        return f"{noun} < {ctx['lt']}"
    if kind == "less_than_equal":
        return f"{noun} ≤ {ctx['le']}"
    if kind == "too_short":
        count = ctx.get("min_length", "1")
        return f"at least {count} item{'s' if count != '1' else ''}"
    if kind == "too_long":
        count = ctx.get("max_length", "0")
        return f"at most {count} item{'s' if count != '1' else ''}"
    if kind == "string_too_short":
        count = ctx.get("min_length", "1")
        return "a non-empty string" if count == "1" else f"a string of {count} characters or more"
    return None


def _response_problem(value: Any, message: str) -> tuple[str, str | None]:
    if isinstance(value, dict) and "exactly one" in message:
        present = [kind for kind in _RESPONSE_KINDS if kind in value]
        got = " and ".join(present) if present else "none of them"
        return "exactly one of ok, empty, partial, error", got
    if isinstance(value, dict) and value.get("empty") is False:
        return "empty: true (a response with data is ok: DATA)", "empty: false"
    return message, None


def _unknown_field(where: _Resolved) -> str:
    known = [name for name in (where.owner.model_fields if where.owner else ()) if name != "source"]
    key = where.path[-1] if where.path else ""
    close = suggest(str(key), known)
    if close is not None:
        return f"a known field (did you mean {close!r}?)"
    return f"a known field (one of {', '.join(known)})" if known else "a known field"


def _phrase(annotation: Any) -> str:
    """What a value of ``annotation`` looks like, in a few words."""
    annotation, _ = _unwrap(annotation)
    if annotation in _PLAIN_TYPES:
        return _PLAIN_TYPES[annotation]
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(annotation))
    members = _union_members(annotation)
    if members:
        return " or ".join(_phrase(m) for m in members)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a mapping"
    origin = get_origin(annotation)
    if origin is list:
        return "a list"
    if origin is dict:
        return "a mapping"
    return "a value"


def _model_at(where: _Resolved) -> type[BaseModel] | None:
    annotation, _ = _unwrap(where.annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _resolve(root: type[BaseModel], loc: Sequence[str | int]) -> _Resolved:
    """Walk the model's annotations along a pydantic location."""
    out = _Resolved(annotation=root)
    current: Any = root
    key_type: Any = Any
    for part in loc:
        if part == "[key]":
            out.is_key = True
            current = key_type
            continue
        current, _ = _unwrap(current)
        members = _union_members(current)
        if members is not None:
            # Pydantic tags each member's errors (`int`, `CallStep`, `literal[...]`).
            out.tags.append((len(out.path), str(part)))
            current = next((m for m in members if _tag_of(m) == part), Any)
            continue
        step: str | int = part
        if isinstance(current, type) and issubclass(current, BaseModel):
            out.owner = current
            step = str(part)  # a mapping key, even when YAML read it as a number
            info = current.model_fields.get(step)
            current = info.annotation if info is not None else Any
        else:
            args = get_args(current)
            if get_origin(current) is list and args:
                current = args[0]
            elif get_origin(current) is dict and args:
                step = str(part)
                key_type, current = args
            else:
                current = Any
            out.owner = None
        out.path.append(step)
    out.annotation, out.nullable = _unwrap(current)
    return out


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """Strip ``Annotated`` and ``| None``; say whether None was allowed."""
    nullable = False
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
            continue
        if get_origin(annotation) in (Union, types.UnionType):
            args = get_args(annotation)
            rest = [a for a in args if a is not type(None)]
            if len(rest) < len(args):
                nullable = True
                if len(rest) == 1:
                    annotation = rest[0]
                    continue
                annotation = Union[tuple(rest)]  # noqa: UP007 - built from a runtime tuple
        return annotation, nullable


def _union_members(annotation: Any) -> list[Any] | None:
    if get_origin(annotation) in (Union, types.UnionType):
        return [a for a in get_args(annotation) if a is not type(None)]
    return None


def _tag_of(member: Any) -> str:
    if isinstance(member, type):
        return member.__name__
    return repr(member)


def _get(data: Any, path: Iterable[str | int]) -> Any:
    """The raw value at ``path``, or None where the data has no such place."""
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data
