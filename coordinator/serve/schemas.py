"""The service's response bodies, as pydantic models (the OpenAPI document shows them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ServedStatus = Literal["queued", "running", "interrupted", "finished"]

_OUT = ConfigDict(frozen=True, extra="forbid")


class RunSummary(BaseModel):
    """A row of ``fanout runs --json``; ``status`` also says ``queued`` for a run waiting
    for a slot here, and ``url`` is where the run lives."""

    model_config = _OUT

    id: str
    job: str
    file: str
    started: str
    finished: str | None
    status: ServedStatus
    outcome: str | None
    coverage: float | None
    elapsed_s: float | None
    sessions: int
    url: str


class RunList(BaseModel):
    """``GET /runs``: every stored run, newest first."""

    model_config = _OUT

    runs: list[RunSummary]


class Progress(BaseModel):
    """How many subagents are in each state (retrying and thinking count as running)."""

    model_config = _OUT

    queued: int
    running: int
    done: int
    escalated: int


class SubtaskInfo(BaseModel):
    """A subtask as the job file declares it."""

    model_config = _OUT

    id: str
    query: str
    weight: float


class RunDetail(RunSummary):
    """``GET /runs/{id}``: the row, its progress and the coverage so far."""

    query: str
    progress: Progress
    coverage_so_far: float = Field(description="Weighted share of subtasks covered so far.")
    cancel_requested: bool
    subtasks: list[SubtaskInfo]


class RunCreated(BaseModel):
    """``POST /runs``: the run made (or, with a known Idempotency-Key, made before)."""

    model_config = _OUT

    run_id: str
    status: ServedStatus
    url: str


class InputProblem(BaseModel):
    """One problem with a submitted job file, as ``fanout run`` reports it."""

    model_config = _OUT

    line: int | None
    field: str
    expected: str
    got: str | None
    message: str


class InputProblems(BaseModel):
    """422: the job cannot run; nothing was recorded."""

    model_config = _OUT

    errors: list[InputProblem]


class RunStatus(BaseModel):
    """409: what the run is doing instead (``running`` while a report is asked for)."""

    model_config = _OUT

    status: ServedStatus
    detail: str | None = None


class GapList(BaseModel):
    """``GET /runs/{id}/gaps``: the gaps (while running, those of finished subtasks)."""

    model_config = _OUT

    run_id: str
    status: ServedStatus
    gaps: list[dict[str, Any]]


class CancelAccepted(BaseModel):
    """``POST /runs/{id}/cancel``: the run's status after the cancel."""

    model_config = _OUT

    run_id: str
    status: ServedStatus
    outcome: str | None
    url: str


class StreamTicket(BaseModel):
    """A short-lived credential for one run's event stream (``?ticket=``), for browsers:
    ``EventSource`` cannot send an Authorization header."""

    model_config = _OUT

    ticket: str
    expires_in: int


class Problem(BaseModel):
    """An error that is not about the job file (401, 404, 413, 415, 503)."""

    model_config = _OUT

    detail: str


class AskRequest(BaseModel):
    """``POST /ask``: a question and its options, as ``fanout ask`` takes them."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=4000, description="The question.")
    docs: str | None = Field(
        default=None,
        description="A folder the server serves (`serve --docs`), absolute or relative to "
        "the first; its documents are searched and read.",
    )
    web: bool = Field(
        default=False, description="Research the web with the server's search backend."
    )
    search: str | None = Field(
        default=None, description="searxng:URL, brave or tavily (instead of the server's)."
    )
    model: str | None = Field(
        default=None, description="PROVIDER:NAME (default: the server's `serve --model`)."
    )
    tools: str | None = Field(
        default=None, max_length=1_000_000,
        description="A tools file's text: tools, mcp_servers, research_tools, model.",
    )
    max_subtasks: int = Field(default=6, ge=1, le=50)
    concurrency: int = Field(default=4, ge=1, le=64)
    deadline_s: float | None = Field(default=None, gt=0)
    speed: float = Field(default=1.0, gt=0, le=10_000)
