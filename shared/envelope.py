"""The tool result envelope: every tool call ends in one, success or failure.

The JSON wire names (``isError``, ``errorCategory``, ``isRetryable``) are aliases; a
success serialises only the success fields and a failure only the failure fields, as
docs/design.md §2 shows them.
"""

from __future__ import annotations

import json
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from shared.categories import (
    RETRYABLE,
    ChangedState,
    ErrorCategory,
    NextSafeAction,
    default_next_action,
)
from shared.trusted import Prevalidated
from shared.wire import COMPACT_JSON, field_plan, plain_field


class ToolError(BaseModel):
    """What went wrong in one tool call, categorised so a program can route on it."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True)

    category: ErrorCategory = Field(alias="errorCategory")
    error_type: str
    message: str
    retryable: bool = Field(alias="isRetryable")
    next_safe_action: NextSafeAction
    field: str | None = None
    expected: str | None = None
    retry_after_s: float | None = None
    rule: str | None = None
    limit: Any = None
    requested: Any = None
    scope: str | None = None

    @classmethod
    def of(
        cls,
        category: ErrorCategory,
        error_type: str,
        message: str,
        **details: Any,
    ) -> ToolError:
        """A ToolError with the retryability and next action docs/design.md §2 gives its
        category."""
        details.setdefault("retryable", RETRYABLE[category])
        details.setdefault("next_safe_action", default_next_action(category, error_type))
        return cls(category=category, error_type=error_type, message=message, **details)


_SUCCESS_ONLY: Final = frozenset({"empty", "complete", "data"})
_ERROR_ONLY: Final = frozenset(
    {
        "errorCategory",
        "error_type",
        "isRetryable",
        "message",
        "field",
        "expected",
        "retry_after_s",
    }
)
# Business and permission details appear only when a tool reported them.
_OPTIONAL_ERROR: Final = frozenset({"rule", "limit", "requested", "scope", "idempotency_key"})


class ToolResult(BaseModel):
    """The envelope of one logical tool call, after every retry it took."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True)

    ok: bool
    is_error: bool = Field(alias="isError")
    tool: str
    trace_id: str
    attempts: int = 1
    changed_state: ChangedState = False
    empty: bool = False
    complete: bool = True
    data: Any = None
    next_safe_action: NextSafeAction = "continue"
    elapsed_s: float = 0.0
    category: ErrorCategory | None = Field(default=None, alias="errorCategory")
    error_type: str | None = None
    retryable: bool = Field(default=False, alias="isRetryable")
    message: str | None = None
    field: str | None = None
    expected: str | None = None
    retry_after_s: float | None = None
    rule: str | None = None
    limit: Any = None
    requested: Any = None
    scope: str | None = None
    idempotency_key: str | None = None

    @classmethod
    def success(
        cls,
        tool: str,
        data: Any,
        *,
        trace_id: str,
        empty: bool = False,
        complete: bool = True,
        changed_state: ChangedState = False,
        **extra: Any,
    ) -> ToolResult:
        """A successful envelope; ``empty`` marks a valid result with nothing in it."""
        return cls(
            ok=True,
            is_error=False,
            tool=tool,
            trace_id=trace_id,
            data=data,
            empty=empty,
            complete=complete,
            changed_state=changed_state,
            next_safe_action="continue",
            **extra,
        )

    @classmethod
    def failure(
        cls, tool: str, error: ToolError, *, trace_id: str, **extra: Any
    ) -> ToolResult:
        """A failed envelope carrying ``error``'s category, retryability and details."""
        fields = error.model_dump()
        return cls(
            ok=False,
            is_error=True,
            tool=tool,
            trace_id=trace_id,
            **fields,
            **extra,
        )

    @property
    def error(self) -> ToolError | None:
        """The failure as a ToolError, or None for a success."""
        if self.ok or self.category is None:
            return None
        return ToolError(
            category=self.category,
            error_type=self.error_type or "error",
            message=self.message or "",
            retryable=self.retryable,
            next_safe_action=self.next_safe_action,
            field=self.field,
            expected=self.expected,
            retry_after_s=self.retry_after_s,
            rule=self.rule,
            limit=self.limit,
            requested=self.requested,
            scope=self.scope,
        )

    @model_serializer(mode="wrap")
    def _wire(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        by_alias = "isError" in data
        drop = _ERROR_ONLY if self.ok else _SUCCESS_ONLY
        if not by_alias:
            # Python names: translate the alias sets to attribute names.
            aliases = {"errorCategory": "category", "isRetryable": "retryable"}
            drop = frozenset(aliases.get(k, k) for k in drop)
        out = {k: v for k, v in data.items() if k not in drop}
        for key in _OPTIONAL_ERROR:
            if out.get(key) is None:
                out.pop(key, None)
        return out

    def to_wire(self) -> dict[str, Any]:
        """The envelope as a JSON-ready dict with the wire names."""
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        """Compact JSON with the wire names, as it enters a subagent's context."""
        wire = self._plain_wire()
        return COMPACT_JSON.encode(self.to_wire() if wire is None else wire)

    def _plain_wire(self) -> dict[str, Any] | None:
        """``to_wire()`` read straight from the fields, or None unless that is exact.

        Every field must hold a plain value of its declared type (see shared.wire), so
        pydantic's JSON-mode dump would return it unchanged; the key order and the
        dropped keys are those of ``_wire``. The dict shares ``data``: it is only dumped.
        """
        plan = _TOOL_RESULT_PLAN
        if plan is None or type(self) is not ToolResult:
            return None
        values = self.__dict__
        drop = _ERROR_ONLY if self.ok else _SUCCESS_ONLY
        out: dict[str, Any] = {}
        for name, key, exact in plan:
            if key in drop:
                continue
            value = values[name]
            if value is None and key in _OPTIONAL_ERROR:
                continue
            if not plain_field(value, exact):
                return None
            out[key] = value
        return out

    def to_mcp(self) -> dict[str, Any]:
        """The envelope as an MCP ``CallToolResult`` (content, structuredContent, isError)."""
        wire = self.to_wire()
        text = json.dumps(wire["data"] if self.ok else wire, ensure_ascii=False)
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": wire,
            "isError": self.is_error,
        }


_TOOL_RESULT_PLAN: Final = field_plan(ToolResult)


# The tools whose one result is one document (docs/design.md §10): their findings carry where it
# came from. A recording replays them as simulated tools of the same name, so a replay's
# findings carry the same sources.
_SOURCE_TOOLS: Final = {"web.fetch": "url", "docs.read": "path"}


PERSON: Final = "person"
"""The tool name of a finding a person gave (docs/design.md §17): evidence, cited as such."""


class Finding(BaseModel):
    """One successful result a subagent found; empty results are findings too.

    A finding of a document tool (``web.fetch``, ``docs.read``) carries its source:
    ``url`` (the final one, after redirects) or ``path``, and ``title``; left out of the
    wire otherwise, so other findings serialise exactly as before.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True)

    tool: str
    data: Any = None
    args: dict[str, Any] = Field(default_factory=dict)
    empty: bool = False
    complete: bool = True
    trace_id: str | None = None
    url: str | None = Field(default=None, exclude_if=lambda v: v is None)
    path: str | None = Field(default=None, exclude_if=lambda v: v is None)
    title: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # A person's finding (tool ``person``, docs/design.md §17): who gave it and when (ISO 8601
    # where the door knows the wall time, else the run's seconds as "+30s"); its text is
    # ``data.text`` and its source, if any, ``url``. Left out of the wire for tool findings.
    by: str | None = Field(default=None, exclude_if=lambda v: v is None)
    at: str | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def by_person(self) -> bool:
        """Whether a person gave this finding (an ``answer`` decision), not a tool."""
        return self.tool == PERSON and self.by is not None

    @classmethod
    def from_result(cls, result: ToolResult, args: dict[str, Any]) -> Finding:
        """The finding a successful envelope contributes."""
        url = path = title = None
        kind = _SOURCE_TOOLS.get(result.tool)
        data = result.data
        if kind is not None and isinstance(data, dict):
            where = data.get("final_url") or data.get("url") if kind == "url" else data.get("path")
            if isinstance(where, str) and where:
                url, path = (where, None) if kind == "url" else (None, where)
                raw_title = data.get("title")
                title = raw_title if isinstance(raw_title, str) else ""
        # The envelope is validated already: build the finding without validating again,
        # sharing one fields-set with every other finding (shared.trusted).
        return _FINDING(
            {
                "tool": result.tool,
                "data": data,
                "args": dict(args),
                "empty": result.empty,
                "complete": result.complete,
                "trace_id": result.trace_id,
                "url": url,
                "path": path,
                "title": title,
                "by": None,
                "at": None,
            }
        )


_FINDING = Prevalidated(Finding)
