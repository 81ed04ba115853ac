"""The calls of one model turn run together: time, order, side effects, gate, retries, resume."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from shared import AnyioClock, SeededTraceIds
from subagents.checkpoint import restore_run, snapshot_run
from subagents.context import Context
from subagents.loop import run_subagent
from subagents.models.base import ModelRequest, ModelTurn, ToolCall, ToolResultMessage
from subagents.models.spec import ModelSpec
from subagents.planners.model import ModelPlanner
from subagents.result import ProgressEvent, SubagentResult
from subagents.retry import RetryPolicy
from subagents.run import SubagentRun, cut_by_deadline
from subagents.simulated.spec import ParamSpec, ResponseSpec, SimToolSpec
from subagents.simulated.tools import SimulatedTools
from subagents.spec import SubtaskSpec
from subagents.turns.batch import room_for
from tests.subagents.planners.test_model import FunctionModel

pytestmark = pytest.mark.anyio

MODEL = ModelSpec(provider="scripted", retry=RetryPolicy(max_attempts=3, jitter="none"))
QUERY = {"query": ParamSpec(type="string")}


def _search(latency: float = 1.0, responses: list[ResponseSpec] | None = None,
            **kw: Any) -> SimToolSpec:
    return SimToolSpec(
        params=QUERY,
        latency_s=latency,
        responses=responses or [ResponseSpec(ok={"results": ["found"]})],
        **kw,
    )


def _turn(*calls: tuple[str, str]) -> ModelTurn:
    return ModelTurn(
        calls=tuple(ToolCall(f"c{i}", tool, {"query": q}) for i, (tool, q) in enumerate(calls)),
        stop_reason="tool_use",
    )


def _scripted(*turns: ModelTurn) -> FunctionModel:
    return FunctionModel(
        lambda request, n: turns[n - 1] if n <= len(turns) else ModelTurn(text="done")
    )


def _spec(tools: list[str], **settings: Any) -> SubtaskSpec:
    return SubtaskSpec(id="s", query="sodium-ion cells", tools=tools, planner="model", **settings)


async def _run(
    client: FunctionModel,
    sim: dict[str, SimToolSpec],
    spec: SubtaskSpec,
    events: list[ProgressEvent] | None = None,
    saved: list[dict[str, Any]] | None = None,
) -> tuple[SubagentResult, float, SubagentRun]:
    clock = AnyioClock()
    tools = SimulatedTools(sim, clock)
    run = SubagentRun.for_subtask(spec, seed=7, planner=ModelPlanner(client, MODEL, spec.id))
    start = clock.now()
    result = await run_subagent(
        run,
        tools.for_subtask(spec.id),
        clock=clock,
        trace_ids=SeededTraceIds(0),
        observer=None if events is None else events.append,
        checkpoint=None
        if saved is None
        else lambda r: saved.append(json.loads(json.dumps(snapshot_run(r)))),
    )
    return result, clock.now() - start, run


def _results(request: ModelRequest) -> list[ToolResultMessage]:
    return [m for m in request.messages if isinstance(m, ToolResultMessage)]


THREE = _turn(("web", "cost"), ("web", "cold"), ("web", "cycles"))


@pytest.mark.parametrize(
    ("parallel", "elapsed"),
    [pytest.param(4, 1.0, id="together"), pytest.param(1, 3.0, id="one-by-one")],
)
async def test_three_one_second_calls_of_one_turn_take_one_second(
    parallel: int, elapsed: float
) -> None:
    """Three 1 s calls of one turn take 1 s together, 3 s with parallel_calls 1."""
    client = _scripted(THREE)
    result, took, _ = await _run(
        client, {"web": _search()}, _spec(["web"], parallel_calls=parallel)
    )
    assert took == pytest.approx(elapsed)
    assert result.steps == 3 and result.escalation is None
    assert [m.call_id for m in _results(client.requests[1])] == ["c0", "c1", "c2"]


async def test_results_go_back_in_the_order_asked_whatever_finishes_first() -> None:
    """The slowest call first: its result still comes first, in findings and transcript."""
    sim = {"slow": _search(3.0), "fast": _search(0.5)}
    client = _scripted(_turn(("slow", "a"), ("fast", "b"), ("fast", "c")))
    result, took, _ = await _run(client, sim, _spec(["slow", "fast"]))
    assert took == pytest.approx(3.0)
    assert [f.tool for f in result.findings[:3]] == ["slow", "fast", "fast"]
    assert [m.name for m in _results(client.requests[1])] == ["slow", "fast", "fast"]


@pytest.mark.parametrize(
    ("calls", "elapsed"),
    [
        pytest.param((("read", "a"), ("write", "b"), ("read", "c")), 3.0, id="write-between"),
        pytest.param((("write", "a"), ("read", "b"), ("read", "c")), 2.0, id="write-first"),
        pytest.param((("read", "a"), ("read", "b"), ("write", "c")), 2.0, id="write-last"),
    ],
)
async def test_a_tool_with_side_effects_runs_alone(
    calls: tuple[tuple[str, str], ...], elapsed: float
) -> None:
    """A call with side effects never overlaps another; the reads around it run together."""
    sim = {"read": _search(), "write": _search(side_effects=True)}
    events: list[ProgressEvent] = []
    result, took, _ = await _run(_scripted(_turn(*calls)), sim, _spec(["read", "write"]),
                                 events)
    assert took == pytest.approx(elapsed)
    assert result.escalation is None
    writes = [(e.at - 1.0, e.at) for e in events if e.kind == "attempt" and e.tool == "write"]
    reads = [(e.at - 1.0, e.at) for e in events if e.kind == "attempt" and e.tool == "read"]
    for w0, w1 in writes:
        assert all(r1 <= w0 or r0 >= w1 for r0, r1 in reads)


def test_the_gate_keeps_room_for_every_call_that_starts_together() -> None:
    """The margin is calls × active tool budget; fewer calls start when not all fit."""
    probe = Context("q", window=10_000, active_tool_budget=2_000)
    probe.add_text("user", "word " * 4_000)
    # A window with room for exactly three results of 2,000 tokens beside what it holds.
    context = Context("q", window=probe.tokens + 6_000, active_tool_budget=2_000)
    context.add_text("user", "word " * 4_000)
    assert context.gate(3).decision == "continue"
    assert context.gate(4).decision == "compact_before_next_tool"
    assert context.gate(4).required_margin == 8_000
    run = SubagentRun.for_subtask(_spec(["web"]))
    run.context = context
    assert room_for(run, 4) == (3, room_for(run, 3)[1])
    assert room_for(run, 3)[0] == 3


async def test_a_turn_the_gate_cannot_fit_whole_runs_in_parts() -> None:
    """With room for two results beside the transcript (about 500 tokens), two calls run
    together, then the third."""
    spec = _spec(["web"], context_window=8000, active_tool_budget=3000)
    client = _scripted(THREE)
    result, took, _ = await _run(client, {"web": _search()}, spec)
    assert result.escalation is None and result.steps == 3
    assert took == pytest.approx(2.0)
    assert [m.call_id for m in _results(client.requests[1])] == ["c0", "c1", "c2"]


STEADY = RetryPolicy(max_attempts=3, initial_backoff_s=0.5, jitter="none")
SHARED = [
    ResponseSpec(error="rate_limited"),
    ResponseSpec(error="rate_limited"),
    ResponseSpec(error="rate_limited"),
    ResponseSpec(ok={"results": ["A"]}),
    ResponseSpec(ok={"results": ["B"]}),
    ResponseSpec(ok={"results": ["C"]}),
]


async def test_attempts_due_at_one_instant_start_in_call_order() -> None:
    """Retries due together take a tool's responses in call order, run after run."""
    seen = []
    for _ in range(4):
        events: list[ProgressEvent] = []
        result, took, _ = await _run(
            _scripted(THREE), {"web": _search(responses=SHARED)}, _spec(["web"], retry=STEADY),
            events,
        )
        assert took == pytest.approx(2.5)  # 1 s, a 0.5 s wait, 1 s
        assert [f.data for f in result.findings[:3]] == [{"results": [x]} for x in "ABC"]
        seen.append(
            [(e.kind, e.tool, e.attempt, round(e.at - events[0].at, 9), e.state) for e in events]
        )
    assert all(s == seen[0] for s in seen)


async def test_events_go_out_call_by_call() -> None:
    """A turn's events read call by call: each call's events before the next call's."""
    events: list[ProgressEvent] = []
    spec = _spec(["web"], retry=RetryPolicy(max_attempts=3, jitter="full"))
    await _run(_scripted(THREE), {"web": _search(responses=SHARED)}, spec, events)
    calls = [e for e in events if e.tool == "web"]
    order = []
    for event in calls:
        if event.kind == "call":
            order.append(event.step)
    assert order == [0, 1, 2]
    first = [e.kind for e in calls[: calls.index(next(e for e in calls if e.step == 1))]]
    assert first == ["call", "start", "attempt", "wait", "start", "attempt"]


async def test_jittered_retries_replay_the_same() -> None:
    """With full jitter, a turn's calls draw from their own streams: the same every run."""
    runs = []
    for _ in range(3):
        events: list[ProgressEvent] = []
        spec = _spec(["web"], retry=RetryPolicy(max_attempts=4, jitter="full"))
        await _run(_scripted(THREE), {"web": _search(responses=SHARED)}, spec, events)
        runs.append([(e.kind, round(e.at - events[0].at, 9), e.wait_s) for e in events])
    assert runs[0] == runs[1] == runs[2]


async def test_a_failure_ends_the_subagent_and_the_others_findings_stay() -> None:
    """The first failure in call order escalates; the calls beside it keep their findings,
    and the retry round makes only the failed call again, its result in the asked place."""
    sim = {
        "web": _search(),
        "flaky": _search(responses=[ResponseSpec(error="unavailable"),
                                    ResponseSpec(error="unavailable"),
                                    ResponseSpec(error="unavailable"),
                                    ResponseSpec(ok={"results": ["late"]})]),
    }
    client = _scripted(_turn(("web", "a"), ("flaky", "b"), ("web", "c")))
    spec = _spec(["web", "flaky"], retry=STEADY)
    clock = AnyioClock()
    tools = SimulatedTools(sim, clock)
    run = SubagentRun.for_subtask(spec, planner=ModelPlanner(client, MODEL, spec.id))
    first = await run_subagent(run, tools.for_subtask(spec.id), clock=clock,
                               trace_ids=SeededTraceIds(0))
    assert first.escalation is not None
    assert (first.escalation.trigger, first.escalation.tool) == ("retries_exhausted", "flaky")
    assert [f.args for f in first.findings] == [{"query": "a"}, {"query": "c"}]
    again = await run_subagent(run, tools.for_subtask(spec.id), clock=clock,
                               trace_ids=SeededTraceIds(0))
    assert again.escalation is None
    assert [f.args["query"] for f in again.findings if f.tool != "model"] == ["a", "c", "b"]
    assert [m.call_id for m in _results(client.requests[-1])] == ["c0", "c1", "c2"]
    assert again.steps == 4  # three calls, and the failed one made again


async def test_a_run_cut_during_a_turn_resumes_its_unfinished_calls() -> None:
    """Six calls, three at a time: resumed from the checkpoint after the first three, the
    run makes the last three, without asking the model again."""
    six = _turn(*[("web", f"q{i}") for i in range(6)])
    saved: list[dict[str, Any]] = []
    spec = _spec(["web"], parallel_calls=3)
    whole, took, _ = await _run(_scripted(six), {"web": _search()}, spec, saved=saved)
    assert took == pytest.approx(2.0)
    # A checkpoint is a consistent cut: none while calls of a batch are in flight.
    assert [len(s["findings"]) for s in saved] == [3, 6]
    again = FunctionModel(lambda request, n: ModelTurn(text="done"))
    restored = restore_run(spec, saved[0], planner=ModelPlanner(again, MODEL, spec.id))
    clock = AnyioClock()
    tools = SimulatedTools({"web": _search()}, clock)
    start = clock.now()
    result = await run_subagent(restored, tools.for_subtask(spec.id), clock=clock,
                                trace_ids=SeededTraceIds(0))
    assert clock.now() - start == pytest.approx(1.0)
    assert tools.executions[("s", "web")] == 3
    assert [f.args for f in result.findings] == [f.args for f in whole.findings]
    assert len(again.requests) == 1
    assert [m.call_id for m in _results(again.requests[0])] == [f"c{i}" for i in range(6)]


async def test_a_repeated_call_waits_for_the_first_ones_result() -> None:
    """The same call twice in a turn does not run beside itself: the repeat rules hold."""
    client = _scripted(_turn(("web", "a"), ("web", "a"), ("web", "a")))
    result, took, _ = await _run(client, {"web": _search()}, _spec(["web"]))
    assert result.escalation is not None and result.escalation.trigger == "no_progress"
    assert result.steps == 2 and took == pytest.approx(2.0)


async def test_escalate_after_calls_waits_for_them() -> None:
    """An escalate call of a turn comes after the calls before it have answered."""
    turn = ModelTurn(
        calls=(
            ToolCall("c0", "web", {"query": "a"}),
            ToolCall("c1", "web", {"query": "b"}),
            ToolCall("c2", "escalate", {"trigger": "human_request", "message": "which?"}),
        ),
        stop_reason="tool_use",
    )
    result, took, _ = await _run(_scripted(turn), {"web": _search()}, _spec(["web"]))
    assert took == pytest.approx(1.0)
    assert result.escalation is not None and result.escalation.trigger == "human_request"
    assert len(result.findings) == 2


async def test_a_turn_cut_by_the_deadline_keeps_what_its_calls_found() -> None:
    """Cut mid-turn: the call that answered is a finding, the one under way counts as an
    attempt, and the cut hands both up."""
    sim = {"fast": _search(1.0), "slow": _search(10.0)}
    client = _scripted(_turn(("fast", "a"), ("slow", "b")))
    spec = _spec(["fast", "slow"])
    clock = AnyioClock()
    tools = SimulatedTools(sim, clock)
    run = SubagentRun.for_subtask(spec, planner=ModelPlanner(client, MODEL, spec.id))
    with anyio.move_on_after(5):
        await run_subagent(run, tools.for_subtask(spec.id), clock=clock,
                           trace_ids=SeededTraceIds(0))
    escalation = cut_by_deadline(run, clock.now())
    assert [f.tool for f in run.findings] == ["fast"]
    assert run.attempts == 3  # the model call, and both tool calls' first attempts
    assert [f.tool for f in escalation.partial_results] == ["fast"]
