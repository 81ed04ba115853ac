"""What an MCP server reports as a failure, put into fanout's error categories.

Three kinds of failure come back from an MCP call:

- a ``CallToolResult`` with ``is_error``: its ``structuredContent`` is honoured when it
  carries ``errorCategory`` / ``isRetryable`` (a fanout envelope rendered with
  ``ToolResult.to_mcp`` round-trips exactly); otherwise its text is classified;
- a protocol error (``MCPError``): an unknown tool or invalid params is ``validation``,
  a request timeout ``transient``, anything else by its text;
- a lost connection (the server crashed or closed its pipe): ``transient``,
  ``connection_reset``.

Each becomes a :class:`McpToolError` carrying its finished :class:`~shared.envelope.ToolError`;
a classifier registered for that type hands it to the executor unchanged, so the
executor's single retry layer decides what happens next.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from shared.categories import (
    ERROR_CATEGORIES,
    NEXT_SAFE_ACTIONS,
    RETRYABLE,
    ErrorCategory,
    NextSafeAction,
    default_next_action,
)
from shared.classify import register_classifier
from shared.envelope import ToolError
from shared.errors import ToolFailure

__all__ = [
    "McpToolError",
    "classify_text",
    "connection_lost",
    "error_from_protocol",
    "error_from_result",
    "infer_field",
    "malformed_reply",
]


class McpToolError(ToolFailure):
    """An MCP call's failure, already classified: the executor uses its ToolError as is."""

    def __init__(self, error: ToolError) -> None:
        super().__init__(error.message)
        self.error = error


def _from_mcp_error(exc: BaseException) -> ToolError:
    if isinstance(exc, McpToolError):
        return exc.error
    return ToolError.of("internal", type(exc).__name__, str(exc) or type(exc).__name__)


register_classifier(McpToolError, _from_mcp_error)


def _rx(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(alternatives), re.IGNORECASE)


# Checked in this order; the first family that matches decides. Unmistakable transient
# phrases come first ("timed out while checking permissions" is a timeout), then
# permission before validation ("invalid credentials" is a permission problem), and the
# bare words "timeout"/"unavailable" last ("invalid timeout" is a bad argument).
_TRANSIENT_STRONG: tuple[tuple[re.Pattern[str], str], ...] = (
    (_rx(r"\btimed[\s_-]*out\b", r"\bdeadline exceeded\b", r"\bgateway time-?out\b",
         r"\b(?:408|504)\b"), "timeout"),
    (_rx(r"\brate[\s_-]*limit", r"\btoo many requests\b", r"\b429\b", r"\bthrottl"),
     "rate_limited"),
    (_rx(r"\bconnection (?:was )?(?:reset|refused|closed|aborted|lost)\b",
         r"\bbroken pipe\b", r"\beconnreset\b"), "connection_reset"),
    (_rx(r"\btemporar(?:il)?y\b", r"\bservice unavailable\b", r"\b50[23]\b",
         r"\boverloaded\b", r"\btry again\b", r"\bbad gateway\b"), "unavailable"),
)
_PERMISSION = _rx(
    r"\bunauthori[sz]ed\b", r"\bnot authori[sz]ed\b", r"\bforbidden\b",
    r"\bpermissions?\b", r"\bdenied\b", r"\b40[13]\b", r"\bcredentials?\b",
    r"\binsufficient (?:scopes?|privileges?|rights)\b", r"\boutside (?:of )?the allowed\b",
)
_VALIDATION = _rx(
    r"\binvalid\b", r"\bnot found\b", r"\bunknown\b", r"\bmissing\b", r"\bmust be\b",
    r"\brequired\b", r"\bno such\b", r"\bdoes(?: not|n't) exist\b", r"\bmalformed\b",
    r"\bbad request\b", r"\b(?:400|404|422)\b", r"\bout of range\b", r"\bexpected\b",
    r"\bnot a valid\b", r"\bunrecognized\b", r"\bunsupported\b", r"\bvalidation error\b",
    r"\b(?:cannot|could not|failed to) parse\b",
)
_TRANSIENT_WEAK: tuple[tuple[re.Pattern[str], str], ...] = (
    (_rx(r"\btime[\s_-]?out\b"), "timeout"),
    (_rx(r"\bunavailable\b"), "unavailable"),
)
_RETRY_AFTER = re.compile(
    r"(?:retry[\s_-]*after|try again in)[\s:=]*(\d+(?:\.\d+)?)\s*"
    r"(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)?\b",
    re.IGNORECASE,
)
# MCPServer (the SDK's high-level server) prefixes every tool failure with this.
_SDK_PREFIX = re.compile(r"^\s*Error executing tool [^\s:]+:\s*")
_PYDANTIC_URL = re.compile(r"\s*For further information visit \S+")
_MAX_MESSAGE = 400
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def classify_text(text: str) -> tuple[ErrorCategory, str]:
    """The category and error type an error *text* says, case-insensitively.

    Timeouts, rate limits, "temporarily unavailable", 429/503 are ``transient``;
    unauthorized, forbidden, permission, denied are ``permission``; invalid, not
    found, unknown, missing, "must be" are ``validation``; anything else ``internal``.
    """
    for pattern, error_type in _TRANSIENT_STRONG:
        if pattern.search(text):
            return "transient", error_type
    if _PERMISSION.search(text):
        return "permission", "forbidden"
    if _VALIDATION.search(text):
        return "validation", "invalid_input"
    for pattern, error_type in _TRANSIENT_WEAK:
        if pattern.search(text):
            return "transient", error_type
    return "internal", "tool_error"


def retry_after_in(text: str) -> float | None:
    """Seconds to wait that an error text asks for ("retry after 5s", "try again in 2 s")."""
    found = _RETRY_AFTER.search(text)
    if found is None:
        return None
    value = float(found.group(1))
    unit = (found.group(2) or "s").lower()
    if unit.startswith("ms") or unit.startswith("milli"):
        value /= 1000
    elif unit.startswith("m"):
        value *= 60
    return value if math.isfinite(value) else None


def infer_field(text: str, args: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """The argument an error text is about: one whose value it quotes, else one it names."""
    props = schema.get("properties")
    names: list[str] = [str(n) for n in props] if isinstance(props, Mapping) else []
    names += [str(name) for name in args if name not in names]
    # A quoted value is the most precise clue: "No time zone found with key Mars/Olympus"
    # names the argument that carried it, whatever the argument is called.
    for name in names:
        value = args.get(name)
        if isinstance(value, str) and len(value) >= 2 and value in text:
            return name
    for name in names:
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE):
            return name
    return None


def _expected_for(field: str | None, schema: Mapping[str, Any]) -> str | None:
    """What the schema says ``field`` takes: its enum, its description, or its type."""
    props = schema.get("properties")
    prop = props.get(field) if isinstance(props, Mapping) and field else None
    if not isinstance(prop, Mapping):
        return None
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return "one of " + ", ".join(repr(v) for v in enum[:10])
    description = prop.get("description")
    if isinstance(description, str) and description.strip():
        # The first sentence says what the value is; the rest is usually advice to a model.
        text = _SENTENCE_END.split(" ".join(description.split()), maxsplit=1)[0].rstrip(".")
        return text if len(text) <= 160 else text[:157] + "..."
    kind = prop.get("type")
    return f"a valid {kind}" if isinstance(kind, str) else None


def clean_text(text: str) -> str:
    """An error text fit for an envelope: no SDK prefix, no doc links, one line, bounded."""
    text = _PYDANTIC_URL.sub("", _SDK_PREFIX.sub("", text))
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def _from_text(
    text: str,
    *,
    tool: str,
    args: Mapping[str, Any],
    schema: Mapping[str, Any],
    category: ErrorCategory | None = None,
    error_type: str | None = None,
) -> ToolError:
    message = f"{tool}: {clean_text(text) or 'the server reported an error without text'}"
    found_category, found_type = classify_text(text)
    if category is None:
        category, error_type = found_category, error_type or found_type
    elif error_type is None:
        error_type = found_type if found_category == category else _DEFAULT_TYPE[category]
    details: dict[str, Any] = {}
    if category == "validation":
        field = infer_field(text, args, schema)
        details = {"field": field, "expected": _expected_for(field, schema)}
    elif category == "transient":
        details = {"retry_after_s": retry_after_in(text)}
    return ToolError.of(category, error_type or _DEFAULT_TYPE[category], message, **details)


_DEFAULT_TYPE: Mapping[ErrorCategory, str] = {
    "transient": "unavailable",
    "validation": "invalid_input",
    "business": "business_rule",
    "permission": "forbidden",
    "internal": "tool_error",
}


def result_text(content: list[Any]) -> str:
    """The text blocks of a tool result, joined by newlines."""
    return "\n".join(
        block.text for block in content if getattr(block, "type", None) == "text"
    )


def error_from_result(
    structured: Any,
    text: str,
    *,
    tool: str,
    args: Mapping[str, Any],
    schema: Mapping[str, Any],
) -> ToolError:
    """The ToolError of an ``is_error`` result (its structured content and its text)."""
    if not isinstance(structured, Mapping) or not (
        "errorCategory" in structured or "isRetryable" in structured
    ):
        return _from_text(text, tool=tool, args=args, schema=schema)
    return _from_structured(structured, text, tool=tool, args=args, schema=schema)


def _from_structured(
    sc: Mapping[str, Any],
    text: str,
    *,
    tool: str,
    args: Mapping[str, Any],
    schema: Mapping[str, Any],
) -> ToolError:
    raw_category = sc.get("errorCategory")
    retryable = sc.get("isRetryable")
    retryable = retryable if isinstance(retryable, bool) else None
    category: ErrorCategory
    if raw_category in ERROR_CATEGORIES:
        category = raw_category
    elif retryable:
        category = "transient"
    else:
        category = classify_text(text)[0]
        if category == "transient" and retryable is False:
            # The server says not to retry; a category that retries would contradict it.
            category = "internal"
    message = sc.get("message")
    message_text = message if isinstance(message, str) and message else text
    base = _from_text(
        message_text,
        tool=tool,
        args=args,
        schema=schema,
        category=category,
        error_type=_str(sc.get("error_type")) or _str(sc.get("errorType")),
    )
    if retryable is None:
        retryable = RETRYABLE[category]
    action = sc.get("next_safe_action")
    next_action: NextSafeAction
    if action in NEXT_SAFE_ACTIONS:
        next_action = action
    elif category == "transient" and not retryable:
        next_action = "escalate"
    else:
        next_action = default_next_action(category, base.error_type)
    retry_after = sc.get("retry_after_s")
    update: dict[str, Any] = {
        "retryable": retryable,
        "next_safe_action": next_action,
        "field": _str(sc.get("field")) or base.field,
        "expected": _str(sc.get("expected")) or base.expected,
        "retry_after_s": (
            float(retry_after)
            if isinstance(retry_after, int | float) and not isinstance(retry_after, bool)
            else base.retry_after_s
        ),
        "rule": _str(sc.get("rule")),
        "limit": sc.get("limit"),
        "requested": sc.get("requested"),
        "scope": _str(sc.get("scope")),
    }
    return base.model_copy(update=update)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def error_from_protocol(
    code: int,
    text: str,
    *,
    tool: str,
    args: Mapping[str, Any],
    schema: Mapping[str, Any],
) -> ToolError:
    """The ToolError of a JSON-RPC error answering ``tools/call``."""
    # Codes from the JSON-RPC spec and the SDK (mcp_types.jsonrpc), spelled out here so
    # this module needs no import of the SDK.
    if code == -32001:  # REQUEST_TIMEOUT: the SDK's own read timeout
        return _from_text(
            text, tool=tool, args=args, schema=schema, category="transient", error_type="timeout"
        )
    if code in (-32602, -32600):  # INVALID_PARAMS (unknown tool, bad arguments), INVALID_REQUEST
        return _from_text(text, tool=tool, args=args, schema=schema, category="validation")
    return _from_text(text, tool=tool, args=args, schema=schema)


def connection_lost(tool: str, server: str, detail: str) -> ToolError:
    """The ToolError of a call whose server crashed or closed its pipe mid-call."""
    return ToolError.of(
        "transient",
        "connection_reset",
        f"{tool}: MCP server {server!r} closed the connection ({detail}); "
        "it is restarted for the next attempt",
    )


def malformed_reply(tool: str, server: str, detail: str) -> ToolError:
    """The ToolError of a call ended by a reply that cannot be a JSON-RPC answer."""
    # transient, as a crash is: the server is restarted and the next attempt may be
    # answered properly; a server that always garbles fails fast on every attempt.
    return ToolError.of(
        "transient",
        "malformed_reply",
        f"{tool}: MCP server {server!r} sent {detail[:200]}; "
        "it is restarted for the next attempt",
    )
