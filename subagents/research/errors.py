"""How the research tools fail: one exception carrying its finished envelope error.

A research tool body raises :class:`ResearchToolError` with a :class:`ToolError` already
categorised as docs/design.md §10's table says; a classifier registered for the type hands it to
the executor unchanged, so the executor's single retry layer (honouring
``retry_after_s``) decides what happens next. :func:`http_failure` is that table for an
HTTP status; the other helpers name the field the model should correct.
"""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime

from shared.classify import register_classifier
from shared.envelope import ToolError
from shared.errors import ToolFailure

__all__ = [
    "ResearchToolError",
    "http_failure",
    "invalid",
    "parse_retry_after",
    "timed_out",
    "unreachable",
]


class ResearchToolError(ToolFailure):
    """A research tool's failure, already classified: the executor uses its ToolError."""

    def __init__(self, error: ToolError) -> None:
        super().__init__(error.message)
        self.error = error


def _classify(exc: BaseException) -> ToolError:
    assert isinstance(exc, ResearchToolError)
    return exc.error


register_classifier(ResearchToolError, _classify)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    # A server asking for hours is still obeyed by the retry layer, which bounds the
    # total time; negative (a date in the past) means "now".
    return max(0.0, seconds)


def invalid(
    tool: str, field: str, expected: str, message: str, error_type: str
) -> ResearchToolError:
    """A ``validation`` failure naming the argument the model should correct."""
    return ResearchToolError(
        ToolError.of("validation", error_type, f"{tool}: {message}", field=field, expected=expected)
    )


def timed_out(tool: str, what: str, seconds: float) -> ResearchToolError:
    """A ``transient`` timeout (retried with backoff by the executor)."""
    return ResearchToolError(
        ToolError.of("transient", "timeout", f"{tool}: {what} timed out after {seconds:g}s")
    )


def unreachable(tool: str, what: str, detail: str) -> ResearchToolError:
    """A ``transient`` failure to reach the source (reset, refused, cut off)."""
    return ResearchToolError(
        ToolError.of(
            "transient", "connection_reset", f"{tool}: {what} could not be reached ({detail})"
        )
    )


# Status → (category, error_type). 404/410 name the URL (the model corrects it); any
# other 4xx is also a request that cannot succeed as made, so it names the URL too.
_TRANSIENT_STATUS = {408: "timeout", 425: "unavailable", 429: "rate_limited", 504: "timeout"}


def http_failure(
    tool: str,
    status: int,
    what: str,
    *,
    field: str = "url",
    retry_after: str | None = None,
) -> ResearchToolError:
    """docs/design.md §10's table for an HTTP status that is not a success.

    Args:
        tool: the tool's name, for the message.
        status: the HTTP status.
        what: what was asked for (a URL; never a header or a key).
        field: the argument a 404/410 names.
        retry_after: the response's ``Retry-After`` header, honoured for transient ones.
    """
    message = f"{tool}: {what} answered HTTP {status}"
    if status in _TRANSIENT_STATUS or status >= 500:
        error_type = _TRANSIENT_STATUS.get(status, "unavailable")
        return ResearchToolError(
            ToolError.of(
                "transient", error_type, message, retry_after_s=parse_retry_after(retry_after)
            )
        )
    if status in (401, 403, 407):
        return ResearchToolError(
            ToolError.of("permission", "forbidden" if status == 403 else "unauthorized", message)
        )
    if status in (404, 410):
        gone = "gone" if status == 410 else "not_found"
        return ResearchToolError(
            ToolError.of(
                "validation",
                gone,
                message,
                field=field,
                expected=f"a {field} that exists (this one answered {status})",
            )
        )
    return ResearchToolError(
        ToolError.of(
            "validation",
            f"http_{status}",
            message,
            field=field,
            expected=f"a {field} the server accepts (it answered {status})",
        )
    )
