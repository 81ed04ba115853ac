"""The workflow's share of job.budget, without a server: what it lends to rounds running
at once, what comes back, and where an activity stops itself (coordinator.temporal.budget)."""

from __future__ import annotations

from coordinator.temporal.budget import Allowance, AllowanceMeter, WorkflowBudget
from subagents.models.base import Usage
from subagents.models.spend import TokenBudget

BUDGET = TokenBudget(total_tokens=2000, synthesis_reserve=0.5)  # the subagents' share: 1,000


def test_rounds_started_together_split_what_is_left() -> None:
    """Four lanes free at once: each round is lent a quarter, so together they cannot
    spend more than the share (a round given all of it each could)."""
    purse = WorkflowBudget(BUDGET)
    lent = [purse.lend(sid, sharers=4 - i) for i, sid in enumerate("abcd")]
    assert [a.total_tokens for a in lent if a is not None] == [250, 250, 250, 250]
    assert purse.lend("e", sharers=1) is None  # all of it is lent
    assert purse.stop() is None  # but not spent


def test_what_a_round_did_not_spend_comes_back() -> None:
    """A round back with 100 of its 500 frees the rest for the next one."""
    purse = WorkflowBudget(BUDGET)
    assert purse.lend("a", sharers=2) == Allowance(total_tokens=500)
    assert purse.lend("b", sharers=1) == Allowance(total_tokens=500)
    purse.record("a", [80, 20, 1])
    assert purse.returned == 1
    assert purse.lend("c", sharers=1) == Allowance(total_tokens=400)
    assert purse.others("c") == [80, 20, 1]


def test_the_share_spent_is_said_as_locally() -> None:
    """Once the rounds brought back the share, no new subagent starts, with the local
    meter's words."""
    purse = WorkflowBudget(BUDGET)
    purse.record("a", [900, 150, 2])
    assert purse.stop() == (
        "1050 total tokens spent; the subagents' share of the job's budget of 2000 is 1000 "
        "(the rest is kept for the synthesis)"
    )


def test_an_activity_stops_at_its_allowance_or_the_jobs_share() -> None:
    """The round's meter stops at what it was lent (its earlier rounds' spend aside), or
    when what the workflow knew plus its own spend reaches the share."""
    meter = AllowanceMeter(BUDGET, input_tokens=300, output_tokens=0, subtask_id="a",
                           allowance=Allowance(total_tokens=200), base=[50, 0, 1])
    meter.record("a", [50, 0, 1])  # restored from the retry round's state
    assert meter.subagents_stop() is None
    meter.spend("a", Usage(150, 40))
    assert meter.subagents_stop() is None  # 190 of its 200
    meter.spend("a", Usage(10, 0))
    why = meter.subagents_stop()
    assert why is not None and "200 total tokens of the 200 the workflow lent it" in why
    shared = AllowanceMeter(BUDGET, input_tokens=990, subtask_id="b",
                            allowance=Allowance(total_tokens=500))
    shared.spend("b", Usage(10, 0))
    assert (shared.subagents_stop() or "").startswith("1000 total tokens spent;")

