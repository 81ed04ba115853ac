"""How the service refuses a request and says why: a body past its limit or its deadline
(413, 408), and the problems of a 422, one per field, each value shown short.

:class:`BodyLimit` stands in front of every route (pure ASGI): a Content-Length over the
limit is refused before anything of the body is read (and before the route is even
reached); a body of unknown length (chunked) is refused as soon as the bytes received pass
the limit, so the server never holds more than the limit of it. Either answer closes the
connection: the rest of the body is not read to keep it open.

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

import anyio
from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


# -- the body: its size and its deadline -----------------------------------------------

_CLOSE: Final = {"Connection": "close"}


def _mib(size: int) -> str:
    return f" ({size / (1 << 20):g} MiB)" if size % (1 << 16) == 0 else ""


class BodyTooLarge(HTTPException):
    """413: the body is over the limit (nothing past the limit is read)."""

    def __init__(self, limit: int, door: str = SUBMITTED, *, declared: int | None = None) -> None:
        came = (f", and its Content-Length says {declared:,}: none of it was read"
                if declared is not None else ": it was read no further than that")
        super().__init__(
            413, f"{door}: the body may be at most {limit:,} bytes{_mib(limit)}{came}",
            headers=dict(_CLOSE),
        )


class BodyTooSlow(HTTPException):
    """408: the body did not arrive within the deadline (a slow or stalled client)."""

    def __init__(self, deadline_s: float, door: str = SUBMITTED) -> None:
        super().__init__(408, f"{door}: the body did not arrive within {deadline_s:g} s",
                         headers=dict(_CLOSE))


async def read_body(
    request: Request, limit: int, deadline_s: float = 30.0, door: str = SUBMITTED
) -> bytes:
    """The request body, refused as soon as it passes ``limit`` bytes or ``deadline_s``
    seconds (a client trickling a body cannot hold a connection and a task forever).

    Raises:
        BodyTooLarge: Content-Length says so, or the bytes received do.
        BodyTooSlow: the whole body took longer than ``deadline_s``.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit, door, declared=int(declared))
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(deadline_s) as late:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(limit, door)
            chunks.append(chunk)
    if late.cancelled_caught:
        raise BodyTooSlow(deadline_s, door)
    return b"".join(chunks)


def _declared(scope: Scope) -> tuple[int | None, bool]:
    """The Content-Length a request declares (None: none, or not a number), and whether
    it has a body at all (a length above 0, or a transfer coding such as chunked)."""
    length: int | None = None
    coded = False
    # The server hands header names lower-cased (ASGI); one pass, no mapping built.
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = int(value) if value.strip().isdigit() else None
        elif name == b"transfer-encoding":
            coded = True
    return length, bool(length) or coded


class BodyLimit:
    """Every request's body at most ``limit`` bytes (413) and whole within ``deadline_s``
    of its head (408), the answers ``{"detail"}`` naming the request (pure ASGI).

    A request without a body passes untouched (an event stream's wait for its client to
    leave is no body read), as does everything after the body's last byte. So does the
    body of a route in ``reads_own``, once its Content-Length is within the limit: it
    reads with :func:`read_body`, which holds it to both (``POST /runs``, whose every
    microsecond on the event loop a burst of submissions waits for: a deadline around
    each receive here cost 6 µs a request).
    """

    def __init__(
        self, app: ASGIApp, limit: int, deadline_s: float,
        reads_own: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.app = app
        self.limit = limit
        self.deadline_s = deadline_s
        self.reads_own = reads_own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, has_body = _declared(scope)
        if not has_body:
            await self.app(scope, receive, send)
            return
        door = f"{scope['method']} {scope.get('path', '')}"
        if declared is not None and declared > self.limit:
            # Refused on its head: the route is not reached and nothing of the body is read.
            await _answer(send, BodyTooLarge(self.limit, door, declared=declared))
            return
        if (scope["method"], scope.get("path", "")) in self.reads_own:
            await self.app(scope, receive, send)
            return
        deadline = anyio.current_time() + self.deadline_s
        received = 0
        ended = False

        async def limited() -> Message:
            nonlocal received, ended
            if ended:
                return await receive()  # past the body: a disconnect, whenever it comes
            message: Message | None = None
            with anyio.move_on_after(deadline - anyio.current_time()):
                message = await receive()
            if message is None:
                raise BodyTooSlow(self.deadline_s, door)
            if message["type"] != "http.request":
                ended = True
                return message
            received += len(message.get("body", b""))
            if received > self.limit:  # only a body of unknown length gets here
                raise BodyTooLarge(self.limit, door)
            ended = not message.get("more_body", False)
            return message

        await self.app(scope, limited, send)


async def _answer(send: Send, refused: HTTPException) -> None:
    """Send ``refused`` as the service's ``{"detail"}`` answer, closing the connection."""
    body = json.dumps({"detail": refused.detail}, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in (refused.headers or {}).items()]
    await send({"type": "http.response.start", "status": refused.status_code,
                "headers": headers})
    await send({"type": "http.response.body", "body": body})
