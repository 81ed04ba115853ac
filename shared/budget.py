"""The context budget: a safety margin, checked before every logical tool call."""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Literal

from pydantic import BaseModel, ConfigDict

ContextDecisionKind = Literal["continue", "compact_before_next_tool"]

_MARGIN_SHARE = Fraction(15, 100)


class ContextDecision(BaseModel):
    """The gate's verdict, with the numbers that produced it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: ContextDecisionKind
    remaining_tokens: int
    required_margin: float


def required_margin(max_context: int, active_tool_budget: int = 8000) -> Fraction:
    """The margin a next tool call needs: max(15% of the window, the tool budget)."""
    return max(_MARGIN_SHARE * max_context, Fraction(active_tool_budget))


def should_compact_or_stop(
    token_count: int, max_context: int, active_tool_budget: int = 8000
) -> ContextDecision:
    """Decide whether the context has room for the next tool call (docs/design.md §2).

    The comparison is exact (no rounding): 170,000 of 200,000 leaves exactly the
    30,000-token margin and continues; 171,000 compacts.
    """
    if token_count < 0 or max_context <= 0 or active_tool_budget < 0:
        raise ValueError("token counts and budgets must be non-negative, the window positive")
    if type(token_count) is int and type(max_context) is int and type(active_tool_budget) is int:
        # The gate runs before every tool call: the same numbers give the same (frozen)
        # decision, and it is computed in exact integers rather than Fractions.
        return _integer_decision(token_count, max_context, active_tool_budget)
    margin = required_margin(max_context, active_tool_budget)
    remaining = max_context - token_count
    decision: ContextDecisionKind = (
        "compact_before_next_tool" if remaining < margin else "continue"
    )
    return ContextDecision(
        decision=decision, remaining_tokens=remaining, required_margin=float(margin)
    )


@functools.lru_cache(maxsize=4096)
def _integer_decision(
    token_count: int, max_context: int, active_tool_budget: int
) -> ContextDecision:
    """The decision for integer arguments: 100 × remaining against 100 × the margin."""
    margin_x100, margin_float = _integer_margin(max_context, active_tool_budget)
    remaining = max_context - token_count
    decision: ContextDecisionKind = (
        "compact_before_next_tool" if remaining * 100 < margin_x100 else "continue"
    )
    return ContextDecision(
        decision=decision, remaining_tokens=remaining, required_margin=margin_float
    )


@functools.lru_cache(maxsize=256)
def _integer_margin(max_context: int, active_tool_budget: int) -> tuple[int, float]:
    """100 × the required margin as an exact integer, and the margin as a float."""
    margin = required_margin(max_context, active_tool_budget)
    x100 = margin * 100
    assert x100.denominator == 1  # 15% of an integer window is a whole number of hundredths
    return x100.numerator, float(margin)
