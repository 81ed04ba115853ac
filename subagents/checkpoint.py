"""Saving a subagent's state as JSON and restoring it, so a killed run can resume.

A checkpoint holds everything the loop needs to go on exactly as it would have:
the planner's position, findings, counters, the context's messages, the jitter
stream's state and the observation it had last.
"""

from __future__ import annotations

from typing import Any

from shared.envelope import Finding, ToolError, ToolResult
from shared.escalation import Escalation
from subagents.context import Context, Message
from subagents.jitter import DeferredRandom
from subagents.planners import CallAction, Observation, Planner, ScriptedPlanner
from subagents.run import SubagentRun
from subagents.spec import SubtaskSpec

CHECKPOINT_VERSION = 1


def _action(a: CallAction | None) -> dict[str, Any] | None:
    if a is None:
        return None
    out: dict[str, Any] = {"tool": a.tool, "args": a.args, "step": a.step}
    if a.call_id is not None:
        out["call_id"] = a.call_id  # a model's call: its result answers this id
    if a.invalid is not None:
        out["invalid"] = a.invalid.model_dump(mode="json", by_alias=True)
    return out


def _unaction(d: dict[str, Any] | None) -> CallAction | None:
    if d is None:
        return None
    invalid = d.get("invalid")
    return CallAction(
        d["tool"],
        dict(d["args"]),
        int(d["step"]),
        d.get("call_id"),
        None if invalid is None else ToolError.model_validate(invalid),
    )


def snapshot_run(run: SubagentRun) -> dict[str, Any]:
    """The run's state as JSON-ready data."""
    snap = getattr(run.planner, "snapshot", None)
    run.context.count_pending()  # so every message carries its exact count
    version, internal, gauss = run.rng.getstate()
    pending = run.pending
    return {
        "version": CHECKPOINT_VERSION,
        "subtask_id": run.spec.id,
        "planner": snap() if callable(snap) else None,
        "findings": [f.model_dump(mode="json") for f in run.findings],
        "escalation": None if run.escalation is None else run.escalation.to_wire(),
        "incomplete_tool": run.incomplete_tool,
        "attempts": run.attempts,
        "steps": run.steps,
        "rounds": run.rounds,
        "trace_ids": list(run.trace_ids),
        "last_call": _action(run.last_call),
        # A non-idempotent call about to run (or running): a resume must not send it again.
        "in_flight": _action(run.in_flight),
        "state": run.state,
        "started_s": run.started_s,
        "ended_s": run.ended_s,
        "pending": None
        if pending is None
        else {"action": _action(pending.action), "result": pending.result.to_wire()},
        "rng": [version, list(internal), gauss],
        "jitter": run.jitter_key,
        "context": {
            "compactions": run.context.compactions,
            "calibration": run.context.calibration,
            "messages": [
                [m.kind, m.text, m.tokens, m.pinned, m.tool, m.summary]
                for m in run.context.messages
            ],
        },
    }


def restore_run(
    spec: SubtaskSpec,
    state: dict[str, Any],
    *,
    planner: Planner | None = None,
    with_planner: bool = True,
) -> SubagentRun:
    """A SubagentRun that continues from ``state`` (see :func:`snapshot_run`).

    ``with_planner=False`` restores everything but the planner's own state, for a
    reader that only needs the run's result (an interrupted run's report).
    """
    if state.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"checkpoint version {state.get('version')} is not supported")
    planner = planner or ScriptedPlanner(list(spec.plan))
    restore = getattr(planner, "restore", None)
    if with_planner and state.get("planner") is not None and callable(restore):
        restore(state["planner"])
    context = Context(
        spec.query, window=spec.context_window, active_tool_budget=spec.active_tool_budget
    )
    # The provider's correction first: replacing the messages recomputes the total on it.
    context.calibration = int(state["context"].get("calibration", 0))
    context.messages = [Message(*m) for m in state["context"]["messages"]]
    context.compactions = int(state["context"]["compactions"])
    rng = DeferredRandom()
    version, internal, gauss = state["rng"]
    rng.setstate((version, tuple(internal), gauss))
    run = SubagentRun(spec=spec, planner=planner, context=context, rng=rng)
    # A checkpoint from before turns ran together names no stream: the loop's default.
    run.jitter_key = str(state.get("jitter") or "")
    run.findings = [Finding.model_validate(f) for f in state["findings"]]
    if state["escalation"] is not None:
        run.escalation = Escalation.model_validate(state["escalation"])
    run.incomplete_tool = state["incomplete_tool"]
    run.attempts = int(state["attempts"])
    run.steps = int(state["steps"])
    run.rounds = int(state["rounds"])
    run.trace_ids = list(state["trace_ids"])
    run.last_call = _unaction(state["last_call"])
    run.in_flight = _unaction(state.get("in_flight"))
    run.started_s = state["started_s"]
    run.ended_s = state["ended_s"]
    run.state = state["state"]
    pending = state["pending"]
    if pending is not None:
        action = _unaction(pending["action"])
        assert action is not None
        run.pending = Observation(action, ToolResult.model_validate(pending["result"]))
    if not run.finished:
        # Taken mid-round: continue that round from the pending observation.
        run.resuming = True
    return run
