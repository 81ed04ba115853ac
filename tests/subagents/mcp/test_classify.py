"""Classifying MCP failures: error texts, structured content, protocol errors, no server."""

from __future__ import annotations

from typing import Any

import pytest

from shared.classify import classify_exception
from shared.envelope import ToolError, ToolResult
from subagents.mcp.classify import (
    McpToolError,
    classify_text,
    error_from_protocol,
    error_from_result,
    infer_field,
    retry_after_in,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "source_timezone": {"type": "string", "description": "Source IANA timezone name."},
        "time": {"type": "string", "description": "Time in 24-hour format (HH:MM)"},
        "unit": {"type": "string", "enum": ["c", "f"]},
    },
    "required": ["source_timezone", "time"],
}


@pytest.mark.parametrize(
    ("text", "category", "error_type"),
    [
        pytest.param("Request timed out after 30s", "transient", "timeout", id="timed-out"),
        pytest.param("TIMEOUT", "transient", "timeout", id="bare-timeout-upper"),
        pytest.param("rate limit exceeded", "transient", "rate_limited", id="rate-limit"),
        pytest.param("Rate-Limited: slow down", "transient", "rate_limited", id="rate-limited"),
        pytest.param("HTTP 429 Too Many Requests", "transient", "rate_limited", id="429"),
        pytest.param("upstream returned 503", "transient", "unavailable", id="503"),
        pytest.param("Service Temporarily Unavailable", "transient", "unavailable", id="temp"),
        pytest.param("connection reset by peer", "transient", "connection_reset", id="reset"),
        pytest.param("Invalid timezone: 'Mars/Olympus'", "validation", "invalid_input", id="inv"),
        pytest.param("Repository not found", "validation", "invalid_input", id="not-found"),
        pytest.param("Unknown tool: frobnicate", "validation", "invalid_input", id="unknown"),
        pytest.param("missing field 'q'", "validation", "invalid_input", id="missing"),
        pytest.param("limit MUST BE between 1 and 20", "validation", "invalid_input", id="must"),
        pytest.param("invalid timeout value: -3", "validation", "invalid_input", id="inv-timeout"),
        pytest.param("Unauthorized", "permission", "forbidden", id="unauthorized"),
        pytest.param("403 Forbidden", "permission", "forbidden", id="forbidden"),
        pytest.param("Permission denied: /etc/shadow", "permission", "forbidden", id="denied"),
        pytest.param("invalid credentials", "permission", "forbidden", id="credentials"),
        pytest.param(
            "Repository path '/x' is outside the allowed repository '/r'",
            "permission",
            "forbidden",
            id="outside-allowed",
        ),
        pytest.param("timed out checking permissions", "transient", "timeout", id="precedence"),
        pytest.param("KeyError: 'rows'", "internal", "tool_error", id="bug"),
        pytest.param("", "internal", "tool_error", id="no-text"),
        pytest.param("unexpected end of data", "internal", "tool_error", id="unexpected-no-match"),
    ],
)
def test_error_text_classification(text: str, category: str, error_type: str) -> None:
    """Error texts map to categories case-insensitively, on word boundaries, by precedence."""
    assert classify_text(text) == (category, error_type)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("rate limited, retry after 5s", 5.0, id="seconds"),
        pytest.param("Retry-After: 2", 2.0, id="header-style"),
        pytest.param("try again in 1.5 seconds", 1.5, id="try-again"),
        pytest.param("retry after 250ms", 0.25, id="millis"),
        pytest.param("retry after 2 minutes", 120.0, id="minutes"),
        pytest.param("rate limited", None, id="none"),
    ],
)
def test_retry_after_is_read_from_the_text(text: str, seconds: float | None) -> None:
    """A wait the server asks for in its text becomes retry_after_s."""
    assert retry_after_in(text) == seconds


def test_field_is_inferred_from_the_quoted_value_first() -> None:
    """The argument whose value the error quotes is the field, whatever it is called."""
    args = {"source_timezone": "Mars/Olympus", "time": "09:30"}
    assert infer_field("No time zone found with key Mars/Olympus", args, SCHEMA) == (
        "source_timezone"
    )
    assert infer_field("Field required: time", {}, SCHEMA) == "time"
    assert infer_field("something broke", args, SCHEMA) is None


def test_text_validation_names_field_and_expectation() -> None:
    """A validation text carries the field and what its schema says the field takes."""
    error = error_from_result(
        None,
        "Error executing tool convert_time: Invalid timezone: 'Mars/Olympus'",
        tool="time.convert_time",
        args={"source_timezone": "Mars/Olympus", "time": "09:30"},
        schema=SCHEMA,
    )
    assert error.category == "validation"
    assert error.field == "source_timezone"
    assert error.expected == "Source IANA timezone name"
    assert error.message == "time.convert_time: Invalid timezone: 'Mars/Olympus'"


def test_enum_field_expects_its_values() -> None:
    """A validation error on an enum argument expects one of its values."""
    error = error_from_result(
        None, "unit: must be c or f", tool="t.x", args={"unit": "k"}, schema=SCHEMA
    )
    assert error.field == "unit" and error.expected == "one of 'c', 'f'"


def test_fanout_envelope_round_trips_through_structured_content() -> None:
    """An envelope rendered with to_mcp() classifies back to the same category and details."""
    original = ToolError.of(
        "business",
        "business_rule",
        "order exceeds the credit limit",
        rule="credit_limit",
        limit=1000,
        requested=2500,
    )
    mcp = ToolResult.failure("shop.order", original, trace_id="tr_1").to_mcp()
    error = error_from_result(
        mcp["structuredContent"],
        mcp["content"][0]["text"],
        tool="shop.order",
        args={},
        schema={},
    )
    assert error.category == "business" and error.retryable is False
    assert (error.rule, error.limit, error.requested) == ("credit_limit", 1000, 2500)
    assert error.message == "shop.order: order exceeds the credit limit"


@pytest.mark.parametrize(
    ("structured", "category", "retryable"),
    [
        pytest.param({"errorCategory": "permission"}, "permission", False, id="category"),
        pytest.param({"errorCategory": "transient"}, "transient", True, id="transient"),
        pytest.param(
            {"errorCategory": "transient", "isRetryable": False}, "transient", False, id="no-retry"
        ),
        pytest.param({"isRetryable": True}, "transient", True, id="retryable-only"),
        pytest.param({"isRetryable": False}, "internal", False, id="not-retryable-timeout"),
        pytest.param({"errorCategory": "nonsense"}, "transient", True, id="bad-category-text"),
    ],
)
def test_structured_category_and_retryability_are_honoured(
    structured: dict[str, Any], category: str, retryable: bool
) -> None:
    """errorCategory and isRetryable in structuredContent win over the text."""
    error = error_from_result(structured, "request timed out", tool="t.x", args={}, schema={})
    assert (error.category, error.retryable) == (category, retryable)


@pytest.mark.parametrize(
    ("code", "category", "error_type"),
    [
        pytest.param(-32602, "validation", "invalid_input", id="invalid-params"),
        pytest.param(-32001, "transient", "timeout", id="request-timeout"),
        pytest.param(-32603, "internal", "tool_error", id="internal-error"),
    ],
)
def test_protocol_errors_are_classified(code: int, category: str, error_type: str) -> None:
    """JSON-RPC errors answering tools/call map to categories by code."""
    error = error_from_protocol(code, "boom", tool="t.x", args={}, schema={})
    assert (error.category, error.error_type) == (category, error_type)


def test_executor_classifier_uses_the_error_as_is() -> None:
    """classify_exception hands an McpToolError's ToolError through unchanged."""
    error = ToolError.of("permission", "forbidden", "t.x: no", scope="repo:read")
    assert classify_exception(McpToolError(error)) == error


def test_long_texts_are_cleaned_and_bounded() -> None:
    """SDK prefixes, doc links and newlines are dropped; long texts are cut."""
    text = (
        "Error executing tool x: 1 validation error for xArguments\ntimezone\n  Field required "
        "[type=missing]\n    For further information visit https://errors.pydantic.dev/2/v/missing"
        + " padding" * 100
    )
    error = error_from_result(None, text, tool="t.x", args={}, schema={})
    assert error.message.startswith("t.x: 1 validation error for xArguments timezone Field")
    assert "pydantic.dev" not in error.message and "\n" not in error.message
    assert len(error.message) <= 410
