"""What the span builder writes from an envelope: a model call's response, content, server.

Content (:func:`output_messages`, :func:`to_json` of a result or arguments) is written
only when the run captures content; the rest is metadata every span may carry.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.util.types import AttributeValue

from subagents.telemetry import semconv as sc

MAX_CONTENT = 8192  # characters of one captured content attribute


def model_response(attrs: dict[str, AttributeValue], data: dict[str, Any]) -> None:
    """The response side of a model call's span: model, finish reason, usage."""
    if isinstance(data.get("model"), str) and data["model"]:
        attrs[sc.RESPONSE_MODEL] = data["model"]
    if isinstance(data.get("stop_reason"), str):
        attrs[sc.FINISH_REASONS] = (data["stop_reason"],)
    usage = data.get("usage")
    if isinstance(usage, dict):
        for key, name in (("input_tokens", sc.INPUT_TOKENS), ("output_tokens", sc.OUTPUT_TOKENS)):
            if isinstance(usage.get(key), int):
                attrs[name] = usage[key]
    calls = data.get("calls")
    if isinstance(calls, list):
        attrs["fanout.tool_calls"] = len(calls)


def output_messages(data: dict[str, Any]) -> str:
    """The model's answer as ``gen_ai.output.messages`` (1.38 JSON shape): text and
    tool-call parts, with the finish reason."""
    parts: list[dict[str, Any]] = []
    if data.get("text"):
        parts.append({"type": "text", "content": data["text"]})
    for call in data.get("calls") or []:
        if isinstance(call, dict):
            parts.append({
                "type": "tool_call",
                "id": call.get("id"),
                "name": call.get("name"),
                "arguments": call.get("arguments", call.get("raw_arguments")),
            })
    message = {"role": "assistant", "parts": parts,
               "finish_reason": data.get("stop_reason") or "stop"}
    return to_json([message])


def server_of(base_url: str | None) -> dict[str, AttributeValue]:
    if not base_url:
        return {}
    parts = urlsplit(base_url)
    out: dict[str, AttributeValue] = {}
    if parts.hostname:
        out[sc.SERVER_ADDRESS] = parts.hostname
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        out[sc.SERVER_PORT] = port
    return out


def to_json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(value)


def clip(text: str) -> str:
    return text if len(text) <= MAX_CONTENT else text[:MAX_CONTENT] + "…"
