"""Planners: what proposes a subagent's next action (the protocol, the scripted plan)."""

from subagents.planners.base import (
    Action,
    CallAction,
    EscalateAction,
    FinishAction,
    Observation,
    PlanEnv,
    Planner,
    PlannerState,
    TurnPlanner,
)
from subagents.planners.scripted import ScriptedPlanner

__all__ = [
    "Action",
    "CallAction",
    "EscalateAction",
    "FinishAction",
    "Observation",
    "PlanEnv",
    "Planner",
    "PlannerState",
    "ScriptedPlanner",
    "TurnPlanner",
]
