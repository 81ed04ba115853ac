"""The promises of fanout, checked on one replay: report, routing, retries, side effects, time.

Each check is written from docs/design.md §2–§5.1, not from the code under test: the routing
table, the retry decisions (with the jitter stream reproduced draw by draw), the cost of
an attempt, the statuses and coverage. :func:`check` raises AssertionError with the
subtask and the rule broken.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from coordinator.jobfile.scenario import Scenario
from coordinator.report import CoverageReport, Gap
from shared.envelope import ToolResult
from subagents.retry import RetryPolicy
from subagents.spec import EscalateStep, FinishStep, SubtaskSpec
from tests.reliability.trace import Execution, LogicalCall, Observed, logical_calls

EPS = 1e-6

DEFAULT_ROUTES: Mapping[str, str] = {
    "transient": "retry_later",
    "validation": "gap",
    "business": "escalate",
    "permission": "escalate",
    "internal": "escalate",
}
TRIGGER_ROUTES: Mapping[str, str] = {
    "human_request": "escalate",
    "step_budget": "gap",
    "context_budget": "gap",
    "deadline": "gap",
    "incomplete_data": "gap",
}
# Triggers that come from the failed envelope of the subagent's last logical call.
RESULT_TRIGGERS = frozenset(
    {
        "retries_exhausted",
        "unknown_state",
        "permission_denied",
        "threshold_breach",
        "business_rule",
        "internal_error",
        "no_progress",
    }
)
REFUSED = frozenset({"not_allowed", "invalid_argument"})
EFFECT_MAY_HAVE_HAPPENED = frozenset({"timeout", "connection_reset", "crash"})
# The error_type each scripted error becomes (docs/design.md §2; a crash is classified by its
# exception).
ERROR_TYPES: Mapping[str, str] = {
    "validation": "invalid_input",
    "business": "business_rule",
    "permission": "forbidden",
    "crash": "SimulatedCrash",
}


def expected_route(
    category: str | None, trigger: str, routing: Mapping[Any, str | None]
) -> tuple[str, str]:
    """(route, trigger shown) for an escalation, as docs/design.md §4 and §5.1 state the rules."""
    if trigger == "unknown_state":
        return "escalate", trigger
    if trigger == "deadline":
        return "gap", trigger
    if category is None:
        return TRIGGER_ROUTES.get(trigger, "escalate"), trigger
    routes: dict[str, str | None] = {**DEFAULT_ROUTES, **routing}
    route = routes.get(category)
    if route is None:
        return "escalate", "missing_policy"
    return route, trigger


def plan_triggers(spec: SubtaskSpec) -> set[str]:
    """The triggers the subtask's plan escalates with on purpose."""
    return {s.escalate for s in spec.plan if isinstance(s, EscalateStep)}


def check(scenario: Scenario, observed: Observed) -> None:
    """Every invariant of one replay; AssertionError names the first one broken."""
    report = observed.report
    job = scenario.job
    specs = {s.id: s for s in job.subtasks}
    calls = logical_calls(observed.events)
    _check_report(scenario, report)
    _check_schedule(scenario, observed)
    executions: dict[str, list[Execution]] = {}
    for ex in observed.executions:
        executions.setdefault(ex.subtask_id, []).append(ex)
    outcomes = {o.id: o for o in report.subtasks}
    gaps = {g.subtask_id: g for g in report.gaps}
    sections = {s.subtask_id: s for s in report.answer.sections}
    for sid, spec in specs.items():
        mine = calls.get(sid, [])
        where = f"subtask {sid}"
        outcome = outcomes[sid]
        assert outcome.attempts == sum(len(c.attempts) for c in mine), where
        assert outcome.steps == len(mine) <= spec.max_steps, where
        _check_calls(scenario, spec, mine, executions.get(sid, []))
        _check_findings(spec, mine, sections[sid].findings, gaps.get(sid))
        gap = gaps.get(sid)
        if gap is not None:
            _check_gap(scenario, spec, gap, mine, outcome.rounds, outcome.ended_s)
        _check_rounds(scenario, spec, mine, outcome.rounds, gap)


def _check_report(scenario: Scenario, report: CoverageReport) -> None:
    """One status per subtask, one gap per uncovered subtask, coverage and outcome
    (docs/design.md §4)."""
    job = scenario.job
    ids = [s.id for s in job.subtasks]
    assert [o.id for o in report.subtasks] == ids, "one report line per subtask, in order"
    statuses = {o.id: o.status for o in report.subtasks}
    uncovered = [i for i in ids if statuses[i] in ("partial", "gap")]
    assert [g.subtask_id for g in report.gaps] == uncovered, "a gap exactly where not covered"
    sections = {s.subtask_id: s for s in report.answer.sections}
    assert list(sections) == ids
    for o in report.subtasks:
        findings = sections[o.id].findings
        assert o.findings == len(findings), o.id
        if o.status == "gap":
            assert not findings, f"{o.id}: a gap has no findings"
        elif o.status == "partial":
            assert findings, f"{o.id}: partial has findings"
        elif o.status == "empty":
            assert all(f.empty for f in findings), f"{o.id}: empty means every finding empty"
        else:
            assert any(not f.empty for f in findings), f"{o.id}: complete has data"
            assert all(f.complete for f in findings), f"{o.id}: complete has no partial data"
    weights = {s.id: s.weight for s in job.subtasks}
    covered = [i for i in ids if statuses[i] in ("complete", "empty")]
    total = sum(weights.values())
    share = (
        sum(weights[i] for i in covered) / total if total > 0 else len(covered) / len(ids)
    )
    assert math.isclose(report.coverage, share, abs_tol=1e-9), "coverage is the weighted share"
    assert report.answer.coverage == report.coverage
    if report.coverage == 1:
        assert report.outcome == "complete"
    elif report.coverage == 0 and all(o.findings == 0 for o in report.subtasks):
        assert report.outcome == "failed"
    else:
        assert report.outcome == "partial"
    escalated = [
        g.subtask_id
        for g in report.gaps
        if g.route == "escalate" and g.trigger != "incomplete_data"
    ]
    assert [e.subtask_id for e in report.escalations] == escalated, "escalations are in order"
    assert len(report.answer.missing) == len(report.gaps)
    for g in report.gaps:
        route, trigger = expected_route(
            g.category, g.original_trigger or g.trigger, job.routing
        ) if g.trigger != "incomplete_data" else ("gap", "incomplete_data")
        assert (g.route, g.trigger) == (route, trigger), (
            f"{g.subtask_id}: routed by docs/design.md §4")


def _check_schedule(scenario: Scenario, observed: Observed) -> None:
    """At most ``concurrency`` subagents at once, FIFO per round, nothing past the deadline."""
    job = scenario.job
    order = {s.id: i for i, s in enumerate(job.subtasks)}
    active: set[str] = set()
    peak = 0
    started: dict[int, list[int]] = {}
    rounds: dict[str, int] = {}
    last = 0.0
    for e in observed.events:
        last = max(last, e.at)
        if job.deadline_s is not None:
            assert e.at <= job.deadline_s + EPS, f"{e.subtask_id}: an event after the deadline"
        if e.kind != "state":
            continue
        if e.state == "queued":
            rounds[e.subtask_id] = rounds.get(e.subtask_id, 0) + 1
        elif e.state == "running" and e.subtask_id not in active:
            active.add(e.subtask_id)
            started.setdefault(rounds.get(e.subtask_id, 1), []).append(order[e.subtask_id])
            peak = max(peak, len(active))
        elif e.state in ("done", "escalated"):
            active.discard(e.subtask_id)
    assert peak <= job.concurrency, f"{peak} subagents at once, concurrency {job.concurrency}"
    for number, firsts in started.items():
        assert firsts == sorted(firsts), f"round {number} starts in subtask order"
    report = observed.report
    assert report.elapsed_s >= last - EPS, "elapsed_s covers every event"
    if job.deadline_s is not None:
        assert report.elapsed_s <= job.deadline_s + EPS, "the job ends by its deadline"


def _draws(scenario: Scenario, sid: str) -> random.Random:
    return random.Random(f"{scenario.seed}/{sid}")


def _check_calls(
    scenario: Scenario, spec: SubtaskSpec, calls: list[LogicalCall], executions: list[Execution]
) -> None:
    """Retries (docs/design.md §5.1 time and logical calls), attempt costs, side effects, the jitter
    stream."""
    policy: RetryPolicy = spec.retry
    rng = _draws(scenario, spec.id)
    executed = iter(executions)
    unknown_state_seen = False
    for call in calls:
        where = f"{spec.id} step {call.step} ({call.tool}, round {call.round})"
        tool = scenario.tools[call.tool]
        assert not unknown_state_seen, f"{where}: a call after an unknown state"
        assert call.attempts, f"{where}: a logical call without an attempt"
        assert len(call.attempts) <= policy.max_attempts, f"{where}: attempts > max_attempts"
        first = call.attempts[0].start
        for n, attempt in enumerate(call.attempts, start=1):
            if policy.max_total_s is not None:
                assert attempt.start - first <= policy.max_total_s + EPS, f"{where}: max_total_s"
            result = attempt.result
            if n < len(call.attempts):
                assert result is not None, f"{where}: an attempt after a cut one"
                assert not result.ok, f"{where}: an attempt after a success"
                assert result.retryable, f"{where}: an attempt after a non-retryable failure"
            if result is not None and result.error_type in REFUSED:
                assert len(call.attempts) == 1 and attempt.end == attempt.start, where
                continue
            execution = next(executed, None)
            assert execution is not None, f"{where}: an attempt without an execution"
            assert execution.tool == call.tool, where
            if result is None:
                continue  # cut by the deadline
            assert attempt.end is not None
            _check_cost(where, spec, tool.latency_s, execution, result, attempt.end - attempt.start)
            if result.changed_state == "unknown":
                unknown_state_seen = True
                assert tool.side_effects and not tool.is_idempotent, where
            elif tool.side_effects and not tool.is_idempotent and not result.ok:
                assert result.error_type not in ("timeout", "connection_reset"), (
                    f"{where}: an effect may have happened, yet changed_state is not unknown"
                )
        _check_waits(where, policy, call, rng)
    assert next(executed, None) is None, f"{spec.id}: executions no attempt accounts for"
    _check_side_effects(scenario, spec, executions)


def _check_cost(
    where: str,
    spec: SubtaskSpec,
    latency: float,
    execution: Execution,
    result: ToolResult,
    took: float,
) -> None:
    """An executed attempt costs latency_s, or tool_timeout_s and is a timeout
    (docs/design.md §5.1)."""
    timeout = spec.tool_timeout_s
    times_out = execution.error == "timeout" or latency > timeout
    if times_out:
        assert result.error_type == "timeout", f"{where}: a timeout, got {result.error_type}"
        assert math.isclose(took, timeout, abs_tol=EPS), f"{where}: a timeout costs {timeout}"
    else:
        assert result.error_type != "timeout", f"{where}: latency {latency} ≤ timeout {timeout}"
        assert math.isclose(took, latency, abs_tol=EPS), f"{where}: costs latency {latency}"
        if execution.kind == "error":
            expected = ERROR_TYPES.get(execution.error or "", execution.error)
            assert result.error_type == expected, f"{where}: {result.error_type} ≠ {expected}"
        else:
            assert result.ok, f"{where}: a scripted {execution.kind} is a success"


def _check_waits(where: str, policy: RetryPolicy, call: LogicalCall, rng: random.Random) -> None:
    """Each wait as docs/design.md §5.1 computes it, the jitter stream drawn once per wait
    considered."""
    waits = iter(call.waits)
    for n, attempt in enumerate(call.attempts, start=1):
        result = attempt.result
        if result is None or result.ok or not result.retryable or n >= policy.max_attempts:
            break
        base = policy.backoff(n)
        if policy.jitter == "full":
            base = rng.uniform(0, base)
        expected = max(base, result.retry_after_s or 0.0)
        if n < len(call.attempts):
            seconds, next_attempt = next(waits)
            assert next_attempt == n + 1, where
            assert math.isclose(seconds, expected, abs_tol=1e-9), (
                f"{where}: wait {seconds} before attempt {n + 1}, docs/design.md §5.1 gives "
                f"{expected}"
            )
            assert math.isclose(
                call.attempts[n].start - (attempt.end or 0.0), expected, abs_tol=EPS
            ), f"{where}: the wait took its length"
            continue
        # No further attempt: the time budget, or the deadline cut the wait.
        pending = next(waits, None)
        if pending is not None:
            assert math.isclose(pending[0], expected, abs_tol=1e-9), where
            continue
        assert policy.max_total_s is not None, f"{where}: a retryable failure not retried"
        spent = round((attempt.end or 0.0) + expected - call.attempts[0].start, 9)
        assert spent > policy.max_total_s, (
            f"{where}: stopped although the next attempt fits max_total_s"
        )
    assert next(waits, None) is None, f"{where}: a wait no retry accounts for"


def _check_side_effects(scenario: Scenario, spec: SubtaskSpec, executions: list[Execution]) -> None:
    """A non-idempotent tool with side effects: at most one possible effect per logical call."""
    by_key: dict[str, list[Execution]] = {}
    for ex in executions:
        by_key.setdefault(ex.key, []).append(ex)
    for key, runs in by_key.items():
        assert len({ex.tool for ex in runs}) == 1, f"{key}: one tool per logical call"
        tool = scenario.tools[runs[0].tool]
        if not tool.side_effects or tool.is_idempotent:
            continue
        for i, ex in enumerate(runs):
            effect = ex.kind != "error" or ex.error in EFFECT_MAY_HAVE_HAPPENED
            if effect:
                assert i == len(runs) - 1, f"{key}: {ex.tool} ran again after a possible effect"


def _check_findings(
    spec: SubtaskSpec, calls: list[LogicalCall], findings: list[Any], gap: Gap | None
) -> None:
    """Findings are every success (and finish text), and a gap hands all of them up."""
    successes = [(c.final.trace_id, c.final.data) for c in calls if c.final and c.final.ok]
    from_tools = [(f.trace_id, f.data) for f in findings if f.tool != "finish"]
    assert from_tools == successes, f"{spec.id}: the findings are the successful calls"
    texts = [s.finish for s in spec.plan if isinstance(s, FinishStep) and s.finish]
    written = [f.data for f in findings if f.tool == "finish"]
    assert len(written) <= len(texts) and all(w in texts for w in written), spec.id
    if gap is not None:
        assert gap.partial_results == findings, f"{spec.id}: partial_results hold every finding"


def _check_gap(
    scenario: Scenario,
    spec: SubtaskSpec,
    gap: Gap,
    calls: list[LogicalCall],
    rounds: int,
    ended_s: float | None,
) -> None:
    """The trigger matches what happened (docs/design.md §3, §5.1); no escalation is a crash of
    fanout."""
    trigger = gap.original_trigger or gap.trigger
    where = f"{spec.id}: gap {gap.category}/{trigger}"
    assert not gap.message.startswith("subagent crashed"), f"{where}: {gap.message}"
    if trigger == "incomplete_data":
        assert gap.category is None
        assert any(not f.complete for f in gap.partial_results), where
        return
    last_round = [c for c in calls if c.round == rounds] if calls else []
    final = last_round[-1].final if last_round else None
    if trigger in RESULT_TRIGGERS and gap.category is not None:
        assert final is not None and not final.ok, where
        assert gap.category == final.category, where
        if trigger == "retries_exhausted":
            assert final.retryable, where
            attempts = len(last_round[-1].attempts)
            assert attempts == spec.retry.max_attempts or spec.retry.max_total_s, where
        elif trigger == "unknown_state":
            assert final.changed_state == "unknown", where
        elif trigger == "permission_denied":
            assert final.category == "permission", where
        elif trigger in ("threshold_breach", "business_rule"):
            assert final.category == "business", where
            assert (final.limit is not None) == (trigger == "threshold_breach"), where
        elif trigger == "no_progress":
            assert final.category == "validation", where
        elif trigger == "internal_error":
            assert final.category == "internal", where
        return
    if trigger == "deadline" and gap.category is None and "deadline" not in plan_triggers(spec):
        deadline = scenario.job.deadline_s
        assert deadline is not None, where
        assert ended_s is None or ended_s >= deadline - EPS, where
    elif trigger == "step_budget":
        assert len(calls) == spec.max_steps, where
    elif trigger != "context_budget":
        assert gap.category is None and trigger in plan_triggers(spec), where


def _check_rounds(
    scenario: Scenario, spec: SubtaskSpec, calls: list[LogicalCall], rounds: int, gap: Gap | None
) -> None:
    """A second round only for what round one routed ``retry_later`` (nothing else is retried)."""
    assert rounds in (0, 1, 2), spec.id
    if rounds < 2:
        return
    first = [c for c in calls if c.round == 1]
    final = first[-1].final if first else None
    assert final is not None and not final.ok, f"{spec.id}: round 2 after a round 1 failure"
    category = final.category
    trigger = _trigger_of(final)
    route, _ = expected_route(category, trigger, scenario.job.routing)
    assert route == "retry_later", f"{spec.id}: retried although round 1 routed {route}"
    second = [c for c in calls if c.round == 2]
    if second and first:
        assert (second[0].tool, second[0].step) == (first[-1].tool, first[-1].step), (
            f"{spec.id}: round 2 resumes at the step that failed"
        )


def _trigger_of(result: ToolResult) -> str:
    """The trigger a failed envelope leads to (docs/design.md §3), for routing round one."""
    if result.changed_state == "unknown":
        return "unknown_state"
    return {
        "transient": "retries_exhausted",
        "validation": "no_progress",
        "business": "threshold_breach" if result.limit is not None else "business_rule",
        "permission": "permission_denied",
        "internal": "internal_error",
    }[result.category or "internal"]
