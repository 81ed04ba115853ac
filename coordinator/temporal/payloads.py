"""What crosses Temporal: the workflow's input, each activity's input and output.

Everything here is a frozen pydantic model, carried by temporalio's pydantic data
converter. Simulated tool specs travel as the JSON a file would hold (``exclude_unset``):
a response model dumped with every field would no longer say which kind it is.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio.common import RetryPolicy

from coordinator.job import JobSpec
from coordinator.jobfile.research import ResearchPolicy, placed_research_tools
from coordinator.jobfile.scenario import Scenario
from coordinator.lead import JobPlanning
from coordinator.report import CoverageReport
from coordinator.routing import Route
from coordinator.temporal.budget import Allowance
from shared.categories import ErrorCategory
from subagents.models.spend import Spent, TokenBudget
from subagents.research.spec import resolve_docs_folder
from subagents.result import SubagentResult
from subagents.spec import SubtaskSpec

DEFAULT_ADDRESS: Final = "127.0.0.1:7233"
DEFAULT_NAMESPACE: Final = "default"
DEFAULT_TASK_QUEUE: Final = "fanout"
WORKFLOW_NAME: Final = "fanout.job"

_FROZEN = ConfigDict(frozen=True, extra="forbid")

ToolSpecs = dict[str, dict[str, Any]]
"""Simulated tools by name, each as the JSON of its spec."""

State = dict[str, Any]
"""A subagent's checkpoint, as :func:`coordinator.checkpoint.state_of` writes it."""


class TemporalSettings(BaseModel):
    """How the workflow runs its activities; times are real seconds, not job time."""

    model_config = _FROZEN

    heartbeat_timeout_s: float = Field(default=30.0, gt=0)
    """A worker silent this long is lost: its round is retried from its last heartbeat."""
    round_timeout_s: float = Field(default=3600.0, gt=0)
    """The longest one subagent round may take (Temporal's start-to-close timeout)."""
    max_activity_attempts: int = Field(default=5, ge=1)
    """Temporal's retries of one round, for infrastructure only (a lost worker)."""
    retry_initial_s: float = Field(default=1.0, gt=0)
    retry_max_s: float = Field(default=30.0, gt=0)
    deadline_grace_s: float | None = Field(default=None, ge=0)
    """How long after the deadline a round may take to hand up; None: 2 heartbeat timeouts."""
    request_poll_s: float = Field(default=0.25, gt=0)
    """How often a round with a person attached asks its workflow for the person's
    requests to it (a stop, a hint; docs/design.md §17)."""

    def retry_policy(self) -> RetryPolicy:
        """Temporal's retry of an activity: infrastructure only, bounded."""
        return RetryPolicy(
            initial_interval=timedelta(seconds=self.retry_initial_s),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=self.retry_max_s),
            maximum_attempts=self.max_activity_attempts,
        )

    @property
    def grace_s(self) -> float:
        """The deadline grace in effect."""
        if self.deadline_grace_s is not None:
            return self.deadline_grace_s
        return 2 * self.heartbeat_timeout_s


class ResearchSetup(BaseModel):
    """A job's built-in research tools (docs/design.md §10), as every worker opens them.

    The documents are read where the worker runs: ``docs.path`` is the folder's absolute
    path as the submitter resolved it, and each worker's machine must have the folder
    there (a shared mount, or a copy synced to the same path). Each worker keeps its own
    index of it (:meth:`coordinator.temporal.resources.WorkerResources.index_home`).
    """

    model_config = _FROZEN

    spec: dict[str, Any]
    """The ``research_tools`` block, its ``docs.path`` absolute, ``web.fetch``'s
    ``allow_private`` the submitting user's own choice."""
    docs_as_written: str | None = None
    """``docs.path`` as the job file wrote it: what a worker without the folder names."""
    guard_search: bool = False
    """The search backend's address is guarded too (a job sent to ``fanout serve``)."""

    @classmethod
    def of(cls, scenario: Scenario, policy: ResearchPolicy | None = None) -> ResearchSetup | None:
        """The setup of ``scenario``'s research tools under ``policy`` (None: it has none).

        Raises:
            InputFileErrors: the policy forbids the folder.
        """
        placed = placed_research_tools(scenario, policy)
        if placed is None:
            return None
        spec, written = placed.spec, None
        if spec.docs is not None:
            written = spec.docs.path
            folder = resolve_docs_folder(spec.docs.path, placed.base_dir)
            spec = spec.model_copy(
                update={"docs": spec.docs.model_copy(update={"path": str(folder)})})
        return cls(spec=spec.model_dump(mode="json"), docs_as_written=written,
                   guard_search=placed.guard_search)


class JobInput(BaseModel):
    """The workflow's input: one job, as ``fanout run`` loaded it."""

    model_config = _FROZEN

    run_id: str
    job: JobSpec
    seed: int | str = 0
    tools: ToolSpecs = Field(default_factory=dict)
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    model: dict[str, Any] | None = None
    """The job's ``model`` block (docs/design.md §7), for model-planned subtasks."""
    synthesize: bool = False
    """The lead agent writes the answer after the report (every job with a model)."""
    followups: bool = False
    """The lead may be asked for follow-ups from the gaps (docs/design.md §11; a scripted lead
    only when its file scripts them)."""
    asks: bool = False
    """The door has an escalation handler: the workflow waits for its ``decide`` signal
    on each escalation routed ``escalate`` (docs/design.md §15)."""
    attended: bool = False
    """A person is attached to the run (the door has a desk): an escalation routed
    ``escalate`` waits in the workflow for the ``decided`` signal, bounded by
    ``job.escalations`` with a durable timer (docs/design.md §17)."""
    source: str = ""
    """The job file: relative MCP ``cwd`` values resolve against its directory."""
    research: ResearchSetup | None = None
    """The job's built-in research tools (None: it declares none)."""
    store: str | None = None
    """The run store file the workers record into (None: not recorded)."""
    speed: float = Field(default=1.0, gt=0)
    settings: TemporalSettings = Field(default_factory=TemporalSettings)

    @classmethod
    def of(
        cls,
        scenario: Scenario,
        *,
        run_id: str,
        store: str | None = None,
        speed: float = 1.0,
        settings: TemporalSettings | None = None,
        research_policy: ResearchPolicy | None = None,
    ) -> JobInput:
        """The input for running ``scenario`` as run ``run_id`` (a job without subtasks
        is decomposed by its lead agent first, on a worker); its research tools under
        ``research_policy`` (the command line's by default).

        Raises:
            InputFileErrors: the policy forbids the job's documents folder.
        """
        return cls(
            run_id=run_id,
            job=scenario.job,
            seed=scenario.seed,
            tools={
                name: spec.model_dump(mode="json", exclude_unset=True)
                for name, spec in scenario.tools.items()
            },
            mcp_servers={
                name: spec.model_dump(mode="json", exclude_unset=True)
                for name, spec in scenario.mcp_servers.items()
            },
            model=None
            if scenario.model is None
            else scenario.model.model_dump(mode="json", exclude_unset=True),
            synthesize=JobPlanning(scenario).synthesizes,
            followups=JobPlanning(scenario).plans_followups,
            source=scenario.source,
            research=ResearchSetup.of(scenario, research_policy),
            store=store,
            speed=speed,
            settings=settings or TemporalSettings(),
        )


class RoundInput(BaseModel):
    """One subagent round: what a worker needs to run (or resume) it."""

    model_config = _FROZEN

    run_id: str
    round: int = Field(ge=1, le=2)
    subtask: SubtaskSpec
    seed: int | str = 0
    tools: ToolSpecs = Field(default_factory=dict)
    """Every simulated tool of the job: a defined tool off the allowlist is refused as
    ``permission``, an undefined one differently, so the subtask must see them all."""
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """The job's MCP servers (each worker starts a set once and keeps it)."""
    research: ResearchSetup | None = None
    """The job's research tools (each worker opens a set once and keeps it)."""
    model: dict[str, Any] | None = None
    source: str = ""
    store: str | None = None
    speed: float = Field(default=1.0, gt=0)
    started_at: float
    """The job's start (epoch seconds): job time 0 on every worker."""
    deadline_s: float | None = None
    routing: dict[ErrorCategory, Route | None] = Field(default_factory=dict)
    state: State | None = None
    """Where the round starts from: the first round's final state in the retry round."""
    budget: TokenBudget | None = None
    """``job.budget`` (None: the job has none, or the subtask is not planned by the model)."""
    spent_before: Spent = Field(default_factory=lambda: [0, 0, 0])
    """What the job's other model calls had spent, as the workflow knew when it started."""
    search_first: bool = False
    """``job.search_first`` is ``auto``: a model-planned subtask searches its query first."""
    allowance: Allowance | None = None
    """What the workflow lent this round of the subagents' share (coordinator.temporal.budget)."""
    attended: bool = False
    """A person is attached: an escalated round brings back its state, which a person's
    ``retry`` continues from (docs/design.md §17), and the round asks its workflow for
    the person's requests to it (query ``asked``) as it runs."""
    request_poll_s: float = Field(default=0.25, gt=0)
    """How often an attended round asks its workflow for requests (TemporalSettings)."""
    asked_from: int = Field(default=0, ge=0)
    """Where this round's requests begin in the subtask's list (query ``asked``): those
    before were made to an earlier round, or between rounds."""


class RoundOutput(BaseModel):
    """A finished round: the result, and the state a retry round would continue from."""

    model_config = _FROZEN

    result: SubagentResult
    state: State | None = None
    spent: Spent | None = None
    """What the subagent's model calls spent in all, this round's included (None: none)."""
    asked: int = Field(default=0, ge=0)
    """How many of this round's requests (from ``asked_from``) its subagent took: a hint
    after them was never read (docs/design.md §17)."""


class SettleItem(BaseModel):
    """A subtask whose round never ran, or never came back: what is known of it."""

    model_config = _FROZEN

    subtask: SubtaskSpec
    state: State | None = None
    """The last state known: the round's input state, or its last heartbeat's."""
    done: bool = False
    """The state is the round's final one (it finished, its report was lost)."""


class QueuedInput(BaseModel):
    """A round's subtasks waiting for a lane, recorded as a local run records them."""

    model_config = _FROZEN

    run_id: str
    store: str
    at_s: float
    subtask_ids: list[str]


class DecisionEventInput(BaseModel):
    """An escalation that waits for a person, or its decision, recorded as a local run's
    desk records it: an event of its subtask (docs/design.md §17)."""

    model_config = _FROZEN

    run_id: str
    store: str
    subtask_id: str
    kind: str
    """``decision.needed`` or ``decision.made`` (coordinator/people.py)."""
    at_s: float
    data: dict[str, Any]


class SettleInput(BaseModel):
    """Subagents the workflow ends itself: queued at the deadline, or lost for good."""

    model_config = _FROZEN

    run_id: str
    seed: int | str = 0
    store: str | None = None
    at_s: float
    """The job time they end at."""
    trigger: Literal["deadline", "cancelled", "internal_error", "threshold_breach"]
    message: str = ""
    """For ``internal_error``: what Temporal reported; for ``threshold_breach`` (a new
    subagent not started, the job's token budget spent): why."""
    items: list[SettleItem]


class LeadPosition(BaseModel):
    """How far the lead agent got: a later activity of the lead continues from here.

    A local run keeps one lead (one client, one jitter stream) from the decomposition to
    the synthesis; on Temporal each is an activity of its own, maybe on another worker.
    """

    model_config = _FROZEN

    model_attempts: int = Field(ge=0)
    """The lead's model calls so far (a scripted model's next ``lead`` turn)."""
    trace: int = Field(ge=0)
    """The lead's trace-id position."""
    rng: list[Any]
    """The state of the lead's jitter stream (``random.Random.getstate()`` as JSON)."""
    spent: Spent = Field(default_factory=lambda: [0, 0, 0])
    """What the lead's model calls spent so far (job.budget)."""


class CatalogueInput(BaseModel):
    """A job's MCP servers and research tools, whose catalogue a worker records."""

    model_config = _FROZEN

    run_id: str
    store: str
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    research: ResearchSetup | None = None
    source: str = ""


class DecompositionInput(BaseModel):
    """A job without subtasks, for its lead agent to plan (docs/design.md §7)."""

    model_config = _FROZEN

    run_id: str
    job: JobSpec
    seed: int | str = 0
    tools: ToolSpecs = Field(default_factory=dict)
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    research: ResearchSetup | None = None
    model: dict[str, Any]
    source: str = ""
    store: str | None = None
    speed: float = Field(default=1.0, gt=0)
    started_at: float
    review: bool = False
    """A person reviews the plan before it runs (``job.review_plan``, attended): the
    plan is recorded once reviewed (``record_plan``), not here."""


class Decomposition(BaseModel):
    """The lead's plan; with the lead's gap beside it when the plan is the degraded one
    (docs/design.md §7); only a decomposition lost on Temporal has a gap and no subtasks."""

    model_config = _FROZEN

    subtasks: list[SubtaskSpec] | None = None
    """The planned subtasks (each planned by the model), in the lead's order."""
    gap: SubagentResult | None = None
    """The lead's result when it could not plan: reported as a gap of ``lead``."""
    lead: LeadPosition | None = None
    """Where the lead stands after planning (None for a decomposition lost on Temporal)."""
    tools: list[str] | None = None
    """The names of the job's tools as the lead saw them (a plan edit may name only
    these, docs/design.md §17); None for a decomposition lost on Temporal."""


class PlanInput(BaseModel):
    """The plan a person reviewed, recorded as the decomposition records an unreviewed
    one: where the lead stands, then the ``plan`` event (docs/design.md §17)."""

    model_config = _FROZEN

    run_id: str
    store: str
    subtasks: list[SubtaskSpec]
    gap: SubagentResult | None = None
    lead: LeadPosition
    at_s: float


class FollowupInput(BaseModel):
    """The report after the retry round, for the lead to plan follow-ups from
    (docs/design.md §11)."""

    model_config = _FROZEN

    run_id: str
    job: JobSpec
    """The job as it runs (its subtasks are the plan's)."""
    seed: int | str = 0
    tools: ToolSpecs = Field(default_factory=dict)
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    research: ResearchSetup | None = None
    model: dict[str, Any]
    source: str = ""
    store: str | None = None
    speed: float = Field(default=1.0, gt=0)
    started_at: float
    report: CoverageReport
    lead: LeadPosition | None = None
    """Where the lead stands after its decomposition (None: it did not decompose)."""


class FollowupPlan(BaseModel):
    """The follow-ups the lead planned (maybe none), and where the lead stands after."""

    model_config = _FROZEN

    followups: list[SubtaskSpec] = Field(default_factory=list)
    lead: LeadPosition | None = None


class SynthesisInput(BaseModel):
    """The assembled report, for the lead agent to write the answer from."""

    model_config = _FROZEN

    run_id: str
    seed: int | str = 0
    model: dict[str, Any]
    store: str | None = None
    speed: float = Field(default=1.0, gt=0)
    started_at: float
    report: CoverageReport
    lead: LeadPosition | None = None
    """Where the lead stands after its decomposition (None: it did not decompose)."""
    budget: TokenBudget | None = None
    spent: dict[str, Spent] = Field(default_factory=dict)
    """What each subtask (and the lead) spent, as the workflow's meter holds it."""


class FinishInput(BaseModel):
    """The report to record as the run's end."""

    model_config = _FROZEN

    run_id: str
    store: str
    report: CoverageReport
    routing: dict[ErrorCategory, Route | None] = Field(default_factory=dict)
