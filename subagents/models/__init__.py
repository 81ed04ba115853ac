"""Model clients: Anthropic, OpenAI-compatible and scripted, behind one protocol (DESIGN §7)."""

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
)
from subagents.models.classify import MODEL_ERRORS, classify_model_error, model_failure_error
from subagents.models.factory import MissingModelKey, build_client
from subagents.models.openai import OpenAIClient
from subagents.models.scripted import PLAN_TOOL, ScriptedModel
from subagents.models.spec import (
    ModelSpec,
    PlannedSubtask,
    Provider,
    ScriptedCall,
    ScriptedError,
    ScriptedTurn,
)

__all__ = [
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
