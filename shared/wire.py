"""Compact JSON for what enters a subagent's context, fast where the data is plain.

A context holds every envelope as compact JSON with the wire names, and its token count
depends on every byte, so the text must be exactly what ``json.dumps`` makes of
``model_dump(mode="json", by_alias=True)``. For the common envelope (plain JSON values
of the declared types) that dump changes nothing, and reading the fields directly is
several times cheaper than pydantic's serializer; anything else — a tuple, a
non-string key, a non-finite float, an int in a float field — takes the serializer,
so the text never differs.
"""

from __future__ import annotations

import json
import math
import types
from typing import Any, Final, Literal, Union, get_args, get_origin

from pydantic import BaseModel

COMPACT_JSON: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``, built once."""

_MAX_DEPTH = 64


def is_plain(value: Any, depth: int = 0) -> bool:
    """True when pydantic's JSON-mode dump of ``value`` (typed ``Any``) is ``value`` itself.

    That holds for None, bools, ints, strings and finite floats of exactly those types,
    and lists and string-keyed dicts of them.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth >= _MAX_DEPTH:
        return False
    if kind is list:
        for item in value:  # noqa: SIM110 - a loop is faster than all() on this hot path
            if not is_plain(item, depth + 1):
                return False
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not is_plain(item, depth + 1):
                return False
        return True
    return False


FieldPlan = tuple[tuple[str, str, tuple[type, ...] | None], ...]
"""(attribute, wire name, the exact types that dump unchanged; None: any plain value)."""

_SCALARS: Final[dict[Any, tuple[type, ...]]] = {
    bool: (bool,),
    int: (int,),
    float: (float,),
    str: (str,),
    type(None): (type(None),),
    Any: (),  # marker: any plain value
}


def _exact_types(annotation: Any) -> tuple[type, ...] | None:
    """The exact value types a field of ``annotation`` dumps unchanged; () for Any."""
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    origin = get_origin(annotation)
    if origin is Literal:
        values = get_args(annotation)
        if all(type(v) is str for v in values):
            return (str,)
        raise TypeError(f"no fast path for {annotation!r}")
    if origin is Union or origin is types.UnionType:
        out: list[type] = []
        for arg in get_args(annotation):
            sub = _exact_types(arg)
            if sub == ():
                return ()
            assert sub is not None
            out.extend(t for t in sub if t not in out)
        return tuple(out)
    raise TypeError(f"no fast path for {annotation!r}")


def field_plan(model: type[BaseModel]) -> FieldPlan | None:
    """How to read ``model``'s fields for the fast path, or None if some field has no plan."""
    plan: list[tuple[str, str, tuple[type, ...] | None]] = []
    for name, info in model.model_fields.items():
        try:
            exact = _exact_types(info.annotation)
        except TypeError:
            return None
        plan.append((name, info.alias or name, exact or None))
    return tuple(plan)


def plain_field(value: Any, exact: tuple[type, ...] | None) -> bool:
    """True when a field holding ``value`` dumps to ``value`` itself."""
    if exact is None:
        return is_plain(value)
    kind = type(value)
    if kind not in exact:
        return False
    return kind is not float or math.isfinite(value)
