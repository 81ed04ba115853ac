"""The names fanout's spans use: the OpenTelemetry GenAI conventions it follows, pinned.

The GenAI conventions are still "Development" and rename things between releases
(``gen_ai.system`` became ``gen_ai.provider.name`` in 1.37): fanout follows exactly one
release, :data:`SEMCONV_VERSION`, and its spans carry that release's schema URL so a
backend can translate them later. fanout's own attributes live under ``fanout.*``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

SEMCONV_VERSION: Final = "1.38.0"
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
INSTRUMENTATION_NAME: Final = "fanout"

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

# gen_ai.* (semantic conventions 1.38.0, "Generative AI" spans and agent spans)
OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
RESPONSE_MODEL: Final = "gen_ai.response.model"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
AGENT_NAME: Final = "gen_ai.agent.name"
AGENT_ID: Final = "gen_ai.agent.id"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"  # opt-in content
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"  # opt-in content
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"  # opt-in content
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

# fanout.* (docs/design.md §13)
RUN_ID: Final = "fanout.run_id"
SUBTASK_ID: Final = "fanout.subtask_id"
TRACE_ID: Final = "fanout.trace_id"  # the envelope's trace_id: joins a span to `fanout trace`
ATTEMPT: Final = "fanout.attempt"
STEP: Final = "fanout.step"
ROUND: Final = "fanout.round"
WAIT_S: Final = "fanout.wait_s"
IS_RETRYABLE: Final = "fanout.is_retryable"
ERROR_TYPE_FANOUT: Final = "fanout.error_type"
TRIGGER: Final = "fanout.trigger"
ROUTE: Final = "fanout.route"
TOOL_KIND: Final = "fanout.tool.kind"
EMPTY: Final = "fanout.empty"
COMPLETE: Final = "fanout.complete"
FINDINGS: Final = "fanout.findings"
ATTEMPTS: Final = "fanout.attempts"
OUTCOME: Final = "fanout.outcome"
COVERAGE: Final = "fanout.coverage"
GAPS: Final = "fanout.gaps"
SUBTASKS: Final = "fanout.subtasks"
JOB: Final = "fanout.job"

# The well-known gen_ai.provider.name values; the scripted model of replays is fanout's own.
PROVIDER_NAMES: Final[Mapping[str, str]] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "scripted": "fanout.scripted",
}

_TRUE = frozenset({"true", "1", "yes", "on"})


def capture_content_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether message, argument and result content (and exception messages) may go into
    spans: only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says true."""
    env = os.environ if environ is None else environ
    return env.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _TRUE


def tool_kind(name: str) -> str:
    """What kind of tool ``name`` is, read from its name (the observer sees only names).

    ``model`` is the model; ``web.*`` and ``docs.*`` are the built-in research tools
    (docs/design.md §10); any other dotted name is an MCP tool (``server.tool``); the rest are
    functions (simulated tools of scenario files, Python functions, ``escalate``).
    """
    if name == "model":
        return "model"
    if name.startswith(("web.", "docs.")):
        return "builtin"
    if "." in name:
        return "mcp"
    return "function"


def tool_type(kind: str) -> str:
    """The ``gen_ai.tool.type`` of a tool kind: MCP tools run in another process
    (``extension``); the others run in fanout's own (``function``)."""
    return "extension" if kind == "mcp" else "function"


__all__ = [
    "CAPTURE_CONTENT_ENV",
    "INSTRUMENTATION_NAME",
    "PROVIDER_NAMES",
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "capture_content_from_env",
    "tool_kind",
    "tool_type",
]
