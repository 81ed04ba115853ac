"""``--json`` output written as it is encoded: byte for byte ``json.dumps(indent=2)``.

The standard library indents in pure Python, a generator per container level that
every piece of text passes through on its way out, and ``json.dumps`` then joins all
of it into one string. A report of 20,000 subtasks is some 20 MB of text, and that
string was the third copy of the report held at once (after the models and their
wire dict). Here containers are walked by one recursive function that appends to a
short buffer, flushed to the stream every few thousand pieces; a container of many
scalars only (a report's rows, its lists of ids) is written in one call to a
``json.JSONEncoder`` without ``indent`` (so the standard library runs its C encoder),
told to separate items with the newline and indent of its depth — the very text the
pure-Python indenter would have produced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TextIO

_FLUSH_AT = 4096  # pieces of text (keys, values, punctuation) held before writing
_INDENT = 2
# Values the C encoder writes exactly as the indenter would (subclasses go the long way).
_SCALARS = frozenset({str, int, float, bool, type(None)})
# A container of scalars with at least this many items is written by one encoder call;
# a smaller one costs less walked here (each call of the encoder's public method builds
# its C encoder anew).
_FLAT_AT = 8

# What json.dumps(ensure_ascii=False) escapes in a string: the quote, the backslash and
# the control characters, five of them by their short names.
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')
_ESCAPES = {code: f"\\u{code:04x}" for code in range(0x20)} | {
    ord('"'): '\\"', ord("\\"): "\\\\", ord("\b"): "\\b", ord("\f"): "\\f",
    ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t",
}


def _string(text: str) -> str:
    """A string as ``json.dumps(text, ensure_ascii=False)`` writes it."""
    if _NEEDS_ESCAPE.search(text) is None:
        return '"' + text + '"'
    return '"' + text.translate(_ESCAPES) + '"'


def _float(value: float) -> str:
    # json.JSONEncoder(allow_nan=True): non-finite floats are JavaScript's names.
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == -float("inf"):
        return "-Infinity"
    return float.__repr__(value)


def _key(key: Any) -> str:
    """A mapping key as ``json.dumps`` writes it (skipkeys=False)."""
    if isinstance(key, str):
        return _string(key)
    if key is True:
        return '"true"'
    if key is False:
        return '"false"'
    if key is None:
        return '"null"'
    if isinstance(key, float):
        return f'"{_float(key)}"'
    if isinstance(key, int):
        return f'"{int.__repr__(key)}"'
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


class _Writer:
    """Appends the JSON text of one value to a buffer that is flushed as it fills."""

    def __init__(self, write: Callable[[str], object]) -> None:
        self._write = write
        # One list for the whole walk, emptied in place: every level appends to it.
        self._parts: list[str] = []
        self._newlines = ["\n" + " " * (_INDENT * depth) for depth in range(32)]
        self._flat: list[Callable[[Any], str]] = []

    def _newline(self, depth: int) -> str:
        while depth >= len(self._newlines):
            self._newlines.append("\n" + " " * (_INDENT * len(self._newlines)))
        return self._newlines[depth]

    def _flat_encoder(self, depth: int) -> Callable[[Any], str]:
        """The text of a flat container at ``depth``, its items on lines of their own."""
        while depth >= len(self._flat):
            separator = "," + self._newline(len(self._flat) + 1)
            encoder = json.JSONEncoder(
                ensure_ascii=False, check_circular=False, separators=(separator, ": ")
            )
            self._flat.append(encoder.encode)
        return self._flat[depth]

    def flush(self) -> None:
        if self._parts:
            self._write("".join(self._parts))
            self._parts.clear()

    def value(self, value: Any, depth: int) -> None:
        parts = self._parts
        if isinstance(value, str):
            parts.append(_string(value))
        elif value is None:
            parts.append("null")
        elif value is True:
            parts.append("true")
        elif value is False:
            parts.append("false")
        elif isinstance(value, int):
            parts.append(int.__repr__(value))
        elif isinstance(value, float):
            parts.append(_float(value))
        elif isinstance(value, dict):
            self._mapping(value, depth)
        elif isinstance(value, list | tuple):
            self._sequence(value, depth)
        else:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    def _mapping(self, value: dict[Any, Any], depth: int) -> None:
        parts = self._parts
        if not value:
            parts.append("{}")
            return
        inner = self._newline(depth + 1)
        if len(value) >= _FLAT_AT and set(map(type, value.values())) <= _SCALARS:
            text = self._flat_encoder(depth)(value)
            parts.append("{" + inner + text[1:-1] + self._newline(depth) + "}")
            return
        first = True
        for key, item in value.items():
            parts.append(("{" if first else ",") + inner + _key(key) + ": ")
            first = False
            self.value(item, depth + 1)
        parts.append(self._newline(depth) + "}")
        if len(parts) >= _FLUSH_AT:
            self.flush()

    def _sequence(self, value: list[Any] | tuple[Any, ...], depth: int) -> None:
        parts = self._parts
        if not value:
            parts.append("[]")
            return
        inner = self._newline(depth + 1)
        if len(value) >= _FLAT_AT and set(map(type, value)) <= _SCALARS:
            text = self._flat_encoder(depth)(value)
            parts.append("[" + inner + text[1:-1] + self._newline(depth) + "]")
            return
        first = True
        for item in value:
            parts.append(("[" if first else ",") + inner)
            first = False
            self.value(item, depth + 1)
        parts.append(self._newline(depth) + "]")
        if len(parts) >= _FLUSH_AT:
            self.flush()


def write_json(value: Any, stream: TextIO) -> None:
    """Write ``value`` and a newline to ``stream`` as ``json.dumps(value, indent=2,
    ensure_ascii=False) + "\\n"`` would, without building the whole text first.

    Raises:
        TypeError: a value JSON has no form for (as ``json.dumps`` raises).
    """
    writer = _Writer(stream.write)
    writer.value(value, 0)
    writer._parts.append("\n")
    writer.flush()


def dumps(value: Any) -> str:
    """The same text as one string (for small documents and tests)."""
    pieces: list[str] = []
    write_json(value, _Collect(pieces))  # type: ignore[arg-type]
    return "".join(pieces)


class _Collect:
    def __init__(self, pieces: list[str]) -> None:
        self.write = pieces.append
