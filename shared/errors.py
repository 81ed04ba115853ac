"""Exceptions of fanout: programmer errors and bad input files, never tool failures.

Tool failures are values (:class:`shared.envelope.ToolResult`); the classes below are
either raised *by tool authors* so that :func:`shared.classify.classify_exception` can
categorise them precisely, or raised by fanout itself for input it cannot run.

    FanoutError
    ├── ToolFailure                  raised inside a tool body, becomes an envelope
    │   ├── TransientToolError       errorCategory transient (retryable)
    │   ├── InvalidToolInput         errorCategory validation (field, expected)
    │   ├── BusinessRuleViolation    errorCategory business (rule, limit, requested)
    │   └── ToolPermissionDenied     errorCategory permission
    └── InputFileError               a job or scenario file that cannot run (exit 2)
        └── InputFileErrors          several of them, reported together
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class FanoutError(Exception):
    """Base class of every exception fanout defines."""


class ToolFailure(FanoutError):
    """A failure a tool body reports on purpose; classified by its subclass."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TransientToolError(ToolFailure):
    """The world failed for now (overload, outage); trying again later may work."""

    def __init__(
        self, message: str, *, error_type: str = "unavailable", retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.retry_after_s = retry_after_s


class InvalidToolInput(ToolFailure):
    """The request was malformed: ``field`` did not meet ``expected``."""

    def __init__(self, field: str, expected: str, message: str | None = None) -> None:
        super().__init__(message or f"invalid {field}: expected {expected}")
        self.field = field
        self.expected = expected


class BusinessRuleViolation(ToolFailure):
    """A well-formed, permitted request that a business rule forbids."""

    def __init__(
        self,
        rule: str,
        *,
        limit: Any = None,
        requested: Any = None,
        message: str | None = None,
    ) -> None:
        if message is None:
            message = f"business rule {rule!r} forbids this request"
            if limit is not None:
                message += f" (limit {limit}, requested {requested})"
        super().__init__(message)
        self.rule = rule
        self.limit = limit
        self.requested = requested


class ToolPermissionDenied(ToolFailure):
    """The caller's credentials or role do not allow the call."""

    def __init__(self, message: str, *, scope: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope


class InputFileError(FanoutError):
    """A job or scenario file that cannot run: names the file, line and field."""

    def __init__(
        self, file: str, line: int | None, field: str, expected: str, *, got: str | None = None
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(self.describe())

    def describe(self) -> str:
        """One line a person can act on: ``file:line: field: expected ...``."""
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        text = f"{where}: {self.field or '<document>'}: expected {self.expected}"
        if self.got is not None:
            text += f", got {self.got}"
        return text


class InputFileErrors(InputFileError):
    """Every problem found in one file, so a person fixes them in one pass."""

    def __init__(self, errors: Sequence[InputFileError]) -> None:
        if not errors:
            raise ValueError("InputFileErrors needs at least one error")
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.file, first.line, first.field, first.expected, got=first.got)

    def describe(self) -> str:
        """All problems, one per line, in file order."""
        return "\n".join(InputFileError.describe(e) for e in getattr(self, "errors", [self]))
