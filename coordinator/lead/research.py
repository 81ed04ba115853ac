"""The lead's plan as the job runs it: the tool catalogue it plans with, the job with
its subtasks, and the hooks that hear its plan and follow-ups.

The flow that asks the lead (plan, follow-ups, synthesis) is :mod:`coordinator.flow`;
in this process its backend is :class:`coordinator.fanout.LocalBackend`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from coordinator.job import JobSpec
from coordinator.jobfile.scenario import Scenario
from subagents.models.base import ToolSpec
from subagents.planners.prompt import tool_specs
from subagents.result import LEAD, SubagentResult
from subagents.spec import SubtaskSpec
from subagents.toolsource import ToolSource


class PlanHook(Protocol):
    """Hears the lead's subtasks, the job time they were decided at, and the lead's gap
    when it could not plan (the subtasks are then the degraded plan, docs/design.md §7)."""

    def __call__(
        self, subtasks: list[SubtaskSpec], at: float, lead_gap: SubagentResult | None = None
    ) -> None: ...


class FollowupHook(Protocol):
    """Hears the follow-ups the lead planned (none is a plan too) and the job time."""

    def __call__(self, specs: list[SubtaskSpec], at: float) -> None: ...


def catalogue(source: ToolSource) -> list[ToolSpec]:
    """Every tool the job may give a subtask (simulated and MCP), with its schema."""
    tools = source.for_subtask(LEAD)
    every = SubtaskSpec(id=LEAD, query="", tools=list(tools))
    return [s for s in tool_specs(every, tools) if s.name != "escalate"]


def planned_job(job: JobSpec, subtasks: Sequence[SubtaskSpec]) -> JobSpec:
    """The job with the lead's plan as its subtasks; a job the lead decomposed follows
    up once unless its file says otherwise (docs/design.md §11)."""
    update: dict[str, Any] = {"subtasks": list(subtasks)}
    if job.followups is None:
        update["followups"] = 1
    return job.model_copy(update=update)


def with_subtasks(scenario: Scenario, subtasks: Sequence[SubtaskSpec]) -> Scenario:
    """The scenario with the lead's plan as its subtasks (how it then runs and records)."""
    job = planned_job(scenario.job, subtasks)
    return scenario.model_copy(update={"job": job})
