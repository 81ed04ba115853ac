"""Model clients: Anthropic, OpenAI-compatible and scripted, behind one protocol
(docs/design.md §7)."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.models.anthropic import AnthropicClient
    from subagents.models.base import (
        AssistantMessage,
        ModelCallFailed,
        ModelClient,
        ModelFailureKind,
        ModelRequest,
        ModelTurn,
        StopReason,
        ToolCall,
        ToolResultMessage,
        ToolSpec,
        TranscriptMessage,
        Usage,
        UserMessage,
        model_failure_error,
    )
    from subagents.models.classify import MODEL_ERRORS, classify_model_error
    from subagents.models.factory import MissingModelKey, build_client
    from subagents.models.limiter import EndpointLimiter, forget_shared_limiters, limiter_of
    from subagents.models.openai import OpenAIClient
    from subagents.models.ratelimit_headers import RateReport, read_rate_headers
    from subagents.models.scripted import FOLLOWUP_TOOL, PLAN_TOOL, ScriptedModel
    from subagents.models.spec import (
        ModelLimits,
        ModelSpec,
        PlannedSubtask,
        Provider,
        ScriptedCall,
        ScriptedError,
        ScriptedTurn,
    )
    from subagents.models.spend import TokenBudget, TokenMeter

__all__ = [
    "FOLLOWUP_TOOL",
    "MODEL_ERRORS",
    "PLAN_TOOL",
    "AnthropicClient",
    "AssistantMessage",
    "EndpointLimiter",
    "MissingModelKey",
    "ModelCallFailed",
    "ModelClient",
    "ModelFailureKind",
    "ModelLimits",
    "ModelRequest",
    "ModelSpec",
    "ModelTurn",
    "OpenAIClient",
    "PlannedSubtask",
    "Provider",
    "RateReport",
    "ScriptedCall",
    "ScriptedError",
    "ScriptedModel",
    "ScriptedTurn",
    "StopReason",
    "TokenBudget",
    "TokenMeter",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "TranscriptMessage",
    "Usage",
    "UserMessage",
    "build_client",
    "classify_model_error",
    "forget_shared_limiters",
    "limiter_of",
    "model_failure_error",
    "read_rate_headers",
]

# Each name is imported from its module on first use (shared/lazy.py): the live clients
# import their SDKs (tens of MiB, most of a second), so a replay or a scripted job never
# pays for them, and importing one part of the package loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.models.base": (
        "AssistantMessage", "ModelCallFailed", "ModelClient", "ModelFailureKind", "ModelRequest",
        "ModelTurn", "StopReason", "ToolCall", "ToolResultMessage", "ToolSpec", "TranscriptMessage",
        "Usage", "UserMessage", "model_failure_error",
    ),
    "subagents.models.factory": ("MissingModelKey", "build_client"),
    "subagents.models.limiter": ("EndpointLimiter", "forget_shared_limiters", "limiter_of"),
    "subagents.models.ratelimit_headers": ("RateReport", "read_rate_headers"),
    "subagents.models.scripted": ("FOLLOWUP_TOOL", "PLAN_TOOL", "ScriptedModel"),
    "subagents.models.spec": (
        "ModelLimits", "ModelSpec", "PlannedSubtask", "Provider", "ScriptedCall", "ScriptedError",
        "ScriptedTurn",
    ),
    "subagents.models.spend": ("TokenBudget", "TokenMeter"),
    "subagents.models.anthropic": ("AnthropicClient",),
    "subagents.models.classify": ("MODEL_ERRORS", "classify_model_error"),
    "subagents.models.openai": ("OpenAIClient",),
})
