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
from subagents.models.scripted import FOLLOWUP_TOOL, PLAN_TOOL, ScriptedModel
from subagents.models.spec import (
    ModelSpec,
    PlannedSubtask,
    Provider,
    ScriptedCall,
    ScriptedError,
    ScriptedTurn,
)

__all__ = [
    "FOLLOWUP_TOOL",
    "MODEL_ERRORS",
    "PLAN_TOOL",
    "AnthropicClient",
    "AssistantMessage",
    "MissingModelKey",
    "ModelCallFailed",
    "ModelClient",
    "ModelFailureKind",
    "ModelRequest",
    "ModelSpec",
    "ModelTurn",
    "OpenAIClient",
    "PlannedSubtask",
    "Provider",
    "ScriptedCall",
    "ScriptedError",
    "ScriptedModel",
    "ScriptedTurn",
    "StopReason",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "TranscriptMessage",
    "Usage",
    "UserMessage",
    "build_client",
    "classify_model_error",
    "model_failure_error",
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
