"""The vocabulary both sides speak: categories, envelopes, escalations, budgets, clocks."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
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

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "shared.budget": ("ContextDecision", "required_margin", "should_compact_or_stop"),
    "shared.categories": (
        "ERROR_CATEGORIES", "TRIGGERS", "ChangedState", "ErrorCategory", "NextSafeAction",
        "Trigger", "default_next_action",
    ),
    "shared.classify": (
        "classify_exception", "parse_retry_after", "register_classifier", "unregister_classifier",
    ),
    "shared.clock": ("AnyioClock", "Clock", "run_in_virtual_time"),
    "shared.envelope": ("Finding", "ToolError", "ToolResult"),
    "shared.errors": (
        "BusinessRuleViolation", "FanoutError", "InputFileError", "InputFileErrors",
        "InvalidToolInput", "ToolFailure", "ToolPermissionDenied", "TransientToolError",
    ),
    "shared.escalation": ("Escalation",),
    "shared.ids": ("RandomTraceIds", "SeededTraceIds", "TraceIds", "new_trace_id"),
    "shared.tokens": ("TokenCounter",),
})
