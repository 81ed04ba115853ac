"""The context budget gate of docs/design.md §2, at its edges."""

from __future__ import annotations

import pytest

from shared import ContextDecision, required_margin, should_compact_or_stop


@pytest.mark.parametrize(
    ("tokens", "window", "budget", "decision", "margin"),
    [
        pytest.param(170_000, 200_000, 8000, "continue", 30_000, id="200k-at-margin"),
        pytest.param(171_000, 200_000, 8000, "compact_before_next_tool", 30_000,
                     id="200k-past-margin"),
        pytest.param(170_001, 200_000, 8000, "compact_before_next_tool", 30_000,
                     id="200k-one-past-margin"),
        pytest.param(12_000, 20_000, 8000, "continue", 8000, id="20k-at-tool-budget"),
        pytest.param(12_001, 20_000, 8000, "compact_before_next_tool", 8000,
                     id="20k-one-past-tool-budget"),
        pytest.param(0, 20_000, 8000, "continue", 8000, id="empty-context"),
        pytest.param(25_000, 20_000, 8000, "compact_before_next_tool", 8000,
                     id="over-the-window"),
        pytest.param(13_600, 16_000, 2000, "continue", 2400, id="share-beats-small-budget"),
        pytest.param(13_601, 16_000, 2000, "compact_before_next_tool", 2400,
                     id="share-beats-small-budget-past"),
    ],
)
def test_should_compact_or_stop_edges(
    tokens: int, window: int, budget: int, decision: str, margin: int
) -> None:
    """The margin is max(15% of the window, the tool budget), compared exactly."""
    result = should_compact_or_stop(tokens, window, budget)
    assert result.decision == decision
    assert result.required_margin == margin
    assert result.remaining_tokens == window - tokens


def test_default_tool_budget_is_8000() -> None:
    """Without a tool budget, a 20,000 window needs an 8,000-token margin."""
    result = should_compact_or_stop(12_001, 20_000)
    assert result.required_margin == 8000
    assert result.decision == "compact_before_next_tool"
    assert should_compact_or_stop(12_000, 20_000).decision == "continue"


def test_margin_comparison_has_no_rounding() -> None:
    """15% of a window that is not a multiple of 20 is compared as an exact fraction."""
    # 15% of 10,001 is 1500.15: 8,501 tokens leave 1,500, which is short of it.
    assert required_margin(10_001, 0) == pytest.approx(1500.15)
    assert should_compact_or_stop(8500, 10_001, 0).decision == "continue"
    assert should_compact_or_stop(8501, 10_001, 0).decision == "compact_before_next_tool"


def test_decision_fields_are_the_design_names() -> None:
    """The verdict serialises as decision, remaining_tokens and required_margin."""
    dumped = should_compact_or_stop(170_000, 200_000).model_dump()
    assert dumped == {"decision": "continue", "remaining_tokens": 30_000,
                      "required_margin": 30_000}
    assert isinstance(should_compact_or_stop(1, 2, 0), ContextDecision)


@pytest.mark.parametrize(
    ("tokens", "window", "budget"),
    [
        pytest.param(-1, 100, 10, id="negative-count"),
        pytest.param(0, 0, 10, id="empty-window"),
        pytest.param(0, 100, -1, id="negative-budget"),
    ],
)
def test_nonsense_inputs_are_refused(tokens: int, window: int, budget: int) -> None:
    """Negative counts and budgets, or a non-positive window, are programmer errors."""
    with pytest.raises(ValueError):
        should_compact_or_stop(tokens, window, budget)
