"""classify_exception: every way the world fails maps to its category."""

from __future__ import annotations

import email.utils
import errno
from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic
import pytest

from shared import (
    BusinessRuleViolation,
    ErrorCategory,
    InvalidToolInput,
    ToolError,
    ToolPermissionDenied,
    TransientToolError,
    classify_exception,
    parse_retry_after,
    register_classifier,
    unregister_classifier,
)


class FakeResponse:
    """The response half of an HTTP client's error (httpx/requests style)."""

    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        self.status_code = status_code
        self.headers = headers or {}


class StatusError(Exception):
    """An HTTP error carrying its status directly (``.status_code``)."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


class ResponseError(Exception):
    """An HTTP error carrying its response (``.response.status_code``)."""

    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"server said {status_code}")
        self.response = FakeResponse(status_code, headers)


class ReadTimeout(Exception):
    """Named like httpx's ReadTimeout, which classify matches by class name."""


class Args(pydantic.BaseModel):
    """A model whose validation error classify must turn into a validation envelope."""

    limit: int = pydantic.Field(le=20)


@pytest.mark.parametrize(
    ("exc", "category", "error_type"),
    [
        pytest.param(TimeoutError(), "transient", "timeout", id="timeout"),
        pytest.param(ConnectionResetError(), "transient", "connection_reset", id="reset"),
        pytest.param(ConnectionRefusedError(), "transient", "unavailable", id="refused"),
        pytest.param(BrokenPipeError(), "transient", "connection_reset", id="broken-pipe"),
        pytest.param(
            OSError(errno.ENETUNREACH, "unreachable"), "transient", "connection_reset",
            id="oserror-errno",
        ),
        pytest.param(ReadTimeout("slow"), "transient", "timeout", id="client-timeout-by-name"),
        pytest.param(TransientToolError("overloaded"), "transient", "unavailable",
                     id="transient-tool-error"),
        pytest.param(
            TransientToolError("slow down", error_type="rate_limited"), "transient",
            "rate_limited", id="transient-tool-error-typed",
        ),
        pytest.param(StatusError(503), "transient", "unavailable", id="http-503"),
        pytest.param(StatusError(502), "transient", "unavailable", id="http-502"),
        pytest.param(StatusError(504), "transient", "timeout", id="http-504"),
        pytest.param(StatusError(408), "transient", "timeout", id="http-408"),
        pytest.param(StatusError(425), "transient", "unavailable", id="http-425"),
        pytest.param(ResponseError(429), "transient", "rate_limited", id="http-429-response"),
        pytest.param(StatusError(400), "validation", "http_400", id="http-400"),
        pytest.param(ResponseError(422), "validation", "http_422", id="http-422-response"),
        pytest.param(StatusError(401), "permission", "forbidden", id="http-401"),
        pytest.param(StatusError(403), "permission", "forbidden", id="http-403"),
        pytest.param(InvalidToolInput("since", "a date YYYY-MM-DD"), "validation",
                     "invalid_input", id="invalid-tool-input"),
        pytest.param(BusinessRuleViolation("max_seats", limit=5, requested=9), "business",
                     "business_rule", id="business-rule"),
        pytest.param(ToolPermissionDenied("role analyst lacks patents:read"), "permission",
                     "forbidden", id="tool-permission-denied"),
        pytest.param(PermissionError("read-only"), "permission", "forbidden",
                     id="permission-error"),
        pytest.param(KeyError("missing"), "internal", "KeyError", id="key-error"),
        pytest.param(ZeroDivisionError("oops"), "internal", "ZeroDivisionError",
                     id="zero-division"),
    ],
)
def test_exceptions_map_to_their_category(
    exc: BaseException, category: ErrorCategory, error_type: str
) -> None:
    """Each exception gets its category, error type and the category's retryability."""
    error = classify_exception(exc)
    assert error.category == category
    assert error.error_type == error_type
    assert error.retryable is (category == "transient")
    assert error.message


def test_invalid_tool_input_names_field_and_expectation() -> None:
    """InvalidToolInput's field and expectation are carried into the error."""
    error = classify_exception(InvalidToolInput("since", "a date YYYY-MM-DD"))
    assert (error.field, error.expected) == ("since", "a date YYYY-MM-DD")
    assert error.next_safe_action == "correct_input"


def test_business_rule_violation_carries_rule_limit_requested() -> None:
    """A business violation keeps its rule, limit and requested amount."""
    error = classify_exception(BusinessRuleViolation("max_seats", limit=5, requested=9))
    assert (error.rule, error.limit, error.requested) == ("max_seats", 5, 9)
    assert error.next_safe_action == "escalate"
    assert "5" in error.message and "9" in error.message


def test_pydantic_validation_error_names_the_field() -> None:
    """A pydantic ValidationError is validation, naming the field and what was expected."""
    with pytest.raises(pydantic.ValidationError) as info:
        Args(limit=50)
    error = classify_exception(info.value)
    assert error.category == "validation"
    assert error.field == "limit"
    assert error.expected is not None and "20" in error.expected


def test_unknown_exception_is_internal_and_says_what_it_was() -> None:
    """An unclassified exception is internal, escalated, and names its type."""
    error = classify_exception(KeyError("user_id"))
    assert error.category == "internal"
    assert error.next_safe_action == "escalate"
    assert error.message.startswith("KeyError")


def test_transient_tool_error_keeps_retry_after() -> None:
    """TransientToolError's retry_after_s is carried into the error."""
    assert classify_exception(TransientToolError("busy", retry_after_s=5)).retry_after_s == 5


def test_retry_after_header_in_seconds() -> None:
    """A 429 whose response says Retry-After: 7 asks for a 7-second wait."""
    error = classify_exception(ResponseError(429, {"Retry-After": "7"}))
    assert error.category == "transient"
    assert error.retry_after_s == 7.0


def test_retry_after_header_as_http_date() -> None:
    """A Retry-After HTTP date two minutes ahead asks for about two minutes."""
    when = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    error = classify_exception(ResponseError(503, {"Retry-After": when}))
    assert error.retry_after_s is not None
    # The date has one-second resolution and the wall clock moves between the two calls.
    assert 115 <= error.retry_after_s <= 120


REFERENCE = datetime(2015, 10, 21, 7, 27, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("5", 5.0, id="seconds"),
        pytest.param(" 7 ", 7.0, id="padded"),
        pytest.param("1.5", 1.5, id="fraction"),
        pytest.param("-3", 0.0, id="negative-clamped"),
        pytest.param(None, None, id="absent"),
        pytest.param("soon", None, id="garbage"),
        pytest.param("inf", None, id="infinite"),
        pytest.param("nan", None, id="not-a-number"),
        pytest.param("Wed, 21 Oct 2015 07:28:00 GMT", 60.0, id="http-date"),
        pytest.param("Wed, 21 Oct 2015 07:00:00 GMT", 0.0, id="http-date-past"),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    """Retry-After parses as delta-seconds or an HTTP date relative to now."""
    assert parse_retry_after(value, now=REFERENCE) == expected


class MyBusinessError(Exception):
    """A user's own exception that means a business rule."""


class MySpecificBusinessError(MyBusinessError):
    """A subclass, which a mapping of its base covers."""


class QuotaExceeded(Exception):
    """A user's exception carrying the rule's numbers."""

    def __init__(self, limit: int, requested: int) -> None:
        super().__init__("quota exceeded")
        self.limit = limit
        self.requested = requested


def test_register_classifier_with_a_category() -> None:
    """A registered category applies to the class and its subclasses, until unregistered."""
    assert classify_exception(MyBusinessError("x")).category == "internal"
    register_classifier(MyBusinessError, "business")
    try:
        assert classify_exception(MyBusinessError("x")).category == "business"
        subclass_error = classify_exception(MySpecificBusinessError("y"))
        assert subclass_error.category == "business"
        assert subclass_error.retryable is False
    finally:
        unregister_classifier(MyBusinessError)
    assert classify_exception(MyBusinessError("x")).category == "internal"


def test_register_classifier_with_a_function() -> None:
    """A registered function builds the whole ToolError."""

    def quota(exc: BaseException) -> ToolError:
        assert isinstance(exc, QuotaExceeded)
        return ToolError.of(
            "business", "quota", str(exc), rule="quota", limit=exc.limit, requested=exc.requested
        )

    register_classifier(QuotaExceeded, quota)
    try:
        error = classify_exception(QuotaExceeded(10, 12))
        assert (error.category, error.rule, error.limit, error.requested) == (
            "business", "quota", 10, 12,
        )
    finally:
        unregister_classifier(QuotaExceeded)


def test_registered_mapping_overrides_builtin_and_most_specific_wins() -> None:
    """A mapping beats the built-in rules, and a subclass mapping beats its base's."""
    register_classifier(OSError, "internal")
    register_classifier(ConnectionResetError, "validation")
    try:
        assert classify_exception(ConnectionResetError()).category == "validation"
        assert classify_exception(ConnectionRefusedError()).category == "internal"
    finally:
        unregister_classifier(OSError)
        unregister_classifier(ConnectionResetError)
    assert classify_exception(ConnectionResetError()).category == "transient"


def test_unregistering_an_unknown_class_is_harmless() -> None:
    """Unregistering a class that was never registered changes nothing."""
    unregister_classifier(MyBusinessError)
    assert classify_exception(KeyError("k")).category == "internal"


def test_message_falls_back_when_the_exception_is_silent() -> None:
    """An exception with no text still gives a message people can read."""
    assert classify_exception(TimeoutError()).message == "timed out"
    assert classify_exception(StatusError(503)).message == "HTTP 503"


def test_a_non_numeric_status_is_ignored() -> None:
    """An exception whose status_code is not a number is not taken for an HTTP error."""

    class Odd(Exception):
        status_code: Any = "teapot"

    assert classify_exception(Odd()).category == "internal"
