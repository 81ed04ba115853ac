"""What a model-driven subagent is told: its subtask, budgets, how errors come back, escalate."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from subagents.models.base import ToolSpec
from subagents.spec import SubtaskSpec
from subagents.tool import Tool

ESCALATE_TOOL: Final = "escalate"
MODEL_TRIGGERS: Final = (
    "human_request",
    "missing_policy",
    "no_progress",
    "business_rule",
    "threshold_breach",
    "incomplete_data",
)

ESCALATE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "trigger": {"type": "string", "enum": list(MODEL_TRIGGERS)},
        "message": {"type": "string", "minLength": 1},
        "alternatives": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["trigger", "message"],
    "additionalProperties": False,
}

ESCALATE_SPEC: Final = ToolSpec(
    name=ESCALATE_TOOL,
    description=(
        "Stop working on this subtask and hand it to a person, because of a concrete "
        "condition you cannot resolve with the tools. Give the trigger, a message saying "
        "exactly what is wrong, and alternatives a person could act on."
    ),
    input_schema=ESCALATE_SCHEMA,
)


def system_prompt(spec: SubtaskSpec) -> str:
    """The instructions a subagent's model gets for one subtask."""
    return f"""You are a research subagent. You work on one subtask, using only the tools given.

Subtask {spec.id!r}: {spec.query}

Budgets: at most {spec.max_steps} tool calls in all; a context window of \
{spec.context_window} tokens; each tool result is cut to {spec.active_tool_budget} tokens; \
each tool call times out after {spec.tool_timeout_s:g}s.

Every tool result is a JSON envelope.
- "ok": true carries "data". "empty": true means the source answered and nothing matches \
(that is an answer, not a failure). "complete": false means the data is partial.
- "ok": false carries "errorCategory", "message", "field", "expected" and \
"next_safe_action".
  - validation: your input was wrong. Correct the named field and call again with changed \
arguments; the same call again is refused and ends the subtask.
  - transient failures (timeouts, overload, rate limits) were already retried for you.
  - business and permission failures end the subtask; you will not be asked again.

If you cannot go on, call `escalate` with a trigger ({", ".join(MODEL_TRIGGERS)}), a message \
saying why, and concrete alternatives. Escalate on a concrete condition, never on how \
confident you feel.

When you have what the subtask needs, answer in plain text without calling a tool: the \
findings, the tool results they come from, and what you could not find."""


def tool_specs(spec: SubtaskSpec, tools: Mapping[str, Tool]) -> list[ToolSpec]:
    """The allowlisted tools the model may call (with their JSON Schemas), and escalate."""
    shown = [
        ToolSpec(name=name, description=tools[name].description, input_schema=_schema(tools[name]))
        for name in spec.tools
        if name in tools
    ]
    return [*shown, ESCALATE_SPEC]


def _schema(tool: Tool) -> dict[str, Any]:
    schema = dict(tool.schema)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def catalogue_text(specs: list[ToolSpec]) -> str:
    """The tool schemas as the context counts them: they are sent with every call."""
    return json.dumps(
        [
            {"name": s.name, "description": s.description, "input_schema": s.input_schema}
            for s in specs
        ],
        separators=(",", ":"),
        ensure_ascii=False,
    )
