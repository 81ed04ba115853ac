"""The scripted model in virtual time: turns in order, failures as the table, checkpoints."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from shared import AnyioClock
from shared.classify import classify_exception
from subagents.models import (
    AssistantMessage,
    ModelCallFailed,
    ModelRequest,
    ModelSpec,
    ModelTurn,
    ScriptedModel,
    ToolCall,
    TranscriptMessage,
    UserMessage,
)

pytestmark = pytest.mark.anyio


def _model(turns: dict[str, list[dict[str, Any]]], **settings: Any) -> ScriptedModel:
    return ScriptedModel(
        ModelSpec.model_validate({"provider": "scripted", "turns": turns, **settings})
    )


def _ask(subtask: str, force_tool: str | None = None) -> ModelRequest:
    return ModelRequest(
        system="", messages=[UserMessage("q")], subtask_id=subtask, force_tool=force_tool
    )


async def test_turns_are_consumed_in_order_per_subtask() -> None:
    """Each subtask reads its own turns, calls then text, with deterministic call ids."""
    model = _model(
        {
            "market": [
                {"calls": [{"tool": "web_search", "args": {"query": "size"}}]},
                {"text": "USD 9bn by 2034.", "usage": {"input_tokens": 30, "output_tokens": 8}},
            ],
            "patents": [{"text": "none", "stop": "max_tokens"}],
        }
    )
    first = await model.complete(_ask("market"))
    other = await model.complete(_ask("patents"))
    second = await model.complete(_ask("market"))
    assert first.calls == (
        ToolCall(id="call_market_0_0", name="web_search", arguments={"query": "size"}),
    )
    assert first.stop_reason == "tool_use"
    assert (second.text, second.stop_reason) == ("USD 9bn by 2034.", "end_turn")
    assert second.usage is not None and second.usage.input_tokens == 30
    assert (other.text, other.stop_reason) == ("none", "max_tokens")


async def test_string_args_are_a_call_with_raw_arguments() -> None:
    """args that is a string stands for arguments the model did not send as an object."""
    model = _model({"s": [{"calls": [{"tool": "patent_db", "args": "{since: 2024"}]}]})
    call = (await model.complete(_ask("s"))).calls[0]
    assert (call.arguments, call.raw_arguments) == (None, "{since: 2024")


@pytest.mark.parametrize(
    ("force_tool", "name"),
    [
        pytest.param("make_plan", "make_plan", id="forced"),
        pytest.param(None, "plan_subtasks", id="default"),
    ],
)
async def test_a_subtasks_turn_calls_the_planning_tool(force_tool: str | None, name: str) -> None:
    """A lead decomposition turn is one call of the forced (or default) planning tool."""
    plan = [{"id": "market", "query": "market size", "tools": ["web_search"]}]
    model = _model({"lead": [{"subtasks": plan}]})
    turn = await model.complete(_ask("lead", force_tool))
    assert turn.calls == (ToolCall(id="call_lead_0_0", name=name, arguments={"subtasks": plan}),)


async def test_running_out_of_turns_is_a_turn_with_no_text() -> None:
    """After its last turn (or with none), a subtask gets an empty end_turn."""
    model = _model({"s": [{"text": "only"}]})
    await model.complete(_ask("s"))
    for subtask in ("s", "unknown"):
        turn = await model.complete(_ask(subtask))
        assert (turn.text, turn.calls, turn.stop_reason) == ("", (), "end_turn")


@pytest.mark.parametrize(
    ("error", "kind", "category", "retryable"),
    [
        pytest.param("overloaded", "overloaded", "transient", True, id="overloaded"),
        pytest.param("rate_limited", "rate_limited", "transient", True, id="rate-limited"),
        pytest.param("unavailable", "unavailable", "transient", True, id="unavailable"),
        pytest.param("auth", "auth", "permission", False, id="auth"),
        pytest.param("quota", "quota", "business", False, id="quota"),
        pytest.param("context_length", "context_length", "validation", False, id="context"),
        pytest.param("bad_request", "bad_request", "internal", False, id="bad-request"),
    ],
)
async def test_an_error_turn_is_one_failed_attempt(
    error: str, kind: str, category: str, retryable: bool
) -> None:
    """An error turn fails as docs/design.md §7 lists, and the next call reads the next turn."""
    model = _model({"s": [{"error": error, "retry_after_s": 2}, {"text": "recovered"}]})
    with pytest.raises(ModelCallFailed) as caught:
        await model.complete(_ask("s"))
    assert (caught.value.kind, caught.value.category) == (kind, category)
    assert caught.value.retry_after_s == 2
    assert classify_exception(caught.value).retryable is retryable
    assert (await model.complete(_ask("s"))).text == "recovered"


async def test_each_call_costs_latency_in_virtual_time() -> None:
    """A call waits latency_s of virtual time; concurrent subtasks wait side by side."""
    model = _model({"a": [{"text": "1"}], "b": [{"text": "2"}]}, latency_s=2)
    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(model.complete, _ask("a"))
        tg.start_soon(model.complete, _ask("b"))
    assert anyio.current_time() - start == pytest.approx(2)


async def test_latency_follows_the_injected_clock() -> None:
    """With a clock, latency is that clock's seconds (here ten times faster than the loop)."""
    spec = ModelSpec.model_validate(
        {"provider": "scripted", "latency_s": 10, "turns": {"s": [{"text": "x"}]}}
    )
    model = ScriptedModel(spec, clock=AnyioClock(speed=10))
    start = anyio.current_time()
    await model.complete(_ask("s"))
    assert anyio.current_time() - start == pytest.approx(1)


async def test_a_timeout_turn_is_cut_by_the_callers_deadline() -> None:
    """A timeout turn hangs for timeout_s: the caller's fail_after(timeout_s) fires first."""
    model = _model({"s": [{"error": "timeout"}, {"text": "late"}]}, latency_s=1, timeout_s=30)
    start = anyio.current_time()
    with pytest.raises(TimeoutError), anyio.fail_after(30):
        await model.complete(_ask("s"))
    assert anyio.current_time() - start == pytest.approx(30)
    assert (await model.complete(_ask("s"))).text == "late"


async def test_a_timeout_turn_without_a_deadline_fails_as_a_timeout() -> None:
    """Without a caller's deadline the timeout turn still ends, after timeout_s: never a hang."""
    model = _model({"s": [{"error": "timeout"}]}, timeout_s=30)
    start = anyio.current_time()
    with pytest.raises(ModelCallFailed) as caught:
        await model.complete(_ask("s"))
    assert (caught.value.kind, caught.value.category) == ("timeout", "transient")
    assert anyio.current_time() - start == pytest.approx(30)


async def test_a_call_cut_short_still_used_its_turn() -> None:
    """A call cancelled during its latency consumed its turn, like an attempt under way."""
    model = _model({"s": [{"text": "first"}, {"text": "second"}]}, latency_s=5)
    with anyio.move_on_after(1):
        await model.complete(_ask("s"))
    assert (await model.complete(_ask("s"))).text == "second"


async def test_a_snapshot_resumes_where_the_run_stopped() -> None:
    """restore() of snapshot() continues each subtask at its next turn, in a new model."""
    turns = {"a": [{"text": "a1"}, {"text": "a2"}], "b": [{"text": "b1"}, {"text": "b2"}]}
    killed = _model(turns)
    await killed.complete(_ask("a"))
    state = killed.snapshot()
    assert state == {"positions": {"a": 1}}
    resumed = _model(turns)
    resumed.restore(state)
    assert (await resumed.complete(_ask("a"))).text == "a2"
    assert (await resumed.complete(_ask("b"))).text == "b1"


@pytest.mark.parametrize(
    "state",
    [
        pytest.param({"positions": {"a": -1}}, id="negative"),
        pytest.param({"positions": {"a": "1"}}, id="not-an-int"),
        pytest.param({"positions": [1]}, id="not-a-mapping"),
    ],
)
def test_a_snapshot_that_is_not_one_is_refused(state: dict[str, Any]) -> None:
    """restore() refuses positions that are not non-negative integers per subtask."""
    with pytest.raises(ValueError, match="snapshot"):
        _model({}).restore(state)


async def test_a_hinted_turn_replaces_its_turn_only_after_a_persons_hint() -> None:
    """A turn's ``hinted`` alternative is taken when a person's hint came since the model's
    last turn (docs/design.md §17); without one, or with one before that turn, the turn
    itself; either way one turn is consumed."""
    turns: dict[str, list[dict[str, Any]]] = {"pricing": [
        {"calls": [{"tool": "web_search", "args": {"query": "price"}}]},
        {"text": "pack prices", "hinted": {"calls": [{"tool": "web_search",
                                                      "args": {"query": "cell USD"}}]}},
        {"text": "cell prices"},
    ]}
    hint = UserMessage("A person says: cells", hint=True)
    said = AssistantMessage(ModelTurn(text="searching"))
    told, untold, stale = _model(turns), _model(turns), _model(turns)
    for model in (told, untold, stale):
        await model.complete(_ask("pricing"))
    messages: dict[ScriptedModel, list[TranscriptMessage]] = {
        told: [UserMessage("q"), said, hint], untold: [UserMessage("q"), said],
        stale: [UserMessage("q"), hint, said]}
    answers = {m: await m.complete(ModelRequest(system="", messages=msgs, subtask_id="pricing"))
               for m, msgs in messages.items()}
    assert [c.arguments for c in answers[told].calls] == [{"query": "cell USD"}]
    assert answers[told].calls[0].id == "call_pricing_1_0"
    assert answers[untold].text == answers[stale].text == "pack prices"
    assert (await told.complete(_ask("pricing"))).text == "cell prices"


def test_a_hinted_turn_has_no_hinted_turn_of_its_own() -> None:
    """Nesting stops at one level: what the model does once told is one turn."""
    with pytest.raises(ValueError, match="no hinted turn of its own"):
        ModelSpec.model_validate({"provider": "scripted", "turns": {"a": [
            {"text": "x", "hinted": {"text": "y", "hinted": {"text": "z"}}}]}})
