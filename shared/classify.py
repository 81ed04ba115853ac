"""Turn any exception a tool raises into a categorised :class:`ToolError`.

Order of precedence: mappings registered by users, fanout's own tool exceptions,
timeouts and connection failures, anything carrying an HTTP status, pydantic
validation errors, ``PermissionError``; everything else is ``internal`` (a bug).
"""

from __future__ import annotations

import email.utils
import errno
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pydantic

from shared.categories import ERROR_CATEGORIES, ErrorCategory
from shared.envelope import ToolError
from shared.errors import (
    BusinessRuleViolation,
    InvalidToolInput,
    ToolPermissionDenied,
    TransientToolError,
)

Classifier = Callable[[BaseException], ToolError]

_registry: dict[type[BaseException], Classifier] = {}

# Names of exception classes from HTTP clients we do not import (httpx, aiohttp,
# requests) that mean "the source could not be reached", matched along the MRO.
_TRANSIENT_CLASS_NAMES: Mapping[str, str] = {
    "TimeoutException": "timeout",
    "ReadTimeout": "timeout",
    "ConnectTimeout": "timeout",
    "ServerTimeoutError": "timeout",
    "ConnectError": "unavailable",
    "NetworkError": "connection_reset",
    "RemoteProtocolError": "connection_reset",
    "ServerDisconnectedError": "connection_reset",
    "ClientConnectionError": "unavailable",
    "BrokenResourceError": "connection_reset",
    "ClosedResourceError": "connection_reset",
    "EndOfStream": "connection_reset",
    # requests' exceptions are OSErrors without an errno, not the builtin ConnectionError.
    "ConnectionError": "unavailable",
    "Timeout": "timeout",
}

_TRANSIENT_ERRNOS = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
    }
)


def register_classifier(
    exc_type: type[BaseException], classifier: Classifier | ErrorCategory
) -> None:
    """Map ``exc_type`` (and its subclasses) to a category or a classifier function.

    Registered mappings win over the built-in rules; the most specific class wins.
    """
    if isinstance(classifier, str):
        if classifier not in ERROR_CATEGORIES:
            raise ValueError(f"unknown error category {classifier!r}: one of {ERROR_CATEGORIES}")
        category: ErrorCategory = classifier

        def by_category(exc: BaseException) -> ToolError:
            return ToolError.of(category, type(exc).__name__, _describe(exc))

        _registry[exc_type] = by_category
    else:
        _registry[exc_type] = classifier


def unregister_classifier(exc_type: type[BaseException]) -> None:
    """Remove a mapping added with :func:`register_classifier`."""
    _registry.pop(exc_type, None)


def classify_exception(exc: BaseException) -> ToolError:
    """The ToolError for ``exc``: its category, retryability and next safe action."""
    for klass in type(exc).__mro__:
        if klass in _registry:
            return _registry[klass](exc)
    return _builtin(exc)


def _builtin(exc: BaseException) -> ToolError:
    if isinstance(exc, TransientToolError):
        return ToolError.of(
            "transient", exc.error_type, exc.message, retry_after_s=exc.retry_after_s
        )
    if isinstance(exc, InvalidToolInput):
        return ToolError.of(
            "validation", "invalid_input", exc.message, field=exc.field, expected=exc.expected
        )
    if isinstance(exc, BusinessRuleViolation):
        return ToolError.of(
            "business",
            "business_rule",
            exc.message,
            rule=exc.rule,
            limit=exc.limit,
            requested=exc.requested,
        )
    if isinstance(exc, ToolPermissionDenied):
        return ToolError.of("permission", "forbidden", exc.message, scope=exc.scope)
    if isinstance(exc, TimeoutError):
        return ToolError.of("transient", "timeout", _describe(exc, "timed out"))
    for klass in type(exc).__mro__:
        if klass.__module__ == "builtins":
            continue  # builtins are matched by type below, not by name
        kind = _TRANSIENT_CLASS_NAMES.get(klass.__name__)
        if kind is not None:
            return ToolError.of("transient", kind, _describe(exc))
    status = http_status(exc)
    if status is not None:
        return _from_status(exc, status)
    if isinstance(exc, ConnectionRefusedError):
        return ToolError.of("transient", "unavailable", _describe(exc))
    if isinstance(exc, ConnectionError) or (
        isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS
    ):
        return ToolError.of("transient", "connection_reset", _describe(exc))
    if isinstance(exc, pydantic.ValidationError):
        return _from_pydantic(exc)
    if isinstance(exc, PermissionError):
        return ToolError.of("permission", "forbidden", _describe(exc))
    return ToolError.of(
        "internal", type(exc).__name__, f"{type(exc).__name__}: {_describe(exc)}"
    )


def http_status(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (``.status_code``, ``.response.status_code``)."""
    for holder in (exc, getattr(exc, "response", None)):
        if holder is None:
            continue
        for attr in ("status_code", "status"):
            value = getattr(holder, attr, None)
            if isinstance(value, int) and 100 <= value <= 599:
                return value
    return None


def _from_status(exc: BaseException, status: int) -> ToolError:
    message = _describe(exc, f"HTTP {status}")
    if status in (408, 425, 429) or status >= 500:
        kind = {408: "timeout", 429: "rate_limited"}.get(status, "unavailable")
        if status == 504:
            kind = "timeout"
        return ToolError.of(
            "transient",
            kind,
            message,
            retry_after_s=parse_retry_after(_header(exc, "retry-after")),
        )
    if status in (401, 403):
        return ToolError.of("permission", "forbidden", message)
    if status in (402, 409, 412):
        return ToolError.of("business", f"http_{status}", message)
    return ToolError.of("validation", "not_found" if status == 404 else f"http_{status}", message)


def _header(exc: BaseException, name: str) -> str | None:
    for holder in (exc, getattr(exc, "response", None)):
        headers = getattr(holder, "headers", None)
        if headers is None:
            continue
        try:
            value = headers.get(name) or headers.get(name.title())
        except AttributeError:
            continue
        if value is not None:
            return str(value)
    return None


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        # "inf" or "nan" would mean waiting forever (or not at all): not a usable header.
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    reference = now or datetime.now(UTC)
    return max(0.0, (when - reference).total_seconds())


def _from_pydantic(exc: pydantic.ValidationError) -> ToolError:
    first: Any = exc.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or None
    expected = str(first.get("msg", "a valid value"))
    return ToolError.of(
        "validation",
        "invalid_input",
        f"invalid {field}: {expected}" if field else expected,
        field=field,
        expected=expected,
    )


def _describe(exc: BaseException, fallback: str = "") -> str:
    text = str(exc)
    return text if text else (fallback or type(exc).__name__)
