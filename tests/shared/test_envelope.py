"""The tool result envelope: constructors, wire names, round trips and the MCP shape."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from shared import ERROR_CATEGORIES, ErrorCategory, Finding, ToolError, ToolResult
from shared.categories import default_next_action

SUCCESS_KEYS = {
    "ok",
    "isError",
    "tool",
    "trace_id",
    "attempts",
    "changed_state",
    "empty",
    "complete",
    "data",
    "next_safe_action",
    "elapsed_s",
}
FAILURE_KEYS = {
    "ok",
    "isError",
    "tool",
    "trace_id",
    "attempts",
    "changed_state",
    "error_type",
    "errorCategory",
    "isRetryable",
    "message",
    "next_safe_action",
    "field",
    "expected",
    "retry_after_s",
    "elapsed_s",
}


def _success(**extra: Any) -> ToolResult:
    return ToolResult.success(
        "web_search", {"results": ["a", "b"]}, trace_id="tr_5f2c9a41d0b3", **extra
    )


def _failure(**details: Any) -> ToolResult:
    error = ToolError.of("transient", "timeout", "web_search timed out after 30s", **details)
    return ToolResult.failure("web_search", error, trace_id="tr_5f2c9a41d0b3", attempts=4)


def test_success_wire_has_exactly_the_success_fields() -> None:
    """A success serialises with the docs/design.md §2 wire names and no error fields."""
    wire = _success(elapsed_s=1.8, attempts=3).to_wire()
    assert set(wire) == SUCCESS_KEYS
    assert wire["ok"] is True
    assert wire["isError"] is False
    assert wire["empty"] is False
    assert wire["complete"] is True
    assert wire["next_safe_action"] == "continue"
    assert wire["data"] == {"results": ["a", "b"]}


def test_failure_wire_has_exactly_the_failure_fields() -> None:
    """A failure carries isError, errorCategory and isRetryable, and no success fields."""
    wire = _failure().to_wire()
    assert set(wire) == FAILURE_KEYS
    assert wire["isError"] is True
    assert wire["ok"] is False
    assert wire["errorCategory"] == "transient"
    assert wire["isRetryable"] is True
    assert wire["error_type"] == "timeout"
    assert wire["next_safe_action"] == "retry_with_smaller_input"
    for absent in ("data", "empty", "complete", "category", "retryable", "is_error"):
        assert absent not in wire


def test_business_details_appear_on_the_wire_only_when_reported() -> None:
    """rule, limit and requested are on the wire of a business failure and nowhere else."""
    error = ToolError.of("business", "business_rule", "too many", rule="max_seats", limit=5,
                         requested=9)
    wire = ToolResult.failure("book", error, trace_id="tr_1").to_wire()
    assert (wire["rule"], wire["limit"], wire["requested"]) == ("max_seats", 5, 9)
    assert "rule" not in _failure().to_wire()
    assert "idempotency_key" not in _success().to_wire()


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(_success(), id="success"),
        pytest.param(
            ToolResult.success("t", [], trace_id="tr_1", empty=True, changed_state=True),
            id="empty-success",
        ),
        pytest.param(
            ToolResult.success("t", {"page": 1}, trace_id="tr_1", complete=False),
            id="partial-success",
        ),
        pytest.param(_failure(), id="failure"),
        pytest.param(_failure(retry_after_s=5.0), id="failure-retry-after"),
        pytest.param(
            ToolResult.failure(
                "book",
                ToolError.of("business", "business_rule", "no", rule="r", limit=1, requested=2),
                trace_id="tr_1",
            ),
            id="business",
        ),
        pytest.param(
            ToolResult.failure(
                "pay",
                ToolError.of(
                    "transient",
                    "timeout",
                    "pay timed out",
                    retryable=False,
                    next_safe_action="verify_state_before_retry",
                ),
                trace_id="tr_1",
                changed_state="unknown",
                idempotency_key="idem_1",
            ),
            id="unknown-state",
        ),
    ],
)
def test_wire_round_trips(result: ToolResult) -> None:
    """Validating an envelope's wire form gives back an equal envelope."""
    wire = result.to_wire()
    assert ToolResult.model_validate(wire) == result
    assert ToolResult.model_validate_json(result.to_json()) == result


def test_to_json_is_compact_wire_json() -> None:
    """to_json is the wire dict as compact JSON, as it enters a subagent's context."""
    result = _failure()
    text = result.to_json()
    assert json.loads(text) == result.to_wire()
    assert '": ' not in text and ', "' not in text and "\n" not in text


def test_to_mcp_success_shape() -> None:
    """A success renders as an MCP CallToolResult with the data as text content."""
    result = _success()
    mcp = result.to_mcp()
    assert set(mcp) == {"content", "structuredContent", "isError"}
    assert mcp["isError"] is False
    assert mcp["structuredContent"] == result.to_wire()
    assert mcp["content"] == [{"type": "text", "text": json.dumps({"results": ["a", "b"]})}]


def test_to_mcp_failure_shape() -> None:
    """A failure renders as an MCP CallToolResult with isError and the envelope as text."""
    result = _failure()
    mcp = result.to_mcp()
    assert mcp["isError"] is True
    assert len(mcp["content"]) == 1
    assert mcp["content"][0]["type"] == "text"
    assert json.loads(mcp["content"][0]["text"]) == result.to_wire()
    assert mcp["structuredContent"]["errorCategory"] == "transient"


@pytest.mark.parametrize(
    ("category", "retryable", "action"),
    [
        pytest.param("transient", True, "retry_with_backoff", id="transient"),
        pytest.param("validation", False, "correct_input", id="validation"),
        pytest.param("business", False, "escalate", id="business"),
        pytest.param("permission", False, "stop_and_report", id="permission"),
        pytest.param("internal", False, "escalate", id="internal"),
    ],
)
def test_tool_error_defaults_follow_the_category_table(
    category: ErrorCategory, retryable: bool, action: str
) -> None:
    """ToolError.of gives each category the retryability and next action of docs/design.md §2."""
    error = ToolError.of(category, "some_type", "message")
    assert error.retryable is retryable
    assert error.next_safe_action == action
    assert default_next_action(category) == action


def test_every_category_is_in_the_table() -> None:
    """The five categories, and only those, make up the vocabulary."""
    assert set(ERROR_CATEGORIES) == {"transient", "validation", "business", "permission",
                                     "internal"}


def test_a_timeout_advises_a_smaller_input() -> None:
    """A transient timeout's next action is retry_with_smaller_input, not plain backoff."""
    assert ToolError.of("transient", "timeout", "m").next_safe_action == (
        "retry_with_smaller_input"
    )


def test_tool_error_dumps_with_wire_names() -> None:
    """A ToolError dumped by alias uses errorCategory and isRetryable."""
    wire = ToolError.of("permission", "forbidden", "no").model_dump(by_alias=True)
    assert wire["errorCategory"] == "permission"
    assert wire["isRetryable"] is False
    assert "category" not in wire and "retryable" not in wire


def test_error_property_recovers_the_tool_error() -> None:
    """A failed envelope gives back the ToolError it was built from; a success gives None."""
    error = ToolError.of("validation", "invalid_input", "bad", field="limit", expected="≤ 20")
    assert ToolResult.failure("t", error, trace_id="tr_1").error == error
    assert _success().error is None


def test_envelopes_are_frozen_and_closed() -> None:
    """Envelopes cannot be mutated and refuse unknown fields or categories."""
    result = _success()
    with pytest.raises(pydantic.ValidationError):
        result.ok = False  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        ToolResult.model_validate({**result.to_wire(), "surprise": 1})
    with pytest.raises(pydantic.ValidationError):
        ToolError.model_validate(
            {"errorCategory": "oops", "error_type": "x", "message": "m", "isRetryable": False,
             "next_safe_action": "escalate"}
        )


def test_finding_from_result_keeps_data_flags_and_args() -> None:
    """A finding records the tool, data, flags, trace id and a copy of the arguments."""
    args = {"query": "x"}
    result = ToolResult.success("t", {"page": 1}, trace_id="tr_9", complete=False)
    finding = Finding.from_result(result, args)
    assert (finding.tool, finding.data, finding.complete, finding.trace_id) == (
        "t", {"page": 1}, False, "tr_9",
    )
    args["query"] = "changed"
    assert finding.args == {"query": "x"}
