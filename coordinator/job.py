"""A fan-out job: the query, its subtasks, concurrency, deadline and routing overrides."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from coordinator.routing import Route, RoutingTable
from shared.categories import ErrorCategory
from shared.clock import MAX_SECONDS
from shared.trusted import FieldsSets, sharing_fields_set
from subagents.models.spend import TokenBudget
from subagents.spec import SubtaskSettings, SubtaskSpec


class EscalationWait(BaseModel):
    """How long an escalation handed to a person waits, and what a timeout decides
    (docs/design.md §17)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    wait_s: float = Field(
        default=900, gt=0, le=MAX_SECONDS,
        description="Seconds an escalation waits for a person's decision.",
    )
    on_timeout: Literal["accept", "stop"] = Field(
        default="accept",
        description="What a wait that times out decides (by: timeout): keep the gap, or stop.",
    )


class JobSpec(BaseModel):
    """The job a coordinator runs; subtasks arrive with their defaults already merged."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    concurrency: int = Field(default=4, ge=1)
    deadline_s: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    routing: dict[ErrorCategory, Route | None] = Field(default_factory=dict)
    defaults: SubtaskSettings = Field(default_factory=SubtaskSettings)
    # Empty only in a file whose model decomposes the query (the lead agent, docs/design.md §7);
    # the loader refuses an empty list otherwise.
    subtasks: list[SubtaskSpec] = Field(default_factory=list)
    max_subtasks: int = Field(
        default=6, ge=1, description="At most this many subtasks in a lead agent's plan."
    )
    budget: TokenBudget | None = Field(
        default=None,
        description="The most tokens the job's model calls may spend (subagents and lead).",
    )
    # Follow-ups (docs/design.md §11): rounds of follow-ups the lead may plan from the gaps. None
    # is the default, decided when the lead plans: 1 for a job it decomposed, else 0.
    followups: int | None = Field(default=None, ge=0, le=1)
    max_followups: int = Field(
        default=3, ge=1, description="At most this many follow-ups in the lead's plan."
    )
    answer: Literal["auto", "extractive"] = Field(
        default="auto",
        description=(
            "auto: the lead model writes the answer (a job with a model); extractive: the "
            "answer is the best passages of the findings, each cited (retrieval only, "
            "fanout ask without a model)."
        ),
    )
    search_first: Literal["auto", "off"] = Field(
        default="auto",
        description=(
            "auto: a model-planned subtask that may call a search (docs.search, web.search, "
            "a tool declared search: true) starts by searching its own query; off: the "
            "model's first turn decides (docs/design.md §7)."
        ),
    )

    # A person decides (docs/design.md §17); both left out of the wire when unset, so a job
    # that sets neither serialises as before.
    escalations: EscalationWait | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description=(
            "Escalations wait for a person's decision: wait_s bounds the wait, on_timeout "
            "(accept or stop) decides one nobody answered. On fanout serve, setting it "
            "attaches a person to the run."
        ),
    )
    review_plan: bool = Field(
        default=False,
        exclude_if=lambda v: v is False,
        description="The lead's plan waits for a person to approve, edit or reject it.",
    )

    def escalation_wait(self) -> EscalationWait:
        """The job's bound on a wait for a decision (the default when it set none)."""
        return self.escalations or _DEFAULT_WAIT

    def followup_rounds(self) -> int:
        """Rounds of follow-ups this job runs (0 or 1; a file's subtasks default to 0)."""
        return 0 if self.followups is None else self.followups

    @cached_property
    def routes(self) -> RoutingTable:
        """The job's routing table, built once per job. A ``model_copy`` shares it: give
        a job other routes by building a new JobSpec, never by updating ``routing``."""
        return RoutingTable(self.routing)

    @field_validator("subtasks", mode="after")
    @classmethod
    def _one_fields_set_per_shape(cls, subtasks: list[SubtaskSpec]) -> list[SubtaskSpec]:
        # Half of a validated subtask's memory was its own copy of an equal fields-set,
        # and each step of its plan had one too. Each subtask is replaced in the list
        # validation just made as the walk reaches it, so the next one rebuilt can reuse
        # the memory freed (a given subtask and its plan are not changed).
        common: FieldsSets = {}
        for i, sub in enumerate(subtasks):
            plan = [sharing_fields_set(step, common) for step in sub.plan]
            if any(new is not old for new, old in zip(plan, sub.plan, strict=True)):
                subtasks[i] = sharing_fields_set(sub, common, plan=plan)
            else:
                subtasks[i] = sharing_fields_set(sub, common)
        return subtasks

    @model_validator(mode="after")
    def _unique_ids(self) -> JobSpec:
        seen: set[str] = set()
        for sub in self.subtasks:
            if sub.id in seen:
                raise ValueError(f"duplicate subtask id {sub.id!r}")
            seen.add(sub.id)
        return self


_DEFAULT_WAIT = EscalationWait()
