"""The subagent loop: calls, corrections, budgets, escalations with what was found so far."""

from __future__ import annotations

import random
from typing import Any

import anyio
import pytest

from shared import AnyioClock, SeededTraceIds
from subagents import RetryPolicy, Tool
from subagents.context import Context
from subagents.loop import run_subagent
from subagents.planners import Action, CallAction, FinishAction, Observation, PlanEnv
from subagents.result import SubagentResult
from subagents.run import SubagentRun
from subagents.simulated.spec import ParamSpec, ResponseSpec, SimToolSpec
from subagents.simulated.tools import SimulatedTools
from subagents.spec import CallStep, EscalateStep, FinishStep, PlanStep, SubtaskSpec

pytestmark = pytest.mark.anyio

NO_JITTER = RetryPolicy(jitter="none", max_attempts=3)
OK = ResponseSpec(ok={"results": ["QuantumScape ships B-samples"]})


def _spec(plan: list[PlanStep], tools: list[str], **settings: Any) -> SubtaskSpec:
    settings.setdefault("retry", NO_JITTER)
    return SubtaskSpec(id="sub", query="solid-state batteries", tools=tools, plan=plan, **settings)


async def _run(
    spec: SubtaskSpec, sim: dict[str, SimToolSpec], clock: AnyioClock | None = None
) -> tuple[SubagentResult, SimulatedTools]:
    clock = clock or AnyioClock()
    tools = SimulatedTools(sim, clock)
    run = SubagentRun.for_subtask(spec)
    result = await run_subagent(
        run, tools.for_subtask(spec.id), clock=clock, trace_ids=SeededTraceIds(0)
    )
    return result, tools


async def test_a_plan_of_calls_completes_with_every_finding() -> None:
    """Each successful call becomes a finding, with its arguments, and nothing escalates."""
    plan: list[PlanStep] = [
        CallStep(call="web_search", args={"query": "market"}),
        CallStep(call="web_search", args={"query": "patents"}),
    ]
    result, _ = await _run(
        _spec(plan, ["web_search"]),
        {"web_search": SimToolSpec(params={"query": ParamSpec(type="string")}, responses=[OK])},
    )
    assert result.escalation is None
    assert [f.args for f in result.findings] == [{"query": "market"}, {"query": "patents"}]
    assert result.steps == result.attempts == 2
    assert result.rounds == 1
    assert len(result.trace_ids) == 2


async def test_a_permission_error_is_attempted_once_and_escalated() -> None:
    """A permission error is never retried; the escalation names what to request."""
    sim = {
        "patent_db": SimToolSpec(
            responses=[ResponseSpec(error="permission", message="role analyst lacks patents:read")]
        )
    }
    result, tools = await _run(_spec([CallStep(call="patent_db")], ["patent_db"]), sim)
    assert tools.executions[("sub", "patent_db")] == 1
    assert result.attempts == 1
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.trigger, esc.retryable) == ("permission", "permission_denied", False)
    assert any("patent_db" in a and "patents:read" in a for a in esc.alternatives)


async def test_a_call_outside_the_allowlist_is_refused_without_executing() -> None:
    """A tool not on the allowlist is a permission error; the tool body never runs."""
    sim = {"web_search": SimToolSpec(responses=[OK]), "patent_db": SimToolSpec(responses=[OK])}
    result, tools = await _run(_spec([CallStep(call="patent_db")], ["web_search"]), sim)
    assert tools.executions[("sub", "patent_db")] == 0
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.error_type, esc.trigger) == (
        "permission",
        "not_allowed",
        "permission_denied",
    )
    assert result.attempts == 1
    assert any("allowlist" in a and "patent_db" in a for a in esc.alternatives)


async def test_a_validation_error_is_corrected_once() -> None:
    """The tool's validation error is corrected with on_validation; the corrected call succeeds."""
    sim = {
        "patent_db": SimToolSpec(
            params={"since": ParamSpec(type="string")},
            responses=[ResponseSpec(ok={"results": ["p1"]})],
            when=[
                {
                    "match": {"since": "2024-13-01"},
                    "responses": [
                        ResponseSpec(error="validation", field="since", expected="a real month")
                    ],
                }
            ],
        )
    }
    step = CallStep(
        call="patent_db", args={"since": "2024-13-01"}, on_validation={"since": "2024-12-01"}
    )
    result, tools = await _run(_spec([step], ["patent_db"]), sim)
    assert result.escalation is None
    assert [f.args for f in result.findings] == [{"since": "2024-12-01"}]
    assert tools.executions[("sub", "patent_db")] == 2
    assert result.steps == 2  # the correction is a new logical call


async def test_a_schema_violation_is_corrected_before_anything_runs() -> None:
    """An argument the schema refuses is a validation error that costs an attempt, no execution."""
    sim = {
        "patent_db": SimToolSpec(
            params={"since": ParamSpec(type="string", pattern="^[0-9]{4}-(0[1-9]|1[0-2])-")},
            responses=[ResponseSpec(ok={"results": ["p1"]})],
        )
    }
    step = CallStep(
        call="patent_db", args={"since": "2024-13-01"}, on_validation={"since": "2024-12-01"}
    )
    result, tools = await _run(_spec([step], ["patent_db"]), sim)
    assert result.escalation is None
    assert tools.executions[("sub", "patent_db")] == 1
    assert result.attempts == 2


@pytest.mark.parametrize(
    ("on_validation", "executed"),
    [
        pytest.param(None, 1, id="no-correction"),
        pytest.param({"since": "2024-13-01"}, 1, id="correction-changes-nothing"),
        pytest.param({"since": "2024-12-01"}, 2, id="corrected-call-fails-again"),
    ],
)
async def test_a_validation_error_without_progress_escalates(
    on_validation: dict[str, Any] | None, executed: int
) -> None:
    """A repeated input is not sent again: the subagent escalates no_progress naming the field."""
    sim = {
        "patent_db": SimToolSpec(
            responses=[ResponseSpec(error="validation", field="since", expected="YYYY-MM-DD")],
            params={"since": ParamSpec(type="string")},
        )
    }
    step = CallStep(call="patent_db", args={"since": "2024-13-01"}, on_validation=on_validation)
    result, tools = await _run(_spec([step], ["patent_db"]), sim)
    assert tools.executions[("sub", "patent_db")] == executed
    assert result.attempts == result.steps == executed
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.trigger, esc.field) == ("validation", "no_progress", "since")
    assert any("since" in a and "YYYY-MM-DD" in a for a in esc.alternatives)


@pytest.mark.parametrize(
    ("response", "trigger"),
    [
        pytest.param(
            ResponseSpec(error="business", rule="max_results", limit=100, requested=500),
            "threshold_breach",
            id="limit",
        ),
        pytest.param(
            ResponseSpec(error="business", rule="embargo", message="embargoed until 2027"),
            "business_rule",
            id="rule",
        ),
    ],
)
async def test_a_business_error_escalates_without_retry(
    response: ResponseSpec, trigger: str
) -> None:
    """A business rule is never retried: threshold_breach with a limit, else business_rule."""
    sim = {"orders": SimToolSpec(responses=[response])}
    result, tools = await _run(_spec([CallStep(call="orders")], ["orders"]), sim)
    assert tools.executions[("sub", "orders")] == 1
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.trigger) == ("business", trigger)
    rule = response.rule or ""
    assert esc.alternatives and all(rule in a for a in esc.alternatives)


async def test_exhausted_retries_escalate_with_the_findings_so_far() -> None:
    """A transient failure past max_attempts escalates retries_exhausted with earlier findings."""
    sim = {
        "web_search": SimToolSpec(responses=[OK]),
        "news": SimToolSpec(responses=[ResponseSpec(error="unavailable")], latency_s=1),
    }
    plan: list[PlanStep] = [CallStep(call="web_search"), CallStep(call="news", args={})]
    result, tools = await _run(_spec(plan, ["web_search", "news"]), sim)
    assert tools.executions[("sub", "news")] == 3
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.trigger, esc.retryable) == ("transient", "retries_exhausted", True)
    assert [f.tool for f in esc.partial_results] == ["web_search"]
    assert esc.attempts == result.attempts == 4
    assert esc.tool == "news" and esc.step == 1
    assert any("news" in a for a in esc.alternatives)


async def test_a_tool_that_raises_a_bug_is_an_internal_escalation() -> None:
    """A tool body raising KeyError becomes an internal escalation naming the tool."""

    known: dict[str, dict[str, Any]] = {}

    async def lookup(key: str) -> dict[str, Any]:
        return known[key]

    spec = _spec([CallStep(call="lookup", args={"key": "x"})], ["lookup"])
    run = SubagentRun.for_subtask(spec)
    result = await run_subagent(
        run, {"lookup": Tool.from_function(lookup)}, clock=AnyioClock(), trace_ids=SeededTraceIds(0)
    )
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.error_type, esc.trigger) == ("internal", "KeyError", "internal_error")
    assert result.attempts == 1
    assert any("lookup" in a for a in esc.alternatives)


async def test_the_step_budget_stops_the_next_call() -> None:
    """With max_steps 2 a third call is not made: the subagent escalates step_budget."""
    sim = {"web_search": SimToolSpec(responses=[OK])}
    plan: list[PlanStep] = [CallStep(call="web_search")] * 3
    result, tools = await _run(_spec(plan, ["web_search"], max_steps=2), sim)
    assert tools.executions[("sub", "web_search")] == 2
    assert result.steps == 2
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.trigger) == (None, "step_budget")
    assert len(esc.partial_results) == 2
    assert any("max_steps" in a for a in esc.alternatives)


async def test_partial_data_is_kept_and_the_plan_goes_on() -> None:
    """A result with complete: false is a finding; the next steps still run."""
    sim = {
        "news": SimToolSpec(responses=[ResponseSpec(partial={"results": ["page 1"]})]),
        "web_search": SimToolSpec(responses=[OK]),
    }
    plan: list[PlanStep] = [CallStep(call="news"), CallStep(call="web_search")]
    result, _ = await _run(_spec(plan, ["news", "web_search"]), sim)
    assert result.escalation is None
    assert result.incomplete
    assert [(f.tool, f.complete) for f in result.findings] == [
        ("news", False),
        ("web_search", True),
    ]


async def test_a_timeout_with_an_unknown_side_effect_is_not_retried() -> None:
    """A non-idempotent tool with side effects that times out escalates unknown_state at once."""
    sim = {"book": SimToolSpec(side_effects=True, responses=[ResponseSpec(error="timeout")])}
    result, tools = await _run(_spec([CallStep(call="book")], ["book"], tool_timeout_s=5), sim)
    assert tools.executions[("sub", "book")] == 1
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.trigger, esc.retryable) == ("transient", "unknown_state", False)
    assert any("idempotency key" in a and "book" in a for a in esc.alternatives)


async def test_finish_and_escalate_steps_end_the_subagent() -> None:
    """finish with text is a finding and ends the plan; escalate hands the subtask up."""
    finished, _ = await _run(
        _spec([FinishStep(finish="no data exists"), CallStep(call="x")], []), {}
    )
    assert finished.escalation is None
    assert [(f.tool, f.data) for f in finished.findings] == [("finish", "no data exists")]
    asked, _ = await _run(_spec([EscalateStep(escalate="human_request")], []), {})
    assert asked.escalation is not None
    assert (asked.escalation.category, asked.escalation.trigger) == (None, "human_request")
    assert asked.attempts == 0


async def test_compaction_lets_a_long_subagent_finish() -> None:
    """Twelve large results in a small window are compacted along the way and all kept."""
    big = ResponseSpec(ok={"results": [" ".join(["lithium"] * 280)]})
    sim = {"web_search": SimToolSpec(responses=[big])}
    spec = _spec(
        [CallStep(call="web_search")] * 12,
        ["web_search"],
        max_steps=12,
        context_window=3000,
        active_tool_budget=400,
    )
    result, _ = await _run(spec, sim)
    assert result.escalation is None
    assert len(result.findings) == 12
    assert result.compactions > 0


@pytest.mark.parametrize(
    ("query", "window", "budget"),
    [
        pytest.param("q", 10, 8000, id="tool-budget-larger-than-window"),
        pytest.param("battery " * 300, 200, 10, id="query-longer-than-window"),
    ],
)
async def test_a_window_with_no_margin_stops_before_the_first_call(
    query: str, window: int, budget: int
) -> None:
    """When compaction cannot restore the margin no call is made: trigger context_budget."""
    sim = {"web_search": SimToolSpec(responses=[OK])}
    spec = SubtaskSpec(
        id="sub",
        query=query,
        tools=["web_search"],
        plan=[CallStep(call="web_search")],
        context_window=window,
        active_tool_budget=budget,
    )
    result, tools = await _run(spec, sim)
    assert tools.executions[("sub", "web_search")] == 0
    assert result.attempts == result.steps == 0
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.trigger) == (None, "context_budget")
    assert any("context_window" in a for a in esc.alternatives)


async def test_a_cancelled_subagent_keeps_its_findings_in_its_run() -> None:
    """Cancelling a subagent mid-call leaves its findings and the attempt under way on the run."""
    clock = AnyioClock()
    sim = {
        "web_search": SimToolSpec(responses=[OK], latency_s=1),
        "slow": SimToolSpec(responses=[OK], latency_s=100),
    }
    tools = SimulatedTools(sim, clock)
    spec = _spec(
        [CallStep(call="web_search"), CallStep(call="slow")],
        ["web_search", "slow"],
        tool_timeout_s=1000,
    )
    run = SubagentRun.for_subtask(spec)
    with anyio.move_on_after(10):
        await run_subagent(run, tools.for_subtask("sub"), clock=clock)
    assert not run.finished
    assert [f.tool for f in run.findings] == ["web_search"]
    assert run.attempts == 2
    assert run.in_flight is not None and run.in_flight.tool == "slow"


async def test_resuming_continues_at_the_failed_step() -> None:
    """Running the same run again resumes at the failed step, keeping findings and steps."""
    clock = AnyioClock()
    sim = {
        "web_search": SimToolSpec(responses=[OK]),
        "news": SimToolSpec(
            responses=[ResponseSpec(error="unavailable")] * 3 + [ResponseSpec(ok=["n1"])]
        ),
    }
    tools = SimulatedTools(sim, clock)
    spec = _spec([CallStep(call="web_search"), CallStep(call="news")], ["web_search", "news"])
    run = SubagentRun.for_subtask(spec)
    first = await run_subagent(run, tools.for_subtask("sub"), clock=clock)
    assert first.escalation is not None and first.escalation.trigger == "retries_exhausted"
    second = await run_subagent(run, tools.for_subtask("sub"), clock=clock)
    assert second.escalation is None
    assert [f.tool for f in second.findings] == ["web_search", "news"]
    assert tools.executions[("sub", "web_search")] == 1
    assert (second.rounds, second.steps, second.attempts) == (2, 3, 5)


class GivingUpPlanner:
    """A planner that makes one call and, whatever comes back, proposes ``then``."""

    def __init__(self, then: Action | None) -> None:
        self.then = then

    async def next_action(self, last: Observation | None, env: PlanEnv) -> Action | None:
        return CallAction("patent_db", {"since": "2024-13-01"}) if last is None else self.then


@pytest.mark.parametrize(
    ("then", "findings"),
    [
        pytest.param(None, 0, id="nothing-more"),
        pytest.param(FinishAction(""), 0, id="finish"),
        pytest.param(FinishAction("patents: unknown"), 1, id="finish-with-text"),
    ],
)
async def test_a_planner_that_drops_a_validation_error_escalates_no_progress(
    then: Action | None, findings: int
) -> None:
    """Giving up on a refused call is no correction: no_progress, never a silent empty result."""
    sim = {
        "patent_db": SimToolSpec(
            params={"since": ParamSpec(type="string")},
            responses=[ResponseSpec(error="validation", field="since", expected="YYYY-MM-DD")],
        )
    }
    spec = _spec([], ["patent_db"])
    clock = AnyioClock()
    tools = SimulatedTools(sim, clock)
    run = SubagentRun(
        spec=spec,
        planner=GivingUpPlanner(then),
        context=Context(spec.query, window=16000, active_tool_budget=2000),
        rng=random.Random(0),
    )
    result = await run_subagent(run, tools.for_subtask("sub"), clock=clock)
    esc = result.escalation
    assert esc is not None
    assert (esc.category, esc.trigger, esc.field) == ("validation", "no_progress", "since")
    assert len(result.findings) == findings
    assert tools.executions[("sub", "patent_db")] == 1
