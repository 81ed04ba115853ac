"""The scripted planner: it follows a plan, corrects after validation errors, resumes."""

from __future__ import annotations

from typing import Any

import pytest

from shared import ToolError, ToolResult
from subagents.planners import (
    CallAction,
    EscalateAction,
    FinishAction,
    Observation,
    Planner,
    ScriptedPlanner,
)
from subagents.spec import CallStep, EscalateStep, FinishStep


def _ok(tool: str) -> ToolResult:
    return ToolResult.success(tool, {"results": ["x"]}, trace_id="tr_ok")


def _failed(tool: str, category: Any, error_type: str = "e", **details: Any) -> ToolResult:
    return ToolResult.failure(
        tool, ToolError.of(category, error_type, f"{tool} failed", **details), trace_id="tr_f"
    )


def _observe(action: Any, result: ToolResult) -> Observation:
    assert isinstance(action, CallAction)
    return Observation(action, result)


@pytest.mark.anyio
async def test_scripted_planner_is_a_planner() -> None:
    """ScriptedPlanner satisfies the (awaited) Planner protocol the loop depends on."""
    planner: Planner = ScriptedPlanner([])
    assert await planner.next_action(None, None) is None  # type: ignore[arg-type]  # needs no env


def test_follows_the_plan_and_advances_on_success() -> None:
    """Each success moves to the next step; the plan's end is None."""
    planner = ScriptedPlanner(
        [CallStep(call="a", args={"q": 1}), CallStep(call="b", args={"q": 2})]
    )
    first = planner.decide(None)
    assert first == CallAction("a", {"q": 1}, 0)
    second = planner.decide(_observe(first, _ok("a")))
    assert second == CallAction("b", {"q": 2}, 1)
    assert planner.decide(_observe(second, _ok("b"))) is None


def test_correction_is_merged_into_the_last_arguments() -> None:
    """After a validation error on_validation is shallow-merged into the call's arguments."""
    planner = ScriptedPlanner(
        [
            CallStep(
                call="patents",
                args={"since": "2024-13-01", "limit": 5},
                on_validation={"since": "2024-12-01"},
            )
        ]
    )
    first = planner.decide(None)
    corrected = planner.decide(
        _observe(first, _failed("patents", "validation", field="since", expected="a date"))
    )
    assert corrected == CallAction("patents", {"since": "2024-12-01", "limit": 5}, 0)


@pytest.mark.parametrize(
    "on_validation",
    [
        pytest.param(None, id="no-correction"),
        pytest.param({"since": "2024-13-01"}, id="correction-changes-nothing"),
    ],
)
def test_no_correction_proposes_the_same_call(on_validation: dict[str, Any] | None) -> None:
    """Without a correction that changes anything the planner repeats the call unchanged."""
    planner = ScriptedPlanner(
        [CallStep(call="patents", args={"since": "2024-13-01"}, on_validation=on_validation)]
    )
    first = planner.decide(None)
    again = planner.decide(_observe(first, _failed("patents", "validation", field="since")))
    assert again == first


def test_a_repeated_validation_error_proposes_the_corrected_call_again() -> None:
    """A corrected call that fails validation again is proposed unchanged (the loop stops it)."""
    planner = ScriptedPlanner(
        [CallStep(call="patents", args={"since": "bad"}, on_validation={"since": "worse"})]
    )
    first = planner.decide(None)
    corrected = planner.decide(_observe(first, _failed("patents", "validation")))
    again = planner.decide(_observe(corrected, _failed("patents", "validation")))
    assert isinstance(corrected, CallAction) and corrected.args == {"since": "worse"}
    assert again == corrected


def test_finish_and_escalate_steps() -> None:
    """finish and escalate steps become their actions, carrying their text and trigger."""
    planner = ScriptedPlanner(
        [
            EscalateStep(escalate="human_request", message="which region?"),
            FinishStep(finish="nothing more to add"),
        ]
    )
    assert planner.decide(None) == EscalateAction("human_request", "which region?")
    assert planner.decide(None) == FinishAction("nothing more to add")
    assert planner.decide(None) is None


def test_resume_proposes_the_failed_step_with_its_last_arguments() -> None:
    """After a non-validation failure, asking afresh proposes the failed step, corrected args."""
    planner = ScriptedPlanner(
        [
            CallStep(call="a"),
            CallStep(call="b", args={"since": "x"}, on_validation={"since": "2024-12-01"}),
        ]
    )
    a = planner.decide(None)
    b = planner.decide(_observe(a, _ok("a")))
    corrected = planner.decide(_observe(b, _failed("b", "validation", field="since")))
    assert isinstance(corrected, CallAction)
    # The corrected call times out for good; the subagent escalates and later resumes.
    planner.decide(_observe(corrected, _failed("b", "transient", "timeout")))
    assert planner.decide(None) == CallAction("b", {"since": "2024-12-01"}, 1)


def test_snapshot_and_restore_continue_where_the_planner_was() -> None:
    """A planner restored from a snapshot proposes what the original would have proposed."""
    plan: list[Any] = [
        CallStep(call="a"),
        CallStep(call="b", args={"n": 0}, on_validation={"n": 1}),
        FinishStep(finish="done"),
    ]
    original = ScriptedPlanner(plan)
    a = original.decide(None)
    b = original.decide(_observe(a, _ok("a")))
    original.decide(_observe(b, _failed("b", "validation", field="n")))
    restored = ScriptedPlanner(plan)
    restored.restore(original.snapshot())
    assert restored.snapshot() == original.snapshot()
    assert restored.decide(None) == original.decide(None) == CallAction("b", {"n": 1}, 1)
