"""The job's token meter: what a resumed run or a Temporal round brings back replaces a
subtask's count, and a snapshot makes the same meter again."""

from __future__ import annotations

from subagents.models.base import Usage
from subagents.models.spend import TokenBudget, TokenMeter


def test_record_replaces_a_subtasks_count_and_the_totals_follow() -> None:
    """Recording a subtask twice counts it once (its latest count), beside the others."""
    meter = TokenMeter(TokenBudget(total_tokens=1000))
    meter.spend("a", Usage(100, 10))
    meter.record("b", [200, 20, 2])
    meter.record("b", [300, 30, 3])
    assert meter.by_subtask == {"a": [100, 10, 1], "b": [300, 30, 3]}
    assert (meter.input_tokens, meter.output_tokens, meter.calls) == (400, 40, 4)


def test_a_snapshot_makes_the_same_meter() -> None:
    """TokenMeter.of(budget, snapshot) has the same counts and stops at the same point."""
    meter = TokenMeter(TokenBudget(total_tokens=1000, synthesis_reserve=0.5))
    meter.spend("a", Usage(400, 100))
    again = TokenMeter.of(meter.budget, meter.snapshot())
    assert again == meter
    assert again.subagents_stop() == meter.subagents_stop() is not None
