"""fanout's own exceptions: each builds its message and carries its context."""

from __future__ import annotations

import pytest

from shared import (
    BusinessRuleViolation,
    FanoutError,
    InputFileError,
    InputFileErrors,
    InvalidToolInput,
    ToolFailure,
    ToolPermissionDenied,
    TransientToolError,
)


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(TransientToolError("busy"), id="transient"),
        pytest.param(InvalidToolInput("since", "a date"), id="invalid-input"),
        pytest.param(BusinessRuleViolation("max_seats"), id="business"),
        pytest.param(ToolPermissionDenied("no"), id="permission"),
    ],
)
def test_tool_failures_are_fanout_errors(exc: ToolFailure) -> None:
    """Every exception for tool authors is a ToolFailure and a FanoutError with a message."""
    assert isinstance(exc, FanoutError)
    assert exc.message == str(exc)
    assert exc.message


def test_messages_are_built_from_the_details() -> None:
    """InvalidToolInput and BusinessRuleViolation say what was wrong without help."""
    assert str(InvalidToolInput("since", "a date YYYY-MM-DD")) == (
        "invalid since: expected a date YYYY-MM-DD"
    )
    message = str(BusinessRuleViolation("max_seats", limit=5, requested=9))
    assert "max_seats" in message and "limit 5" in message and "requested 9" in message


def test_input_file_errors_describe_file_line_field() -> None:
    """A bad input file names the file, line, field and what was expected."""
    error = InputFileError("job.yaml", 12, "tools.web_search.latency_s", "a number", got="'x'")
    assert str(error) == "job.yaml:12: tools.web_search.latency_s: expected a number, got 'x'"
    assert str(InputFileError("job.yaml", None, "", "a mapping")) == (
        "job.yaml: <document>: expected a mapping"
    )


def test_input_file_errors_lists_every_problem() -> None:
    """Several problems in one file are reported together, one per line."""
    errors = InputFileErrors(
        [InputFileError("a.yaml", 1, "scenario", "a string"),
         InputFileError("a.yaml", 4, "job.query", "a string")]
    )
    assert str(errors).splitlines() == [
        "a.yaml:1: scenario: expected a string",
        "a.yaml:4: job.query: expected a string",
    ]
    assert errors.line == 1
    with pytest.raises(ValueError):
        InputFileErrors([])
