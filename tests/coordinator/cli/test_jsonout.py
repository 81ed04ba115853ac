"""The streamed ``--json`` writer gives exactly the text ``json.dumps(indent=2)`` gives."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.cli import jsonout
from coordinator.cli.jsonout import write_json


def _reference(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


CASES = {
    "empty containers": {"a": {}, "b": [], "c": [{}, []]},
    "scalars": [None, True, False, 0, -1, 2**70, 0.1, -0.0, 1e-7, 1e16, 1.5e300],
    "non-finite": [float("inf"), float("-inf")],
    "keys of every kind": {1: "int", 2.5: "float", False: "bool", None: "null", "s": "str"},
    "escapes": {"q\"uote\\": "new\nline\ttab\u0001\u2028é日本"},
    "tuples": {"t": (1, (2, 3))},
    "deep": {"a": [{"b": [{"c": [[[]]]}]}]},
    "top-level scalar": "just a string",
    # Containers of this many scalars go to the standard library's encoder in one call.
    "many scalars": [None, True, 0, 2**70, -0.0, 1e16, float("inf"), "é\n\"", "日本", 7],
    "many keys": {1: 1, 2.5: 2, False: 3, None: 4, "a\t": "\u0001", "b": 0.1, "c": -1,
                  "d": "x" * 100, "e": [], "f": [1] * 9},
}


@pytest.mark.parametrize("value", [pytest.param(v, id=k) for k, v in CASES.items()])
def test_same_text_as_json_dumps(value: Any) -> None:
    """Every kind of value is written as json.dumps writes it, newline included."""
    assert jsonout.dumps(value) == _reference(value)


def test_nan_is_written_as_javascript_names_it() -> None:
    """NaN is NaN, as json.dumps (allow_nan) writes it."""
    assert jsonout.dumps([float("nan")]) == _reference([float("nan")])


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4),
    max_leaves=30,
)


@given(_json)
def test_any_json_value_matches(value: Any) -> None:
    """Any JSON-shaped value (hypothesis) gives the reference text."""
    assert jsonout.dumps(value) == _reference(value)


def test_large_output_is_written_in_pieces() -> None:
    """A large document reaches the stream in several writes, never as one string."""
    writes: list[str] = []

    class Stream(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

    doc = {"rows": [{"id": f"s{i}", "n": i, "xs": [i, i + 1]} for i in range(5_000)]}
    write_json(doc, Stream())
    text = "".join(writes)
    assert text == _reference(doc)
    assert max(len(piece) for piece in writes) < len(text) / 4


def test_what_json_cannot_hold_is_refused() -> None:
    """A value without a JSON form raises TypeError, as json.dumps does."""
    with pytest.raises(TypeError):
        jsonout.dumps({"x": object()})
    with pytest.raises(TypeError):
        jsonout.dumps({(1, 2): "tuple key"})
