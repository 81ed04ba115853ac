"""What a subagent hands up when it cannot recover by itself, and what a person may do
about it (docs/design.md §17: an escalation's ``id`` and ``options``)."""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from shared.categories import ErrorCategory, Trigger
from shared.envelope import Finding

Do = Literal["retry", "use_tool", "requery", "answer", "accept", "stop"]
"""What a person's decision has the run do (docs/design.md §17)."""

DOS: Final[tuple[Do, ...]] = get_args(Do)


def _absent(value: object) -> bool:
    return value is None


class Option(BaseModel):
    """One thing a person may choose for an escalation: an id, what it does, its text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    do: Do
    text: str
    # use_tool: the allowlisted tool (and its arguments, when an alternative gave them);
    # requery: the changed query. Left out of the wire for the other kinds.
    tool: str | None = Field(default=None, exclude_if=_absent)
    args: dict[str, Any] | None = Field(default=None, exclude_if=_absent)
    query: str | None = Field(default=None, exclude_if=_absent)


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
    # Given when the escalation is handed to a person (shared.options.offer); left out of
    # the wire otherwise, so an escalation nobody was asked about serialises as before.
    id: str | None = Field(default=None, exclude_if=_absent)
    options: list[Option] | None = Field(default=None, exclude_if=_absent)

    def to_wire(self) -> dict[str, Any]:
        """The escalation as a JSON-ready dict with the wire names."""
        return self.model_dump(mode="json", by_alias=True)
