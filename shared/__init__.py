"""The vocabulary both sides speak: categories, envelopes, escalations, budgets, clocks."""

from shared.budget import ContextDecision, required_margin, should_compact_or_stop
from shared.categories import (
    ERROR_CATEGORIES,
    TRIGGERS,
    ChangedState,
    ErrorCategory,
    NextSafeAction,
    Trigger,
    default_next_action,
)
from shared.classify import (
    classify_exception,
    parse_retry_after,
    register_classifier,
    unregister_classifier,
)
from shared.clock import AnyioClock, Clock, run_in_virtual_time
from shared.envelope import Finding, ToolError, ToolResult
from shared.errors import (
    BusinessRuleViolation,
    FanoutError,
    InputFileError,
    InputFileErrors,
    InvalidToolInput,
    ToolFailure,
    ToolPermissionDenied,
    TransientToolError,
)
from shared.escalation import Escalation
from shared.ids import RandomTraceIds, SeededTraceIds, TraceIds, new_trace_id
from shared.tokens import TokenCounter

__all__ = [
    "ERROR_CATEGORIES",
    "TRIGGERS",
    "AnyioClock",
    "BusinessRuleViolation",
    "ChangedState",
    "Clock",
    "ContextDecision",
    "ErrorCategory",
    "Escalation",
    "FanoutError",
    "Finding",
    "InputFileError",
    "InputFileErrors",
    "InvalidToolInput",
    "NextSafeAction",
    "RandomTraceIds",
    "SeededTraceIds",
    "TokenCounter",
    "ToolError",
    "ToolFailure",
    "ToolPermissionDenied",
    "ToolResult",
    "TraceIds",
    "TransientToolError",
    "Trigger",
    "classify_exception",
    "default_next_action",
    "new_trace_id",
    "parse_retry_after",
    "register_classifier",
    "required_margin",
    "run_in_virtual_time",
    "should_compact_or_stop",
    "unregister_classifier",
]
