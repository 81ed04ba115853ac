"""Planners: what proposes a subagent's next action (the protocol, the scripted plan)."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.planners.base import (
        Action,
        CallAction,
        EscalateAction,
        FinishAction,
        Hint,
        Observation,
        PlanEnv,
        Planner,
        PlannerState,
        TurnPlanner,
        reads_hints,
    )
    from subagents.planners.scripted import ScriptedPlanner

__all__ = [
    "Action",
    "CallAction",
    "EscalateAction",
    "FinishAction",
    "Hint",
    "Observation",
    "PlanEnv",
    "Planner",
    "PlannerState",
    "ScriptedPlanner",
    "TurnPlanner",
    "reads_hints",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.planners.base": (
        "Action", "CallAction", "EscalateAction", "FinishAction", "Hint", "Observation",
        "PlanEnv", "Planner", "PlannerState", "TurnPlanner", "reads_hints",
    ),
    "subagents.planners.scripted": ("ScriptedPlanner",),
})
