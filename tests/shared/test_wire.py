"""The fast compact-JSON path gives exactly the text pydantic's dump would give."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from shared import ToolError, ToolResult
from shared.wire import COMPACT_JSON, is_plain


def _reference(result: ToolResult) -> str:
    """The envelope's context text as it was defined: json.dumps of the JSON-mode dump."""
    return json.dumps(result.to_wire(), separators=(",", ":"), ensure_ascii=False)


def _ok(data: Any, **extra: Any) -> ToolResult:
    return ToolResult.success("search", data, trace_id="tr_0123456789ab", **extra)


def _failed(**details: Any) -> ToolResult:
    error = ToolError.of("business", "limit_exceeded", "over the limit", **details)
    return ToolResult.failure("orders", error, trace_id="tr_0123456789ab", attempts=2)


PLAIN: list[Any] = [
    None,
    "",
    "naïve ünïcödé – “quotes” 😀",
    0,
    -(2**70),
    True,
    1.5,
    1e-05,
    [],
    {},
    {"results": ["a", "b"], "total": 2, "nested": {"deep": [1, 2.5, None, False]}},
    [{"k": "v"}, [[["x"]]]],
]

NOT_PLAIN: list[Any] = [
    (1, 2),
    {1: "int key"},
    {"x": float("inf")},
    [float("nan")],
    {True: "bool key"},
    {"s": {1, 2}},
    b"bytes",
]


@pytest.mark.parametrize("data", [pytest.param(d, id=repr(d)[:30]) for d in PLAIN])
def test_plain_data_takes_the_fast_path_with_the_same_text(data: Any) -> None:
    """Plain JSON data is read straight from the fields, and the text is unchanged."""
    result = _ok(data)
    assert is_plain(data)
    assert result._plain_wire() is not None
    assert result.to_json() == _reference(result)


@pytest.mark.parametrize("data", [pytest.param(d, id=repr(d)[:30]) for d in NOT_PLAIN])
def test_data_pydantic_would_convert_takes_the_serializer(data: Any) -> None:
    """Tuples, non-string keys, non-finite floats and the like go through pydantic."""
    result = _ok(data)
    assert not is_plain(data)
    assert result._plain_wire() is None
    assert result.to_json() == _reference(result)


@pytest.mark.parametrize(
    ("base", "update"),
    [
        pytest.param(_ok({"x": 1}), {"elapsed_s": 2}, id="int-in-float-field"),
        pytest.param(_ok({"x": 1}), {"attempts": True}, id="bool-in-int-field"),
        pytest.param(_ok({"x": 1}), {"elapsed_s": math.inf}, id="infinite-elapsed"),
        pytest.param(_failed(), {"retry_after_s": math.nan}, id="nan-retry-after"),
        pytest.param(_failed(), {"retry_after_s": 3}, id="int-retry-after"),
    ],
)
def test_unvalidated_field_values_take_the_serializer(
    base: ToolResult, update: dict[str, Any]
) -> None:
    """A value pydantic's dump would coerce (set without validation) is not read directly."""
    result = base.model_copy(update=update)
    assert result._plain_wire() is None
    assert result.to_json() == _reference(result)


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(_failed(), id="plain-failure"),
        pytest.param(_failed(rule="max_qty", limit=10, requested=12), id="business-details"),
        pytest.param(_failed(limit=(1, 2)), id="tuple-limit"),
        pytest.param(_failed(limit=math.nan), id="nan-limit-is-dropped"),
        pytest.param(_failed(retry_after_s=5.0, field="qty", expected="≤ 10"), id="details"),
        pytest.param(_ok({"x": 1}, idempotency_key="sub/1", changed_state=True), id="key"),
        pytest.param(_ok(None, changed_state="unknown", empty=True), id="unknown-state"),
        pytest.param(
            _ok([1]).model_copy(update={"attempts": 3, "elapsed_s": 1.25}), id="copied"
        ),
    ],
)
def test_envelopes_of_every_shape_keep_their_text(result: ToolResult) -> None:
    """Successes and failures, with or without details, give the reference text."""
    assert result.to_json() == _reference(result)


def test_compact_encoder_is_json_dumps() -> None:
    """The shared encoder writes what json.dumps writes with the compact separators."""
    value = {"a": [1, 2.0, None, "é"], "b": {"c": True}}
    assert COMPACT_JSON.encode(value) == json.dumps(
        value, separators=(",", ":"), ensure_ascii=False
    )
