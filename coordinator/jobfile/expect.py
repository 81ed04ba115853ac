"""Checking a scenario's ``expect`` block against a report: a subset match."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

FLOAT_TOLERANCE = 1e-9


class Mismatch(BaseModel):
    """One expectation that the report does not meet."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    expected: Any
    actual: Any


def _equal(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return math.isclose(expected, actual, rel_tol=0, abs_tol=FLOAT_TOLERANCE)
    return bool(expected == actual)


def _match(path: str, expected: Any, actual: Any, out: list[Mismatch]) -> None:
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            out.append(Mismatch(path=path, expected=expected, actual=actual))
            return
        for key, value in expected.items():
            sub = f"{path}.{key}"
            if key not in actual:
                out.append(Mismatch(path=sub, expected=value, actual="<absent>"))
            else:
                _match(sub, value, actual[key], out)
        return
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _match(f"{path}[{i}]", e, a, out)
        return
    if not _equal(expected, actual):
        out.append(Mismatch(path=path, expected=expected, actual=actual))


def check_expect(expect: Mapping[str, Any], report: Mapping[str, Any]) -> list[Mismatch]:
    """Every way ``report`` (wire JSON) differs from ``expect`` (only listed keys count).

    ``subtasks`` and ``gaps`` are keyed by subtask id; ``escalations`` is a count;
    ``decisions`` a count, or keyed by escalation id (``patents:1``) or subtask id (its
    first decision).
    """
    out: list[Mismatch] = []
    for key, value in expect.items():
        if value is None:
            continue
        if key == "subtasks":
            by_id = {s["id"]: s for s in report.get("subtasks", [])}
            for sid, fields in value.items():
                _match(f"subtasks.{sid}", fields, by_id.get(sid, "<no such subtask>"), out)
        elif key == "gaps":
            by_id = {g["subtask_id"]: g for g in report.get("gaps", [])}
            for sid, fields in value.items():
                _match(f"gaps.{sid}", fields, by_id.get(sid, "<no gap>"), out)
        elif key == "decisions":
            _decisions(value, report.get("decisions", []), out)
        elif key == "escalations" and isinstance(value, int):
            actual = len(report.get("escalations", []))
            if actual != value:
                out.append(Mismatch(path="escalations", expected=value, actual=actual))
        else:
            _match(key, value, report.get(key, "<absent>"), out)
    return out


def _decisions(expected: Any, actual: list[Mapping[str, Any]], out: list[Mismatch]) -> None:
    if isinstance(expected, int) and not isinstance(expected, bool):
        if len(actual) != expected:
            out.append(Mismatch(path="decisions", expected=expected, actual=len(actual)))
        return
    if not isinstance(expected, Mapping):
        _match("decisions", expected, actual, out)
        return
    for key, fields in expected.items():
        found = next((d for d in actual if d.get("escalation") == key), None)
        if found is None:
            found = next((d for d in actual if d.get("subtask_id") == key), None)
        _match(f"decisions.{key}", fields, found if found is not None else "<no decision>", out)
