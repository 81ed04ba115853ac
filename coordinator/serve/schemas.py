"""The service's response bodies, as pydantic models (the OpenAPI document shows them)."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

# The store's own vocabulary (coordinator.store.runs.RunStatus): the API says what it says.
ServedStatus = Literal["queued", "running", "interrupted", "finished"]

_OUT = ConfigDict(frozen=True, extra="forbid")


class RunSummary(BaseModel):
    """A row of ``fanout runs --json``, and ``url``, where the run lives."""

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
    waiting: int = Field(0, description="How many of the run's escalations wait for a "
                         "person (GET /runs/{id}/pending lists a running run's); an "
                         "interrupted run's wait again once it is resumed.")
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


# -- the OpenAPI document's job schema and links ----------------------------------------

_JOB_PREFIX = "Job"
_RUN_OPERATIONS = {
    "GetRun": "get_run",
    "GetReport": "get_report",
    "GetGaps": "get_gaps",
    "CancelRun": "cancel_run",
    "StreamTicket": "stream_ticket",
    "RunEvents": "run_event_stream",
    "GetPending": "get_pending",
    "DecideEscalation": "decide_escalation",
    "ReviewPlan": "review_plan",
    "RequestSubtask": "request_subtask",
}
# From POST /runs to every operation on the run it made, so a client (and stateful
# testing) knows where the new run's id goes.
RUN_LINKS: Final[dict[str, Any]] = {
    name: {"operationId": op, "parameters": {"run_id": "$response.body#/run_id"},
           "description": f"The run just made, through {op}."}
    for name, op in _RUN_OPERATIONS.items()
}
_JOB_REF = {"$ref": f"#/components/schemas/{_JOB_PREFIX}File"}
# A job that runs (in no time: its one tool answers at once), for clients to start from.
JOB_EXAMPLE: Final[dict[str, Any]] = {
    "scenario": "example",
    "seed": 1,
    "job": {
        "query": "What does the example tool say?",
        "subtasks": [{"id": "ask", "query": "Ask the example tool", "tools": ["lookup"],
                      "plan": [{"call": "lookup", "args": {"q": "hello"}}]}],
    },
    "tools": {"lookup": {"params": {"q": {"type": "string"}},
                         "responses": [{"ok": {"answer": "hello back"}}]}},
}
# `fanout schema` for both media types: YAML is read into the same document as JSON.
JOB_BODY: Final[dict[str, Any]] = {
    "required": True,
    "description": "A job file, as `fanout run` reads it; its JSON Schema is `fanout schema`. "
    "Cross-references (a plan calling an undeclared tool, two subtasks with one id) are "
    "beyond JSON Schema: the loader answers them with 422 and their lines.",
    "content": {
        "application/yaml": {"schema": _JOB_REF, "example": JOB_EXAMPLE},
        "application/json": {"schema": _JOB_REF, "example": JOB_EXAMPLE},
    },
}


# What either submission (POST /runs, POST /ask) may be answered besides its own refusals.
SUBMISSION_REFUSED: Final[dict[int | str, dict[str, Any]]] = {
    408: {"model": Problem, "description": "The body did not arrive within the server's "
          "`--body-timeout`."},
    413: {"model": Problem, "description": "The body is over 1 MiB (refused on its "
          "Content-Length, or as soon as the bytes pass it)."},
    503: {"model": Problem, "description": "Every slot is taken and the queue is full; "
          "`Retry-After` says when to try again."},
}
# The 422 of POST /runs: a job's problems have their lines; what a job is refused for
# beyond its document is named field by field.
JOB_REFUSED = (
    "The job cannot run, and nothing is recorded: each problem in the document with its "
    "line (a malformed document, or a cross-reference JSON Schema cannot say). Beyond the "
    "document, a job is refused for what this server has: `model.api_key_env` or "
    "`model.base_url` (a job names neither another key variable nor an endpoint, and the "
    "server must have the provider's key); `research_tools.docs.path` (a folder it does not "
    "serve); `research_tools.web.search` or `research_tools.web.api_key_env` (a search "
    "backend whose key it lacks); `mcp_servers` (unless it was started with `--allow-mcp`); "
    "`Idempotency-Key` when the key already made a run from a different request (the "
    "answer of the IETF httpapi Idempotency-Key draft)."
)


# The 422 of POST /ask: what an ask is refused for beyond its schema, each field named.
ASK_REFUSED = (
    "The ask cannot run, and nothing is recorded. Beyond what its schema says, an ask is "
    "refused for what this server has: `docs` naming a folder it does not serve (the "
    "problem lists those it does), or any folder when it serves none (it was started "
    "without `--docs`: omit `docs`); `web` when it has no search backend; `search` or "
    "`research_tools.web.search` naming a backend it does not know or has no key for; "
    "`model` or `model.api_key_env` naming a provider whose key it lacks, or `scripted` "
    "without turns; `tools` when there is nothing to research with (no folder served, and "
    "no `web`, `search` or `tools`) or when the tools text does not load or asks for what "
    "a job may not (each problem with its line in it; `mcp_servers` unless the server was "
    "started with `--allow-mcp`); `question` when it is blank; `Idempotency-Key` when the "
    "key already made a run from a different request (the answer of the IETF httpapi "
    "Idempotency-Key draft)."
)
# A client's first ask is the question alone; the examples phase of schemathesis sends
# both, so the document's declared refusals are exercised on every server it tests.
ASK_EXAMPLES: dict[str, Any] = {
    "question": {"summary": "Just the question: the server's own folder, model and tools",
                 "value": {"question": "How do sodium-ion cells do in the cold?"}},
    "folder": {"summary": "A served folder, and the web",
               "value": {"question": "How do sodium-ion cells do in the cold?", "docs": ".",
                         "web": True}},
}


def _rename_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                value = f"#/components/schemas/{_JOB_PREFIX}{value.removeprefix('#/$defs/')}"
            out[key] = _rename_refs(value)
        return out
    if isinstance(node, list):
        return [_rename_refs(v) for v in node]
    return node


def job_schemas() -> dict[str, Any]:
    """The scenario file's JSON Schema as OpenAPI components (``JobFile`` and its parts,
    each ``$defs`` entry renamed ``Job…`` so it cannot clash with the API's own)."""
    from coordinator.jobfile.scenario import scenario_json_schema

    schema = dict(scenario_json_schema())
    defs = schema.pop("$defs", {})
    schema.pop("$schema", None)
    out = {f"{_JOB_PREFIX}{name}": _rename_refs(part) for name, part in defs.items()}
    out[f"{_JOB_PREFIX}File"] = _rename_refs(schema)
    return out


class AskRequest(BaseModel):
    """``POST /ask``: a question and its options, as ``fanout ask`` takes them."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=4000, description="The question.")
    # An empty string names no folder, backend, model or tools file: the schema says so
    # (minLength) rather than the server refusing a schema-valid "" with a 422.
    docs: str | None = Field(
        default=None, min_length=1,
        description="A folder the server serves (`serve --docs`), absolute or relative to "
        "the first; its documents are searched and read.",
    )
    web: bool = Field(
        default=False, description="Research the web with the server's search backend."
    )
    search: str | None = Field(
        default=None, min_length=1,
        description="searxng:URL, brave or tavily (instead of the server's).",
    )
    model: str | None = Field(
        default=None, min_length=1,
        description="PROVIDER:NAME (default: the server's `serve --model`).",
    )
    tools: str | None = Field(
        default=None, min_length=1, max_length=1_000_000,
        description="A tools file's text: tools, mcp_servers, research_tools, model.",
    )
    max_subtasks: int = Field(default=6, ge=1, le=50)
    concurrency: int = Field(default=4, ge=1, le=64)
    deadline_s: float | None = Field(default=None, gt=0)
    speed: float = Field(default=1.0, gt=0, le=10_000)


# -- a person decides (docs/design.md §17) ----------------------------------------------


class PendingEscalation(BaseModel):
    """An escalation that waits for a person's decision."""

    model_config = _OUT

    id: str = Field(description="SUBTASK_ID:N, unique in the run.")
    subtask_id: str
    errorCategory: str | None
    trigger: str
    message: str
    attempted_query: str
    options: list[dict[str, Any]] = Field(
        description="[{id, do, text, tool?, args?, query?}]: what the person may choose.")
    since_s: float = Field(description="The run's seconds when the wait began.")


class PendingPlan(BaseModel):
    """The lead's plan, waiting for review: its subtasks as a job file declares them."""

    model_config = _OUT

    subtasks: list[dict[str, Any]]


class Pending(BaseModel):
    """``GET /runs/{id}/pending``: what waits for a person now."""

    model_config = _OUT

    escalations: list[PendingEscalation]
    plan: PendingPlan | None


class RequestMade(BaseModel):
    """``POST /runs/{id}/subtasks/{sid}/request``: the request, as the subtask hears it."""

    model_config = _OUT

    subtask_id: str
    by: str
    at_s: float
    stop: bool | None = None
    hint: str | None = None
    at: str | None = None


_TEXT: Final[dict[str, Any]] = {"type": "string", "pattern": r"\S"}
_DOS: Final = ["retry", "use_tool", "requery", "answer", "accept", "stop"]

# The bodies' schemas say everything a door's parse checks, so a request the document
# calls valid is refused only for what depends on the run (an option the escalation
# does not offer, an edit naming no subtask of the plan): 409 or the 422s declared.
DECISION_BODY: Final[dict[str, Any]] = {
    "required": True,
    "description": "An escalation and an option by id, or by kind (`do`: the first option "
    "of that kind); `answer` takes `text` (and an http(s) `source`), `requery` may take "
    "`text` as the changed query.",
    "content": {"application/json": {
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["escalation"],
            "properties": {
                "escalation": {**_TEXT,
                               "description": "The pending escalation's id (SUBTASK_ID:N)."},
                "option": {**_TEXT, "description": "An option id (o1, …)."},
                "do": {"enum": _DOS},
                "text": _TEXT,
                "source": _TEXT,
            },
            "oneOf": [
                {"required": ["option"], "not": {"required": ["do"]}},
                {"required": ["do"], "not": {"required": ["option"]}},
            ],
        },
        "examples": {
            "option": {"value": {"escalation": "patents:1", "option": "o2"}},
            "answer": {"value": {"escalation": "patents:1", "do": "answer",
                                 "text": "Three patents were filed in 2025.",
                                 "source": "https://example.org/patents"}},
        },
    }},
}
DECISION_REFUSED = (
    "The decision cannot be made: the body is malformed, or it does not fit the waiting "
    "escalation; each problem names its field: `escalation`, `option` (not one the "
    "escalation offers), `do` (a kind it does not offer), `text` (answer without it, or "
    "text where the kind takes none), `source` (not an http(s) URL, or where the kind "
    "takes none), or an unknown key."
)

_CHANGE: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "tools": {"type": "array", "items": {"type": "string"}},
        "weight": {"type": "number", "minimum": 0, "maximum": 1e9},
    },
}
PLAN_BODY: Final[dict[str, Any]] = {
    "required": True,
    "description": "`{\"verdict\": \"approve\"}`, `{\"verdict\": \"reject\"}` (the run ends "
    "failed, gap plan_rejected), or `{\"edit\": {remove, change, add}}`: subtasks removed, "
    "changed (query, tools, weight), added (id, query, tools, weight; the job's defaults "
    "apply), checked as a job file is.",
    "content": {"application/json": {
        "schema": {
            "oneOf": [
                {"type": "object", "additionalProperties": False, "required": ["verdict"],
                 "properties": {"verdict": {"enum": ["approve", "reject"]}}},
                {"type": "object", "additionalProperties": False, "required": ["edit"],
                 "properties": {"edit": {
                     "type": "object",
                     "additionalProperties": False,
                     "properties": {
                         "remove": {"type": "array", "items": {"type": "string"}},
                         "change": {"type": "object", "additionalProperties": _CHANGE},
                         "add": {"type": "array", "items": {"type": "object"}},
                     },
                 }}},
            ],
        },
        "examples": {
            "approve": {"value": {"verdict": "approve"}},
            "edit": {"value": {"edit": {"remove": ["news"],
                                        "change": {"market": {"weight": 2}}}}},
        },
    }},
}
PLAN_REFUSED = (
    "The review cannot be made: the body is malformed, or the edit is no valid plan; each "
    "problem names its field: `verdict`, `edit`, or a path in the edit (`edit.remove[0]`, "
    "`edit.change.news.weight`, `edit.add[0].query`)."
)
REQUEST_BODY: Final[dict[str, Any]] = {
    "required": True,
    "description": "`{\"stop\": true}`: the subtask stops and hands up what it has (trigger "
    "human_request); `{\"hint\": \"...\"}`: a message its model reads at its next turn.",
    "content": {"application/json": {
        "schema": {
            "oneOf": [
                {"type": "object", "additionalProperties": False, "required": ["stop"],
                 "properties": {"stop": {"const": True}}},
                {"type": "object", "additionalProperties": False, "required": ["hint"],
                 "properties": {"hint": _TEXT}},
            ],
        },
        "examples": {"stop": {"value": {"stop": True}},
                     "hint": {"value": {"hint": "look for the 2025 filings first"}}},
    }},
}
REQUEST_REFUSED = (
    "The request is malformed; the problem names its field: `stop` (neither or both of "
    "stop and hint, or stop not true), `hint` (empty), or an unknown key."
)
