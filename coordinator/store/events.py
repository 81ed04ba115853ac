"""What the trace stores of a run's events: the wire form of a progress event, of the
lead's plan and of its follow-ups. Written by whichever executor records the run (this
process, or a Temporal worker) and read back by resume, reports and recordings.
"""

from __future__ import annotations

from typing import Any

from subagents.result import ProgressEvent, SubagentResult
from subagents.spec import SubtaskSpec

__all__ = ["event_data", "followups_data", "plan_data"]

_EVENT_FIELDS = (
    "state", "tool", "attempt", "wait_s", "step", "trigger",
    "text", "restart", "answer_kind", "reason", "by", "turn",
)


def event_data(event: ProgressEvent) -> dict[str, Any]:
    """The JSON the trace stores for one progress event (besides subtask, kind, time)."""
    data: dict[str, Any] = {
        name: value for name in _EVENT_FIELDS if (value := getattr(event, name)) is not None
    }
    if event.result is not None:
        data["result"] = event.result.to_wire()
    return data


def plan_data(subtasks: list[SubtaskSpec], gap: SubagentResult | None) -> dict[str, Any]:
    """The ``plan`` event's data: the subtasks, and the lead's gap of a degraded plan."""
    data: dict[str, Any] = {"subtasks": [s.model_dump(mode="json") for s in subtasks]}
    if gap is not None:
        data["lead_gap"] = gap.model_dump(mode="json")
    return data


def followups_data(specs: list[SubtaskSpec]) -> dict[str, Any]:
    """The ``followups`` event's data: the follow-ups the lead planned (maybe none)."""
    return {"followups": [s.model_dump(mode="json") for s in specs]}
