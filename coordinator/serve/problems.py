"""What a 422 says: one problem per field, worded like ``fanout run``'s, each value shown
short.

A problem names the request it is about (``POST /runs``, ``POST /ask``: the "file" of an
:class:`~shared.errors.InputFileError`), the field, what was expected as words a person
reads after "expected", and what came. What came is never echoed whole: a value is shown
quoted and escaped, at most :data:`SHOWN_CHARS` characters of it, then an ellipsis and its
length (a 5 MB field once came back twice in a 10 MB answer).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from coordinator.serve.schemas import InputProblem
from shared.errors import InputFileError

SUBMITTED: Final = "POST /runs"  # the "file" a submitted job's problems and its run name
ASKED: Final = "POST /ask"  # likewise for an ask
SHOWN_CHARS: Final = 80  # the most of a value a problem echoes
# What came, as a problem shows it: a value quote() made fits; a longer text is cut.
_GOT_CHARS: Final = 2 * SHOWN_CHARS
_EXPECTED_CHARS: Final = 600  # words of ours, which may quote a value (a tool's name)


def _escaped(text: str, limit: int, quote: str = "") -> tuple[str, bool]:
    """``text`` with its control characters (and ``quote`` and backslashes, if given) escaped,
    cut before the escaped text would pass ``limit`` characters; whether it was cut."""
    out: list[str] = []
    size = 0
    for char in text:
        if char.isprintable() and char != quote and not (quote and char == "\\"):
            piece = char
        elif quote and char in (quote, "\\"):
            piece = "\\" + char
        else:
            piece = repr(char)[1:-1]
        size += len(piece)
        if size > limit:
            return "".join(out), True
        out.append(piece)
    return "".join(out), False


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` with its control characters escaped, cut after ``limit`` characters with
    an ellipsis and the whole length."""
    shown, cut = _escaped(text, limit)
    return f"{shown}… ({len(text):,} characters)" if cut else shown


def quote(value: object) -> str:
    """A value a request sent, as a problem shows it: a string quoted and escaped (bytes
    read as UTF-8 text), anything else as JSON; at most :data:`SHOWN_CHARS` of it, then
    an ellipsis and its whole length."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        shown, cut = _escaped(value, SHOWN_CHARS, quote="'")
        return f"'{shown}…' ({len(value):,} characters)" if cut else f"'{shown}'"
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return clip(text)


def problem(
    field: str, expected: str, got: str | None = None, *, line: int | None = None,
    file: str = SUBMITTED,
) -> InputProblem:
    """One problem, worded like an InputFileError (``file``: the request it is about);
    the field and what came are clipped (see :func:`clip`)."""
    field = clip(field)
    expected = clip(expected, _EXPECTED_CHARS)
    got = None if got is None else clip(got, _GOT_CHARS)
    text = InputFileError(file, line, field, expected, got=got).describe()
    return InputProblem(line=line, field=field, expected=expected, got=got, message=text)


# Pydantic's messages ("Input should be a valid string") read badly after "expected": the
# usual kinds in words of ours, the rest with pydantic's own words past "Input should be".
_EXPECTED: Final[Mapping[str, str]] = {
    "missing": "a value: the field is required",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "list_type": "a list",
    "extra_forbidden": "no such field",
    "string_too_short": "at least {min_length} character(s)",
    "string_too_long": "at most {max_length} characters",
    "greater_than": "a number greater than {gt}",
    "greater_than_equal": "a number of at least {ge}",
    "less_than": "a number less than {lt}",
    "less_than_equal": "a number of at most {le}",
    "literal_error": "one of {expected}",
    "enum": "one of {expected}",
    "string_pattern_mismatch": "text matching {pattern}",
}


_OBJECT_TYPES: Final = frozenset({"dict_type", "model_type", "model_attributes_type"})


def _expected(error: Mapping[str, Any]) -> str:
    """What a pydantic error expected, as words to read after "expected"."""
    words = _EXPECTED.get(str(error.get("type")))
    if words is not None:
        try:
            return words.format(**(error.get("ctx") or {}))
        except (KeyError, IndexError, ValueError):
            pass
    message = str(error.get("msg") or "a valid value")
    for lead in ("Input should be ", "Value error, "):
        if message.startswith(lead):
            return message.removeprefix(lead)
    return f"a valid value ({message[:1].lower()}{message[1:]})"


def _field(loc: Iterable[Any]) -> str:
    """A location as a field: a body's own fields by name (as an ask's problems name
    them), a parameter with where it is (``query.speed``), the body itself ``<body>``."""
    parts = [str(p) for p in loc]
    if parts[:1] == ["body"]:
        parts = parts[1:]
        return ".".join(parts) if parts else "<body>"
    return ".".join(parts) or "<request>"


def request_problems(
    errors: Iterable[Mapping[str, Any]], file: str, body_fields: Sequence[str] = ()
) -> list[InputProblem]:
    """FastAPI's validation errors of a request (its body, query or headers) as problems
    of ``file``, each reading as a sentence and showing what came short; a field the body
    may not have names those it may (``body_fields``)."""
    out = []
    for error in errors:
        kind = error.get("type")
        sent = error.get("input")
        # A missing field's "input" is the whole object it is missing from: nothing of it
        # is the field's value.
        got = None if kind == "missing" or sent is None else quote(sent)
        expected = _expected(error)
        field = _field(error.get("loc", ()))
        if kind == "extra_forbidden" and body_fields:
            expected = f"no such field: the fields are {', '.join(body_fields)}"
        elif field == "<body>" and kind in _OBJECT_TYPES:
            expected = "a JSON object, sent as Content-Type: application/json"
        out.append(problem(field, expected, got, file=file))
    return out
