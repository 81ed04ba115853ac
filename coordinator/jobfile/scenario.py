"""A scenario file: a job, its simulated tools and the outcome a replay must show
(docs/design.md §5).

The models here describe the *loaded* scenario, with every subtask's settings merged
from the job's defaults; :mod:`coordinator.jobfile.loader` reads files into them and
:func:`scenario_json_schema` describes what a person writes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from coordinator.job import JobSpec
from coordinator.scripted_person import PersonStep
from subagents.mcp.spec import SERVER_NAME_PATTERN, McpServerSpec
from subagents.models.spec import ModelSpec
from subagents.research.spec import ResearchToolsSpec
from subagents.simulated.spec import SimToolSpec
from subagents.spec import SubtaskSettings

_SPEC = ConfigDict(frozen=True, extra="forbid")

Outcome = Literal["complete", "partial", "failed"]

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class Expect(BaseModel):
    """What a replay must report; a subset match, so only what is listed is checked."""

    model_config = _SPEC

    outcome: Outcome | None = None
    coverage: float | None = Field(default=None, ge=0, le=1)
    elapsed_s: float | None = Field(default=None, ge=0)
    subtasks: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per subtask id, report fields to match (status, attempts, rounds, ...).",
    )
    gaps: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per subtask id, gap fields to match (errorCategory, trigger, route, ...).",
    )
    escalations: int | None = Field(
        default=None, ge=0, description="How many escalations are routed to escalate."
    )
    answer: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Answer fields to match (kind, checks, sources, ...), e.g. "
            "{kind: extractive, checks: {not_prompt: {ok: false}}}."
        ),
    )
    decisions: int | dict[str, dict[str, Any]] | None = Field(
        default=None,
        description=(
            "How many decisions the report lists, or per escalation id (SUBTASK_ID:N) or "
            "subtask id, decision fields to match (do, by, change, ...)."
        ),
    )


class Scenario(BaseModel):
    """A job with simulated tools and expected outcomes, replayable in virtual time."""

    model_config = _SPEC

    scenario: str = Field(min_length=1, description="The scenario's name, unique in a library.")
    description: str = Field(default="", description="What the scenario teaches.")
    seed: int | str = Field(default=0, description="Drives jitter: same seed, same report.")
    job: JobSpec
    tools: dict[str, SimToolSpec] = Field(
        default_factory=dict,
        description="Simulated tools by name; a name may contain dots (server.tool).",
    )
    expect: Expect | None = Field(
        default=None, description="What a replay must report (subset match)."
    )
    mcp_servers: dict[str, McpServerSpec] = Field(
        default_factory=dict,
        description=(
            "MCP servers started over stdio for a real run (`fanout run`), by name; their "
            "tools are called SERVER.TOOL and are not defined under tools."
        ),
    )
    research_tools: ResearchToolsSpec | None = Field(
        default=None,
        description=(
            "The built-in research tools (docs/design.md §10): web.search and web.fetch under web, "
            "docs.search and docs.read over a local folder under docs."
        ),
    )
    model: ModelSpec | None = Field(
        default=None,
        description=(
            "The model that plans every subtask without a plan (and, without subtasks, "
            "decomposes the query); provider scripted replays its turns (docs/design.md §7)."
        ),
    )
    people: list[PersonStep] = Field(
        default_factory=list,
        description=(
            "A scripted person (docs/design.md §17): decisions, plan reviews and requests at "
            "virtual times; a scenario with people attaches a person, so escalations wait."
        ),
    )
    source: str = Field(default="", exclude=True)
    """The file the scenario was read from (set by the loader, never serialized)."""
    # The lines of the fields that opening the run can still refuse (an MCP tool its
    # server does not list, a docs folder the policy forbids), kept by the loader so an
    # error names its line without reading and parsing the file again: a file is read
    # and parsed once per run, errors included.
    _lines: dict[tuple[str | int, ...], int] = PrivateAttr(default_factory=dict)

    def line_of(self, path: tuple[str | int, ...]) -> int | None:
        """The line of ``path`` in the file, for the fields :meth:`run_checked_paths`
        lists and those of the ``research_tools`` block (None for another, or for a
        scenario not read from a file)."""
        return self._lines.get(path)

    def run_checked_paths(self) -> list[tuple[str | int, ...]]:
        """The job's fields that opening the run checks against what its MCP servers
        list: each subtask's ``SERVER.TOOL`` names (allowlist and plan calls). (The
        research tools' block is kept whole by the loader.)"""
        if not self.mcp_servers:
            return []
        paths: list[tuple[str | int, ...]] = []
        for index, sub in enumerate(self.job.subtasks):
            at: tuple[str | int, ...] = ("job", "subtasks", index)
            paths += [(*at, "tools", n) for n in range(len(sub.tools))]
            paths += [(*at, "plan", n, "call") for n in range(len(sub.plan))]
        return paths


# What a subtask may override of the job's defaults; in the file these carry no default
# of their own (the job's defaults apply), so the schema drops the model's defaults.
_SETTINGS_KEYS = tuple(SubtaskSettings.model_fields)

_RESPONSE_KINDS = ("ok", "empty", "partial", "error")


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a scenario *file*, for editors and validators.

    It describes what a person writes rather than the loaded model: ``job.defaults``
    and each subtask's settings are partial, a plan step is exactly one of call,
    escalate or finish, and a response exactly one of ok, empty, partial or error.
    Cross-references (a plan calling an undefined tool, duplicate ids) are beyond JSON
    Schema; the loader reports those.
    """
    schema = Scenario.model_json_schema(mode="validation")
    schema["properties"].pop("source", None)
    defs: dict[str, Any] = schema["$defs"]
    _strip_titles(schema)

    # A subtask's settings fall back to job.defaults, so their model defaults mislead.
    for key in _SETTINGS_KEYS:
        prop = defs["SubtaskSpec"]["properties"][key]
        prop.pop("default", None)
        prop["description"] = f"Overrides job.defaults.{key} for this subtask."
    defs["SubtaskSpec"]["properties"]["retry"] = {
        "$ref": "#/$defs/RetryPolicy",
        "description": "Merged key by key over job.defaults.retry.",
    }

    # A plan step is exactly one kind: the three models require disjoint keys.
    plan = defs["SubtaskSpec"]["properties"]["plan"]
    plan["items"] = {
        "oneOf": [
            {"$ref": "#/$defs/CallStep"},
            {"$ref": "#/$defs/EscalateStep"},
            {"$ref": "#/$defs/FinishStep"},
        ]
    }

    response = defs["ResponseSpec"]
    response["oneOf"] = [{"required": [kind]} for kind in _RESPONSE_KINDS]
    response["properties"]["empty"] = {"const": True, "description": "A valid empty result."}
    response["properties"]["error"] = response["properties"]["error"]["anyOf"][0]
    for kind in ("ok", "partial"):
        response["properties"][kind].pop("default", None)

    # A server's tools are SERVER.TOOL, so its name holds no dot (the loader checks it too).
    servers = schema["properties"]["mcp_servers"]
    servers["patternProperties"] = {SERVER_NAME_PATTERN: servers.pop("additionalProperties")}
    servers["additionalProperties"] = False

    # A plan review is a word or an edit in the file (coordinator.jobfile.people.ReviewSpec).
    review = defs["PersonStep"]["properties"]["review_plan"]
    review["anyOf"] = [
        {"enum": ["approve", "reject"]},
        {"type": "object", "properties": {"edit": {"$ref": "#/$defs/PlanEdit"}},
         "required": ["edit"], "additionalProperties": False},
        {"type": "null"},
    ]
    defs.pop("ReviewSpec", None)

    pattern = defs["ParamSpec"]["properties"]["pattern"]
    pattern["anyOf"][0]["format"] = "regex"

    schema["$schema"] = JSON_SCHEMA_DIALECT
    schema["title"] = "fanout scenario"
    schema["description"] = (
        "A fanout scenario (contract v1): a job, simulated tools with scripted faults, "
        "and the outcome a replay must show."
    )
    return schema


def _strip_titles(node: Any) -> None:
    """Drop pydantic's generated titles: they repeat the property names."""
    if isinstance(node, dict):
        props = node.get("properties")
        for sub in props.values() if isinstance(props, dict) else ():
            if isinstance(sub, dict):
                sub.pop("title", None)
        for value in node.values():
            _strip_titles(value)
    elif isinstance(node, list):
        for item in node:
            _strip_titles(item)
