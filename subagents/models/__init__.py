"""Model clients: Anthropic, OpenAI-compatible and scripted, behind one protocol (DESIGN §7)."""

from typing import TYPE_CHECKING, Any

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
from subagents.models.factory import MissingModelKey, build_client
from subagents.models.limiter import EndpointLimiter, forget_shared_limiters, limiter_of
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

if TYPE_CHECKING:
    from subagents.models.anthropic import AnthropicClient
    from subagents.models.classify import MODEL_ERRORS, classify_model_error
    from subagents.models.openai import OpenAIClient

# The live clients import their SDKs (tens of MiB, most of a second): loaded on first use,
# so a replay or a scripted job never pays for them.
_LAZY = {
    "AnthropicClient": "subagents.models.anthropic",
    "OpenAIClient": "subagents.models.openai",
    "MODEL_ERRORS": "subagents.models.classify",
    "classify_model_error": "subagents.models.classify",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'subagents.models' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
