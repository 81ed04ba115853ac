"""The coordinator: isolated fan-out, routing, retry round, deadline, capacity, coverage."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.fanout import run_job
from coordinator.job import JobSpec
from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.report import CoverageReport, Gap, SubtaskOutcome
from coordinator.routing import RecordingHandler
from shared import AnyioClock, SeededTraceIds
from subagents import RetryPolicy, Tool
from subagents.planners import Action, Observation, PlanEnv, Planner, ScriptedPlanner
from subagents.result import ProgressEvent
from subagents.simulated.spec import ParamSpec, ResponseSpec, SimToolSpec
from subagents.simulated.tools import SimulatedTools
from subagents.spec import CallStep, PlanStep, SubtaskSpec
from subagents.toolsource import StaticTools

REVIEW_PLAN = Path(__file__).parent / "data" / "review_plan.yaml"

pytestmark = pytest.mark.anyio

NO_JITTER = RetryPolicy(jitter="none", max_attempts=3)
OK = ResponseSpec(ok={"results": ["QuantumScape ships B-samples"]})
DOWN = ResponseSpec(error="unavailable")


def _sub(id: str, *calls: str, tools: list[str] | None = None, **settings: Any) -> SubtaskSpec:
    """A subtask calling each of ``calls`` once, with those tools allowed by default."""
    settings.setdefault("retry", NO_JITTER)
    settings.setdefault("query", f"{id} of solid-state batteries")
    plan: list[PlanStep] = [CallStep(call=c) for c in calls]
    return SubtaskSpec(
        id=id,
        tools=list(calls) if tools is None else tools,
        plan=settings.pop("plan", plan),
        **settings,
    )


async def _run(
    subtasks: list[SubtaskSpec],
    sim: Mapping[str, SimToolSpec],
    events: list[ProgressEvent] | None = None,
    **job_fields: Any,
) -> tuple[CoverageReport, SimulatedTools]:
    clock = AnyioClock()
    tools = SimulatedTools(sim, clock)
    job = JobSpec(query="State of solid-state batteries", subtasks=subtasks, **job_fields)
    report = await run_job(
        job,
        tools,
        clock=clock,
        trace_ids=SeededTraceIds(7),
        observer=None if events is None else events.append,
    )
    return report, tools


def _status(report: CoverageReport) -> dict[str, SubtaskOutcome]:
    return {s.id: s for s in report.subtasks}


def _gaps(report: CoverageReport) -> dict[str, Gap]:
    return {g.subtask_id: g for g in report.gaps}


def _terminal_times(events: list[ProgressEvent]) -> dict[str, list[float]]:
    """When each subtask reached done or escalated, in order."""
    out: dict[str, list[float]] = {}
    for e in events:
        if e.kind == "state" and e.state in ("done", "escalated"):
            out.setdefault(e.subtask_id, []).append(e.at)
    return out


# (tool, its simulation, subtask settings, (category, trigger, route, a word an alternative names))
NINE_FAILURES: list[tuple[str, SimToolSpec, dict[str, Any], tuple[Any, str, str, str]]] = [
    (
        "patents",
        SimToolSpec(responses=[ResponseSpec(error="permission", message="lacks patents:read")]),
        {},
        ("permission", "permission_denied", "escalate", "patents"),
    ),
    (
        "orders",
        SimToolSpec(
            responses=[ResponseSpec(error="business", rule="max_rows", limit=100, requested=500)]
        ),
        {},
        ("business", "threshold_breach", "escalate", "max_rows"),
    ),
    (
        "filings",
        SimToolSpec(
            responses=[ResponseSpec(error="business", rule="embargo", message="until 2027")]
        ),
        {},
        ("business", "business_rule", "escalate", "embargo"),
    ),
    (
        "dates",
        SimToolSpec(
            params={"since": ParamSpec(type="string")},
            responses=[ResponseSpec(error="validation", field="since", expected="YYYY-MM-DD")],
        ),
        {"plan": [CallStep(call="dates", args={"since": "2024-13"})]},
        ("validation", "no_progress", "gap", "since"),
    ),
    (
        "news",
        SimToolSpec(responses=[DOWN], latency_s=0.5),
        {},
        ("transient", "retries_exhausted", "retry_later", "news"),
    ),
    (
        "ledger",
        SimToolSpec(responses=[ResponseSpec(error="crash")]),
        {},
        ("internal", "internal_error", "escalate", "ledger"),
    ),
    (
        "archive",
        SimToolSpec(responses=[ResponseSpec(error="timeout")]),
        {"tool_timeout_s": 5},
        ("transient", "retries_exhausted", "retry_later", "archive"),
    ),
    (
        "booking",
        SimToolSpec(side_effects=True, responses=[ResponseSpec(error="timeout")]),
        {"tool_timeout_s": 5},
        ("transient", "unknown_state", "escalate", "booking"),
    ),
    (
        "secret",
        SimToolSpec(responses=[OK]),
        {"tools": ["news"]},
        ("permission", "permission_denied", "escalate", "secret"),
    ),
]


async def test_nine_failures_of_ten_still_give_an_answer() -> None:
    """One covered section and nine explicit gaps, each routed on its category and actionable."""
    sim = {"web_search": SimToolSpec(responses=[OK], latency_s=1)}
    subtasks = [_sub("market", "web_search")]
    for tool, spec, settings, _ in NINE_FAILURES:
        sim[tool] = spec
        subtasks.append(_sub(f"sub_{tool}", tool, **settings))
    report, _ = await _run(subtasks, sim)

    assert report.outcome == "partial"
    assert report.coverage == pytest.approx(0.1)
    gaps = _gaps(report)
    assert len(report.gaps) == 9 and "market" not in gaps
    for tool, _, _, (category, trigger, route, mention) in NINE_FAILURES:
        gap = gaps[f"sub_{tool}"]
        assert (gap.category, gap.trigger, gap.route) == (category, trigger, route), tool
        assert gap.alternatives, tool
        assert all(a.strip() for a in gap.alternatives), tool
        assert any(mention in a for a in gap.alternatives), (tool, gap.alternatives)
        assert gap.attempted_query.startswith(f"sub_{tool} of solid-state batteries")
    answer = report.answer
    assert len(answer.sections) == 10
    assert [s.subtask_id for s in answer.sections if s.covered] == ["market"]
    assert answer.sections[0].findings[0].data == {"results": ["QuantumScape ships B-samples"]}
    assert len(answer.missing) == 9
    assert all(s.gap for s in answer.sections[1:])
    escalated = [f"sub_{t}" for t, _, _, expected in NINE_FAILURES if expected[2] == "escalate"]
    assert [e.subtask_id for e in report.escalations] == escalated


class BrokenPlanner:
    """A planner with a bug: it raises after its first call came back."""

    def __init__(self, spec: SubtaskSpec) -> None:
        self.inner = ScriptedPlanner(list(spec.plan))

    async def next_action(self, last: Observation | None, env: PlanEnv) -> Action | None:
        if last is not None:
            raise RuntimeError("planner bug: lost track of the plan")
        return await self.inner.next_action(last, env)


async def test_a_planner_bug_leaves_its_siblings_untouched() -> None:
    """A subagent whose planner raises is an internal gap; every sibling still completes."""
    sim = {"web_search": SimToolSpec(responses=[OK], latency_s=3)}
    subtasks = [_sub(f"s{i}", "web_search", "web_search") for i in range(4)]

    def planners(spec: SubtaskSpec) -> Planner:
        return BrokenPlanner(spec) if spec.id == "s1" else ScriptedPlanner(list(spec.plan))

    clock = AnyioClock()
    handler = RecordingHandler()
    events: list[ProgressEvent] = []
    report = await run_job(
        JobSpec(query="q", subtasks=subtasks),
        SimulatedTools(sim, clock),
        clock=clock,
        planner_factory=planners,
        handler=handler,
        observer=events.append,
    )
    status = _status(report)
    assert [status[f"s{i}"].status for i in (0, 2, 3)] == ["complete"] * 3
    assert all(status[f"s{i}"].findings == 2 for i in (0, 2, 3))
    assert status["s1"].status == "partial"  # the finding made before the bug is kept
    gap = _gaps(report)["s1"]
    assert (gap.category, gap.trigger, gap.route) == ("internal", "internal_error", "escalate")
    assert len(gap.partial_results) == 1
    assert any("planner bug" in a for a in gap.alternatives)
    assert [e.subtask_id for e in handler.received] == ["s1"]
    # A live display hears the crashed subagent end like any other.
    assert set(_terminal_times(events)) == {"s0", "s1", "s2", "s3"}


async def test_a_tool_that_raises_a_bug_is_escalated_and_siblings_complete() -> None:
    """A tool body raising KeyError is an internal escalation; other subtasks are unaffected."""

    known = {"known": 1}

    async def lookup(key: str) -> int:
        return known[key]

    async def search(query: str) -> list[str]:
        return [f"result for {query}"]

    tools = StaticTools([Tool.from_function(lookup), Tool.from_function(search)])
    subtasks = [
        _sub("a", plan=[CallStep(call="search", args={"query": "a"})], tools=["search"]),
        _sub("b", plan=[CallStep(call="lookup", args={"key": "missing"})], tools=["lookup"]),
        _sub("c", plan=[CallStep(call="search", args={"query": "c"})], tools=["search"]),
    ]
    report = await run_job(JobSpec(query="q", subtasks=subtasks), tools, clock=AnyioClock())
    status = _status(report)
    assert (status["a"].status, status["b"].status, status["c"].status) == (
        "complete",
        "gap",
        "complete",
    )
    gap = _gaps(report)["b"]
    assert (gap.category, gap.trigger, gap.route) == ("internal", "internal_error", "escalate")
    assert "KeyError" in gap.message
    assert [e.subtask_id for e in report.escalations] == ["b"]


async def test_empty_is_covered_and_unreachable_is_a_gap() -> None:
    """A valid empty result covers its subtask; a source that cannot be reached does not."""
    sim = {
        "registry": SimToolSpec(responses=[ResponseSpec(empty=True)]),
        "news": SimToolSpec(responses=[DOWN]),
        "archive": SimToolSpec(responses=[ResponseSpec(error="timeout")]),
    }
    report, _ = await _run(
        [
            _sub("empty", "registry"),
            _sub("down", "news"),
            _sub("slow", "archive", tool_timeout_s=2),
        ],
        sim,
    )
    status = _status(report)
    assert status["empty"].status == "empty" and status["empty"].findings == 1
    assert report.answer.sections[0].covered
    assert status["down"].status == status["slow"].status == "gap"
    gaps = _gaps(report)
    assert set(gaps) == {"down", "slow"}
    assert {(g.category, g.trigger) for g in gaps.values()} == {("transient", "retries_exhausted")}
    assert report.coverage == pytest.approx(1 / 3)
    assert report.outcome == "partial"


async def test_a_job_of_empty_answers_is_complete() -> None:
    """Empty subtasks are answered: coverage 1, outcome complete, no gaps."""
    sim = {"registry": SimToolSpec(responses=[ResponseSpec(empty=True)])}
    report, _ = await _run([_sub("a", "registry"), _sub("b", "registry")], sim)
    assert (report.outcome, report.coverage, report.gaps) == ("complete", 1.0, [])


async def test_a_job_where_nothing_is_found_has_failed() -> None:
    """With no findings anywhere and coverage 0 the outcome is failed, still with every gap."""
    sim = {"patents": SimToolSpec(responses=[ResponseSpec(error="permission")])}
    report, _ = await _run([_sub("a", "patents"), _sub("b", "patents")], sim)
    assert (report.outcome, report.coverage) == ("failed", 0.0)
    assert [g.subtask_id for g in report.gaps] == ["a", "b"]


async def test_a_permission_error_is_attempted_once_and_escalated() -> None:
    """The denied tool runs once, is not retried in any round, and reaches the handler."""
    sim = {
        "patents": SimToolSpec(responses=[ResponseSpec(error="permission", scope="patents:read")])
    }
    report, tools = await _run([_sub("p", "patents")], sim)
    assert tools.executions[("p", "patents")] == 1
    assert (_status(report)["p"].attempts, _status(report)["p"].rounds) == (1, 1)
    assert [(e.subtask_id, e.trigger) for e in report.escalations] == [("p", "permission_denied")]
    assert any("patents:read" in a for a in report.gaps[0].alternatives)


async def test_validation_is_corrected_once_and_a_repeat_is_no_progress() -> None:
    """A correction that works completes the subtask; one that fails again is not resent."""
    rejecting = SimToolSpec(
        params={"since": ParamSpec(type="string")},
        responses=[ResponseSpec(ok={"results": ["p"]})],
        when=[
            {"match": {"since": "2024-13-01"}, "responses": [ResponseSpec(error="validation")]},
            {"match": {"since": "1999-12-01"}, "responses": [ResponseSpec(error="validation")]},
        ],
    )
    fixed = [
        CallStep(call="db", args={"since": "2024-13-01"}, on_validation={"since": "2024-12-01"})
    ]
    still = [
        CallStep(call="db", args={"since": "2024-13-01"}, on_validation={"since": "1999-12-01"})
    ]
    report, tools = await _run(
        [_sub("fixed", "db", plan=fixed), _sub("still", "db", plan=still)], {"db": rejecting}
    )
    status = _status(report)
    assert status["fixed"].status == "complete"
    assert tools.executions[("fixed", "db")] == 2
    assert status["still"].status == "gap"
    assert tools.executions[("still", "db")] == 2  # the third, unchanged call is not sent
    gap = _gaps(report)["still"]
    assert (gap.category, gap.trigger, gap.route) == ("validation", "no_progress", "gap")
    assert report.escalations == []


async def test_the_retry_round_resumes_at_the_failed_step_after_the_first_round() -> None:
    """A retried subtask keeps its first step's findings and starts again only after round one."""
    sim = {
        "a": SimToolSpec(responses=[ResponseSpec(ok={"results": ["from a"]})]),
        "b": SimToolSpec(responses=[DOWN] * 3 + [ResponseSpec(ok={"results": ["from b"]})]),
        "slow": SimToolSpec(responses=[OK], latency_s=20),
        "news": SimToolSpec(responses=[DOWN]),
    }
    events: list[ProgressEvent] = []
    report, tools = await _run(
        [_sub("resumed", "a", "b"), _sub("sibling", "slow"), _sub("again", "news")], sim, events
    )
    status = _status(report)
    resumed = status["resumed"]
    assert (resumed.status, resumed.rounds, resumed.steps, resumed.attempts) == (
        "complete",
        2,
        3,
        5,
    )
    section = report.answer.sections[0]
    assert [f.data for f in section.findings] == [{"results": ["from a"]}, {"results": ["from b"]}]
    assert tools.executions[("resumed", "a")] == 1
    assert tools.executions[("resumed", "b")] == 4

    first_round_end = max(times[0] for times in _terminal_times(events).values())
    b_starts = [e.at for e in events if e.subtask_id == "resumed" and e.kind == "start"][1:]
    assert len(b_starts) == 4
    sibling_end = status["sibling"].ended_s
    assert sibling_end is not None
    assert max(b_starts[:3]) < sibling_end == first_round_end
    assert b_starts[3] >= first_round_end

    again = status["again"]
    assert (again.status, again.rounds) == ("gap", 2)
    gap = _gaps(report)["again"]
    assert (gap.trigger, gap.route) == ("retries_exhausted", "retry_later")


async def test_a_side_effect_in_an_unknown_state_is_never_retried() -> None:
    """A timed-out non-idempotent booking escalates unknown_state and skips the retry round."""
    sim = {"book": SimToolSpec(side_effects=True, responses=[ResponseSpec(error="timeout")])}
    report, tools = await _run([_sub("booking", "book", tool_timeout_s=5)], sim)
    assert tools.executions[("booking", "book")] == 1
    outcome = _status(report)["booking"]
    assert (outcome.rounds, outcome.attempts) == (1, 1)
    gap = report.gaps[0]
    assert (gap.category, gap.trigger, gap.route) == ("transient", "unknown_state", "escalate")
    assert [e.subtask_id for e in report.escalations] == ["booking"]


async def test_the_deadline_cuts_running_and_queued_subagents() -> None:
    """At the deadline the running subagent hands up its findings; the queued one is a gap."""
    sim = {
        "a": SimToolSpec(responses=[OK], latency_s=1),
        "slow": SimToolSpec(responses=[OK], latency_s=100),
    }
    events: list[ProgressEvent] = []
    report, _ = await _run(
        [_sub("running", "a", "slow", tool_timeout_s=1000), _sub("queued", "a")],
        sim,
        events,
        concurrency=1,
        deadline_s=50,
    )
    assert report.elapsed_s == 50
    status, gaps = _status(report), _gaps(report)
    assert (status["running"].status, status["running"].attempts) == ("partial", 2)
    assert (gaps["running"].trigger, gaps["running"].route) == ("deadline", "gap")
    assert [f.tool for f in gaps["running"].partial_results] == ["a"]
    assert "slow" in gaps["running"].attempted_query
    assert (status["queued"].status, status["queued"].attempts) == ("gap", 0)
    assert (gaps["queued"].trigger, gaps["queued"].route) == ("deadline", "gap")
    assert report.escalations == []
    # A live display hears every cut subagent end.
    assert set(_terminal_times(events)) == {"running", "queued"}


async def test_no_retry_round_after_the_deadline() -> None:
    """A subtask routed retry_later is not retried once the deadline has passed."""
    sim = {
        "news": SimToolSpec(responses=[DOWN]),
        "slow": SimToolSpec(responses=[OK], latency_s=100),
    }
    report, tools = await _run(
        [_sub("down", "news"), _sub("slow", "slow", tool_timeout_s=1000)], sim, deadline_s=50
    )
    assert _status(report)["down"].rounds == 1
    assert tools.executions[("down", "news")] == 3
    assert (_gaps(report)["down"].route, _gaps(report)["slow"].trigger) == (
        "retry_later",
        "deadline",
    )


async def test_a_retry_round_cut_by_the_deadline_ends_as_a_deadline_gap() -> None:
    """A retry round still running at the deadline ends with trigger deadline, route gap."""
    sim = {
        "a": SimToolSpec(responses=[OK]),
        "b": SimToolSpec(responses=[DOWN] * 3 + [ResponseSpec(ok=["late"])], latency_s=10),
    }
    report, _ = await _run([_sub("r", "a", "b", tool_timeout_s=100)], sim, deadline_s=40)
    outcome, gap = _status(report)["r"], report.gaps[0]
    # a, three attempts of b in round one, and the retry round's attempt under way.
    assert (outcome.rounds, outcome.status, outcome.attempts) == (2, "partial", 5)
    assert (gap.trigger, gap.route) == ("deadline", "gap")
    assert report.elapsed_s == 40


async def test_the_capacity_limit_holds() -> None:
    """With concurrency 3 and ten subtasks, at most three subagents are ever in flight."""
    sim = {
        "a": SimToolSpec(responses=[OK], latency_s=1),
        "b": SimToolSpec(responses=[OK], latency_s=2.5),
        "flaky": SimToolSpec(responses=[DOWN, OK], latency_s=0.7),
    }
    tools = ["a", "b", "flaky"]
    subtasks = [_sub(f"s{i}", tools[i % 3], tools[(i + 1) % 3]) for i in range(10)]
    events: list[ProgressEvent] = []
    report, _ = await _run(subtasks, sim, events, concurrency=3)
    in_flight: set[str] = set()
    most = 0
    for e in events:
        if e.kind != "state":
            continue
        if e.state in ("running", "retrying"):
            in_flight.add(e.subtask_id)
        elif e.state in ("done", "escalated"):
            in_flight.discard(e.subtask_id)
        most = max(most, len(in_flight))
    assert most == 3
    assert report.outcome == "complete"


async def test_compaction_lets_a_long_subagent_finish() -> None:
    """Twelve large results in a 3000-token window complete, compacted along the way."""
    big = ResponseSpec(ok={"results": [" ".join(["lithium"] * 280)]})
    sim = {"web_search": SimToolSpec(responses=[big])}
    sub = _sub(
        "long",
        plan=[CallStep(call="web_search")] * 12,
        tools=["web_search"],
        max_steps=12,
        context_window=3000,
        active_tool_budget=400,
    )
    report, _ = await _run([sub], sim)
    outcome = _status(report)["long"]
    assert (outcome.status, outcome.findings) == ("complete", 12)
    assert outcome.compactions > 0
    assert len(report.answer.sections[0].findings) == 12


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"context_window": 10, "active_tool_budget": 8000}, id="budget-over-window"),
        pytest.param({"query": "battery " * 300, "context_window": 200}, id="query-over-window"),
    ],
)
async def test_a_window_with_no_margin_stops_before_the_first_call(
    settings: dict[str, Any],
) -> None:
    """With no room even after compaction the subtask is a context_budget gap with 0 attempts."""
    sim = {"web_search": SimToolSpec(responses=[OK])}
    report, tools = await _run([_sub("tight", "web_search", **settings)], sim)
    assert tools.executions[("tight", "web_search")] == 0
    assert (_status(report)["tight"].attempts, _status(report)["tight"].status) == (0, "gap")
    gap = report.gaps[0]
    assert (gap.category, gap.trigger, gap.route) == (None, "context_budget", "gap")


async def test_the_step_budget_is_a_gap() -> None:
    """max_steps 2 with three calls stops at two steps with a step_budget gap."""
    sim = {"web_search": SimToolSpec(responses=[OK])}
    report, _ = await _run([_sub("s", "web_search", "web_search", "web_search", max_steps=2)], sim)
    outcome, gap = _status(report)["s"], report.gaps[0]
    assert (outcome.steps, outcome.status, outcome.findings) == (2, "partial", 2)
    assert (gap.category, gap.trigger, gap.route) == (None, "step_budget", "gap")


async def test_partial_data_is_kept_and_the_plan_goes_on() -> None:
    """complete: false keeps the finding, runs the next steps, and leaves an incomplete_data gap."""
    sim = {
        "news": SimToolSpec(responses=[ResponseSpec(partial={"results": ["page 1 of 3"]})]),
        "web_search": SimToolSpec(responses=[OK]),
    }
    report, _ = await _run([_sub("p", "news", "web_search")], sim)
    outcome, gap = _status(report)["p"], report.gaps[0]
    assert (outcome.status, outcome.findings) == ("partial", 2)
    assert (gap.category, gap.trigger, gap.route) == (None, "incomplete_data", "gap")
    assert [f.complete for f in gap.partial_results] == [False, True]
    assert any("news" in a for a in gap.alternatives)
    assert report.coverage == 0.0 and report.outcome == "partial"


async def test_an_escalation_takes_precedence_over_incomplete_data() -> None:
    """A subtask with partial data that then hits a permission error shows the escalation."""
    sim = {
        "news": SimToolSpec(responses=[ResponseSpec(partial=["page 1"])]),
        "patents": SimToolSpec(responses=[ResponseSpec(error="permission")]),
    }
    report, _ = await _run([_sub("p", "news", "patents")], sim)
    assert [(g.subtask_id, g.trigger) for g in report.gaps] == [("p", "permission_denied")]


@pytest.mark.parametrize(
    ("routing", "route", "trigger", "rounds"),
    [
        pytest.param({}, "retry_later", "retries_exhausted", 2, id="default"),
        pytest.param({"transient": "gap"}, "gap", "retries_exhausted", 1, id="override"),
        pytest.param({"transient": None}, "escalate", "missing_policy", 1, id="removed"),
    ],
)
async def test_routing_overrides_apply_to_the_job(
    routing: dict[str, Any], route: str, trigger: str, rounds: int
) -> None:
    """A job's routing overrides decide the route; a removed route escalates missing_policy."""
    report, _ = await _run(
        [_sub("down", "news")], {"news": SimToolSpec(responses=[DOWN])}, routing=routing
    )
    gap = report.gaps[0]
    assert (gap.category, gap.route, gap.trigger) == ("transient", route, trigger)
    assert _status(report)["down"].rounds == rounds
    assert len(report.escalations) == (route == "escalate")


async def test_the_same_job_twice_gives_the_same_report() -> None:
    """Seeded jitter and trace ids make two runs of one job produce identical reports."""
    sim = {
        "news": SimToolSpec(responses=[DOWN, DOWN, OK], latency_s=0.3),
        "archive": SimToolSpec(responses=[ResponseSpec(error="timeout")]),
        "patents": SimToolSpec(responses=[ResponseSpec(error="permission")]),
        "web_search": SimToolSpec(responses=[OK], latency_s=1.2),
    }
    full = RetryPolicy(jitter="full", max_attempts=4)
    subtasks = [
        _sub("market", "web_search", "news", retry=full),
        _sub("archive", "web_search", "archive", retry=full, tool_timeout_s=3),
        _sub("patents", "patents", retry=full),
        _sub("more", "news", "news", retry=full),
    ]
    job = JobSpec(query="q", subtasks=subtasks, concurrency=2)

    async def once() -> str:
        clock = AnyioClock()
        report = await run_job(
            job, SimulatedTools(sim, clock), clock=clock, seed=11, trace_ids=SeededTraceIds(11)
        )
        return json.dumps(report.to_wire(), sort_keys=True)

    first = await once()
    second = await once()
    assert first == second
    assert json.loads(first)["elapsed_s"] > 0


def test_a_plan_waiting_for_review_is_approved_by_timeout_at_the_deadline(
    tmp_path: Path,
) -> None:
    """A plan nobody reviews waits wait_s (600 s) but never past the job's deadline
    (20 s): it is approved by timeout then, as on Temporal, and the cut subtasks are
    deadline gaps; the job does not run on to 600 s (docs/design.md §17)."""
    spec = yaml.safe_load(REVIEW_PLAN.read_text(encoding="utf-8"))
    spec["job"].update({"review_plan": True, "deadline_s": 20,
                        "escalations": {"wait_s": 600, "on_timeout": "accept"}})
    spec["people"] = [{"after_s": 1000, "review_plan": "reject"}]  # comes too late
    path = tmp_path / "review_plan.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    report = replay(load_scenario(path)).report
    assert [(g["subtask_id"], g["trigger"]) for g in report["gaps"]] == [
        ("market", "deadline"), ("patents", "deadline")]
    assert report["elapsed_s"] < 600  # (20 s, and the lead's answer after it)
