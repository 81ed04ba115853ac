"""Tools, their safe execution with local retry, and the subagent loop."""

from subagents.executor import ExecEvent, ExecObserver, execute_tool_safely
from subagents.retry import RetryPolicy, run_with_retry
from subagents.schema import SchemaViolation, params_to_schema, validate
from subagents.tool import CallContext, Tool, ToolOutput

__all__ = [
    "CallContext",
    "ExecEvent",
    "ExecObserver",
    "RetryPolicy",
    "SchemaViolation",
    "Tool",
    "ToolOutput",
    "execute_tool_safely",
    "params_to_schema",
    "run_with_retry",
    "validate",
]
