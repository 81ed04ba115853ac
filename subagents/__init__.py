"""Tools, their safe execution with local retry, planners, context, and the subagent loop."""

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
