"""What a subagent hands up when it cannot recover by itself."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.categories import ErrorCategory, Trigger
from shared.envelope import Finding


class Escalation(BaseModel):
    """A subagent's structured hand-off: what it tried, what it has, what could work."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True)

    subtask_id: str
    category: ErrorCategory | None = Field(default=None, alias="errorCategory")
    error_type: str | None = None
    retryable: bool = Field(default=False, alias="isRetryable")
    trigger: Trigger
    message: str
    attempted_query: str
    partial_results: list[Finding] = Field(default_factory=list)
    alternatives: list[str] = Field(default_factory=list)
    attempts: int = 0
    trace_ids: list[str] = Field(default_factory=list)
    field: str | None = None
    expected: str | None = None
    tool: str | None = None
    step: int | None = None

    def to_wire(self) -> dict[str, Any]:
        """The escalation as a JSON-ready dict with the wire names."""
        return self.model_dump(mode="json", by_alias=True)
