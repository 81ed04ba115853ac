"""Tools, their safe execution with local retry, planners, context, and the subagent loop."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.context import Context
    from subagents.executor import ExecEvent, ExecObserver, execute_tool_safely
    from subagents.loop import run_subagent
    from subagents.planners import (
        Action,
        CallAction,
        EscalateAction,
        FinishAction,
        Observation,
        Planner,
        ScriptedPlanner,
    )
    from subagents.result import ProgressEvent, ProgressObserver, SubagentResult
    from subagents.retry import RetryPolicy, run_with_retry
    from subagents.run import SubagentRun
    from subagents.schema import SchemaViolation, params_to_schema, validate
    from subagents.simulated.tools import SimulatedTools
    from subagents.spec import (
        CallStep,
        EscalateStep,
        FinishStep,
        PlanStep,
        SubtaskSettings,
        SubtaskSpec,
    )
    from subagents.tool import CallContext, Tool, ToolOutput

__all__ = [
    "Action",
    "CallAction",
    "CallContext",
    "CallStep",
    "Context",
    "EscalateAction",
    "EscalateStep",
    "ExecEvent",
    "ExecObserver",
    "FinishAction",
    "FinishStep",
    "Observation",
    "PlanStep",
    "Planner",
    "ProgressEvent",
    "ProgressObserver",
    "RetryPolicy",
    "SchemaViolation",
    "ScriptedPlanner",
    "SimulatedTools",
    "SubagentResult",
    "SubagentRun",
    "SubtaskSettings",
    "SubtaskSpec",
    "Tool",
    "ToolOutput",
    "execute_tool_safely",
    "params_to_schema",
    "run_subagent",
    "run_with_retry",
    "validate",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.context": ("Context",),
    "subagents.executor": ("ExecEvent", "ExecObserver", "execute_tool_safely"),
    "subagents.loop": ("run_subagent",),
    "subagents.result": ("ProgressEvent", "ProgressObserver", "SubagentResult"),
    "subagents.run": ("SubagentRun",),
    "subagents.planners": (
        "Action", "CallAction", "EscalateAction", "FinishAction", "Observation", "Planner",
        "ScriptedPlanner",
    ),
    "subagents.retry": ("RetryPolicy", "run_with_retry"),
    "subagents.schema": ("SchemaViolation", "params_to_schema", "validate"),
    "subagents.simulated.tools": ("SimulatedTools",),
    "subagents.spec": (
        "CallStep", "EscalateStep", "FinishStep", "PlanStep", "SubtaskSettings", "SubtaskSpec",
    ),
    "subagents.tool": ("CallContext", "Tool", "ToolOutput"),
})
