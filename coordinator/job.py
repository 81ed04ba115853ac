"""A fan-out job: the query, its subtasks, concurrency, deadline and routing overrides."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.categories import ErrorCategory
from subagents.spec import SubtaskSettings, SubtaskSpec

Route = Literal["retry_later", "gap", "escalate"]


class JobSpec(BaseModel):
    """The job a coordinator runs; subtasks arrive with their defaults already merged."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    concurrency: int = Field(default=4, ge=1)
    deadline_s: float | None = Field(default=None, gt=0)
    routing: dict[ErrorCategory, Route | None] = Field(default_factory=dict)
    defaults: SubtaskSettings = Field(default_factory=SubtaskSettings)
    subtasks: list[SubtaskSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> JobSpec:
        seen: set[str] = set()
        for sub in self.subtasks:
            if sub.id in seen:
                raise ValueError(f"duplicate subtask id {sub.id!r}")
            seen.add(sub.id)
        return self
