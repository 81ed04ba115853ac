"""A job's decisions as pure functions (coordinator.rules): what both executors decide."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.job import JobSpec
from coordinator.report import CoverageReport, Decision, assemble_report
from coordinator.routing import RoutingTable
from coordinator.rules import (
    asks_for_followups,
    budget_shares,
    cut,
    follows_up,
    followup_job,
    lead_position,
    next_round_starts,
    open_gaps,
    past_deadline,
    retried_later,
    settled,
    split_followups,
    time_left,
)
from shared.categories import ErrorCategory
from subagents.models.spend import TokenBudget, TokenMeter
from subagents.result import LEAD
from subagents.run import SubagentRun
from subagents.spec import SubtaskSpec

CATEGORIES: list[ErrorCategory] = ["transient", "validation", "business", "permission",
                                   "internal"]
_TIMES = st.floats(min_value=0, max_value=1e6, allow_nan=False)
_DEADLINES = st.none() | st.floats(min_value=0.001, max_value=1e6, allow_nan=False)


def _spec(sid: str = "s") -> SubtaskSpec:
    return SubtaskSpec(id=sid, query=f"what of {sid}?", tools=["t"])


def _escalated(category: ErrorCategory, *, rounds: int = 1, sid: str = "s") -> SubagentRun:
    run = SubagentRun.for_subtask(_spec(sid))
    run.rounds = rounds
    run.started_s, run.ended_s, run.state = 0.0, 1.0, "escalated"
    run.escalate("retries_exhausted", "it failed", category=category)
    return run


@pytest.mark.parametrize("category", CATEGORIES)
@pytest.mark.parametrize("rounds", [1, 2])
def test_retry_later_is_a_first_round_result_the_job_routes_retry_later(
    category: ErrorCategory, rounds: int
) -> None:
    """Only a transient failure (by default) of a first round is retried later; a
    second round's never is, and a job may route any category there."""
    run = _escalated(category, rounds=rounds)
    default = RoutingTable({})
    assert retried_later(run.escalation, run.rounds, default) == (
        category == "transient" and rounds == 1
    )
    everything = RoutingTable(dict.fromkeys(CATEGORIES, "retry_later"))
    assert retried_later(run.escalation, run.rounds, everything) == (rounds == 1)


def test_a_result_without_an_escalation_is_never_retried() -> None:
    """A subagent that finished is not retried, whatever the routing."""
    assert not retried_later(None, 1, RoutingTable(dict.fromkeys(CATEGORIES, "retry_later")))


@given(_DEADLINES, _TIMES)
def test_the_deadline_cuts_agree(deadline: float | None, now: float) -> None:
    """Time left, past the deadline and whether another round starts say one thing:
    without a deadline there is always time; with one, time runs out at it exactly."""
    left = time_left(deadline, now)
    assert (left is None) == (deadline is None)
    assert past_deadline(deadline, now) == (deadline is not None and now >= deadline)
    assert next_round_starts(deadline, now, cancelled=False) == (not past_deadline(deadline, now))
    assert not next_round_starts(deadline, now, cancelled=True)


@pytest.mark.parametrize(("cancelled", "trigger"), [
    pytest.param(False, "deadline", id="deadline"),
    pytest.param(True, "cancelled", id="cancel"),
])
def test_a_cut_subagent_hands_up_with_the_cut_as_its_trigger(
    cancelled: bool, trigger: str
) -> None:
    """A subagent running when the job is cut is escalated at the cut's time, its
    trigger the cut's (a gap by default routing)."""
    run = SubagentRun.for_subtask(_spec())
    run.started_s = 0.0
    assert cut(run, 7.5, cancelled=cancelled) == trigger
    assert run.state == "escalated" and run.ended_s == 7.5
    assert run.escalation is not None and run.escalation.trigger == trigger
    assert RoutingTable({}).route(run.escalation).route == "gap"


def _report(*runs: SubagentRun) -> CoverageReport:
    job = JobSpec(query="q", subtasks=[r.spec for r in runs])
    return assemble_report(job, [r.result() for r in runs], elapsed_s=1.0)


def test_the_leads_own_gap_is_not_open_for_followups() -> None:
    """Follow-ups are planned for the subtasks' gaps, not for a lead that could not plan."""
    report = _report(_escalated("validation", sid="a"), _escalated("internal", sid=LEAD))
    assert [g.subtask_id for g in open_gaps(report)] == ["a"]


def _decided(sid: str, *dos: str | None) -> list[Decision]:
    """Decisions on ``sid`` in the order made (None: a handler's bare choice)."""
    return [Decision(subtask_id=sid, choice=str(do), do=do,
                     escalation=None if do is None else f"{sid}:{n}")
            for n, do in enumerate(dos, 1)]


@pytest.mark.parametrize(("dos", "open_"), [
    pytest.param(("accept",), False, id="accept"),
    pytest.param(("stop",), False, id="stop"),
    pytest.param(("use_tool",), True, id="use_tool"),  # (its continuation did not fill it)
    pytest.param(("requery",), True, id="requery"),
    pytest.param(("answer",), False, id="answer"),
    pytest.param(("retry",), True, id="retry"),
    pytest.param(("retry", "accept"), False, id="retry-then-accept"),
    pytest.param((None,), True, id="a-handlers-choice"),
])
def test_a_gap_a_person_decided_is_not_open_for_followups(
    dos: tuple[str | None, ...], open_: bool
) -> None:
    """A person's accept, stop or answer is their word on the gap (docs/design.md §17);
    a retry (the subtask's new result is its own), a use_tool or requery whose
    continuation did not fill it, or a handler's bare choice leaves it open."""
    report = _report(_escalated("permission", sid="a"), _escalated("validation", sid="b"))
    report = report.model_copy(update={"decisions": _decided("a", *dos)})
    assert [g.subtask_id for g in open_gaps(report)] == (["a", "b"] if open_ else ["b"])
    assert ("a" in settled(report)) is not open_


def test_a_followup_planned_for_a_decided_gap_does_not_run() -> None:
    """split_followups keeps the follow-ups of open gaps and sets apart those planned for
    a gap a person decided (a scripted lead plans by its script)."""
    report = _report(_escalated("permission", sid="a"), _escalated("validation", sid="b"))
    report = report.model_copy(update={"decisions": _decided("a", "accept")})
    planned = [_spec("a_web").model_copy(update={"followup_of": "a"}),
               _spec("b_web").model_copy(update={"followup_of": "b"})]
    kept, skipped = split_followups(planned, report)
    assert ([s.id for s in kept], [s.id for s in skipped]) == (["b_web"], ["a_web"])


def test_a_gap_a_persons_continuation_filled_is_not_followed_up() -> None:
    """A gap a person's use_tool continuation filled is not open, and a follow-up
    planned for it anyway is set apart; an unfilled one stays open to the lead."""
    report = _report(_escalated("permission", sid="a"), _escalated("validation", sid="b"))
    gaps = [g.model_copy(update={"filled_by": ["a-decided-1"]}) if g.subtask_id == "a"
            else g for g in report.gaps]
    report = report.model_copy(update={"gaps": gaps,
                                       "decisions": _decided("a", "use_tool")})
    assert [g.subtask_id for g in open_gaps(report)] == ["b"]
    planned = [_spec("a_web").model_copy(update={"followup_of": "a"})]
    assert [s.id for s in split_followups(planned, report)[1]] == ["a_web"]


@given(
    lead=st.booleans(), failed=st.booleans(), plans=st.booleans(),
    rounds=st.none() | st.integers(min_value=0, max_value=1),
)
def test_a_job_follows_up_only_with_a_lead_that_planned_and_may_be_asked(
    lead: bool, failed: bool, plans: bool, rounds: int | None
) -> None:
    """A follow-up round needs a lead, one that did not fail its plan, may be asked, and
    a job that follows up (a file's subtasks default to none)."""
    job = JobSpec(query="q", subtasks=[_spec()], followups=rounds)
    assert follows_up(job, lead=lead, lead_failed=failed, lead_plans=plans) == (
        lead and not failed and plans and bool(rounds)
    )


@given(_DEADLINES, _TIMES, st.booleans(), st.booleans())
def test_the_lead_is_asked_for_followups_with_a_gap_open_and_time_to_run_them(
    deadline: float | None, now: float, cancelled: bool, gap: bool
) -> None:
    """Asked only when some gap is open and another round may still start."""
    report = _report(_escalated("validation") if gap else _finished())
    assert asks_for_followups(report, deadline, now, cancelled=cancelled) == (
        gap and next_round_starts(deadline, now, cancelled=cancelled)
    )


def _finished() -> SubagentRun:
    run = SubagentRun.for_subtask(_spec())
    run.started_s, run.ended_s, run.state = 0.0, 1.0, "done"
    return run


def test_followups_run_as_the_job_with_their_own_subtasks() -> None:
    """The follow-ups' job keeps the job's deadline, concurrency and routing."""
    job = JobSpec(query="q", subtasks=[_spec()], deadline_s=9, concurrency=3,
                  routing={"validation": "retry_later"})
    extra = followup_job(job, [_spec("f")])
    assert [s.id for s in extra.subtasks] == ["f"]
    assert (extra.deadline_s, extra.concurrency, extra.routing) == (9, 3, job.routing)


@given(st.integers(min_value=0, max_value=99), st.integers(min_value=0, max_value=99),
       st.none() | st.lists(st.integers(min_value=0, max_value=10**6), min_size=3,
                            max_size=3))
def test_the_leads_position_keeps_its_calls_trace_and_spend(
    attempts: int, trace: int, spent: list[int] | None
) -> None:
    """Every executor stores the same three fields; a lead that spent nothing spent 0."""
    position: dict[str, Any] = lead_position(attempts, trace, spent)
    assert position == {"model_attempts": attempts, "trace": trace,
                        "spent": spent if spent is not None else [0, 0, 0]}
    if spent is not None:
        assert position["spent"] is not spent  # a copy: the meter goes on counting


_LIMIT = st.none() | st.integers(min_value=1, max_value=10**7)


@given(_LIMIT, _LIMIT, _LIMIT, st.floats(min_value=0, max_value=0.99))
def test_the_budgets_shares_are_what_the_local_meter_stops_at(
    inp: int | None, out: int | None, total: int | None, reserve: float
) -> None:
    """The subagents' share of each set limit is the limit less the reserve; the local
    meter stops the subagents exactly when one share is spent, the synthesis at the
    whole limit."""
    if inp is None and out is None and total is None:
        return
    budget = TokenBudget(input_tokens=inp, output_tokens=out, total_tokens=total,
                         synthesis_reserve=reserve)
    shares = budget_shares(budget)
    whole = budget_shares(budget, reserve=False)
    assert set(shares) == set(whole) == {
        n for n, v in (("input_tokens", inp), ("output_tokens", out), ("total_tokens", total))
        if v is not None
    }
    for name, share in shares.items():
        assert share == pytest.approx(whole[name] * (1 - reserve))
        assert whole[name] == getattr(budget, name)
    # Spend just enough input and output to reach the smallest share: the meter stops.
    meter = TokenMeter(budget)
    assert meter.subagents_stop() is None
    name, share = min(shares.items(), key=lambda kv: kv[1])
    need = int(share) + (0 if share == int(share) else 1)
    meter.record("s", [need, 0, 1] if name != "output_tokens" else [0, need, 1])
    assert meter.subagents_stop() is not None
