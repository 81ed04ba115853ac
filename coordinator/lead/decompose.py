"""The lead agent: decompose a question into subtasks, and synthesize the answer
(docs/design.md §7).

Decomposition (a job without subtasks): the lead model gets the query and the tool
catalogue and answers through the planning tool ``plan_subtasks``. The plan is checked
like a file's subtasks (ids, queries, known tools, at most ``job.max_subtasks``); a bad
plan goes back to the model once, with every problem named. A second bad plan, or a
model call that fails for good, **degrades** the job instead of ending it: the question
itself runs as one model-planned subtask ``question`` with every tool of the catalogue,
and the lead's failure stays visible as a gap of ``lead`` (weight 0, route ``gap``).

Synthesis (every job with a model): after the report is assembled, the lead writes
``answer.text`` from the findings and the gaps, naming the subtask behind each claim and
what is missing. ``answer.missing`` and the gaps stay fanout's own. A failed synthesis
leaves ``answer.text`` null and ``answer.synthesis_error`` set; the report is whole.

The lead's model calls are traced with ``subtask_id: "lead"``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coordinator.job import JobSpec
from coordinator.report import CoverageReport, assemble_report, prepend_rows
from shared.clock import Clock
from shared.envelope import ToolResult
from shared.ids import TraceIds
from subagents.executor import ExecObserver
from subagents.models.base import (
    AssistantMessage,
    ModelClient,
    ModelRequest,
    ToolResultMessage,
    ToolSpec,
    TranscriptMessage,
    UserMessage,
)
from subagents.models.call import StreamSink, call_model
from subagents.models.endpoints.facts import EndpointFacts, fitted_max_tokens
from subagents.models.scripted import PLAN_TOOL
from subagents.models.spec import ModelSpec
from subagents.models.spend import TokenMeter
from subagents.planners.failures import model_failure
from subagents.planners.search import probe_endpoint_of
from subagents.result import LEAD, ProgressObserver, SubagentResult
from subagents.run import SubagentRun
from subagents.spec import SubtaskSpec

QUESTION = "question"
"""The one subtask a job runs when its lead could not plan it (docs/design.md §7)."""
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def plan_schema(max_subtasks: int) -> dict[str, Any]:
    """The planning tool's input schema."""
    subtask = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": _ID.pattern},
            "query": {"type": "string", "minLength": 1},
            "weight": {"type": "number", "minimum": 0},
            "tools": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["id", "query", "tools"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "subtasks": {
                "type": "array",
                "items": subtask,
                "minItems": 1,
                "maxItems": max_subtasks,
            }
        },
        "required": ["subtasks"],
        "additionalProperties": False,
    }


def decomposition_prompt(job: JobSpec, catalogue: Sequence[ToolSpec]) -> str:
    """What the lead model is asked when it plans the job."""
    tools = "\n".join(f"- {t.name}: {t.description or '(no description)'}" for t in catalogue)
    return f"""You are the lead of a research job. Split the question into at most \
{job.max_subtasks} independent subtasks that subagents will research in parallel, each \
with only the tools it needs.

Question: {job.query}

Tools available (give each subtask a subset, by exact name):
{tools or "- (none)"}

Answer by calling {PLAN_TOOL} once. Each subtask has a short unique id (letters, digits, \
_ and -), a self-contained query, a weight (how much it matters to the answer, default 1) \
and its tools."""


def check_plan(
    args: Any, job: JobSpec, known_tools: Sequence[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The plan's subtasks, and every problem with them (the rules of a file's subtasks)."""
    problems: list[str] = []
    raw = args.get("subtasks") if isinstance(args, dict) else None
    if not isinstance(raw, list) or not raw:
        return [], [f"subtasks: expected a non-empty list of subtasks, got {_show(raw)}"]
    if len(raw) > job.max_subtasks:
        problems.append(f"subtasks: at most {job.max_subtasks} subtasks, got {len(raw)}")
    seen: set[str] = set()
    queries: dict[str, int] = {}
    plan: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        where = f"subtasks[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected an object with id, query, tools")
            continue
        unknown = sorted(set(item) - {"id", "query", "weight", "tools"})
        if unknown:
            problems.append(f"{where}: unknown fields {', '.join(unknown)}")
        sid, query = item.get("id"), item.get("query")
        weight, tools = item.get("weight", 1), item.get("tools", [])
        if not isinstance(sid, str) or not _ID.match(sid):
            problems.append(f"{where}.id: expected a short id of letters, digits, _ and -")
        elif sid in seen or sid == LEAD:
            problems.append(f"{where}.id: duplicate or reserved id {sid!r}")
        else:
            seen.add(sid)
        if not isinstance(query, str) or not query.strip():
            problems.append(f"{where}.query: expected a non-empty question")
        else:
            # The same query twice is the same research twice (a small model planned six
            # copies of the question: six sequential turns on a one-slot server, no gain).
            said = " ".join(query.lower().split())
            if said in queries:
                problems.append(
                    f"{where}.query: the same query as subtasks[{queries[said]}]: give each "
                    "subtask a different part of the question"
                )
            else:
                queries[said] = i
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            problems.append(f"{where}.weight: expected a number ≥ 0, got {_show(weight)}")
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            problems.append(f"{where}.tools: expected a list of tool names")
            tools = []
        for name in tools:
            if name not in known_tools:
                problems.append(
                    f"{where}.tools: unknown tool {name!r} (known: {', '.join(known_tools)})"
                )
        plan.append({"id": sid, "query": query, "weight": weight, "tools": tools})
    return plan, problems


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def planned_subtasks(plan: Sequence[Mapping[str, Any]], job: JobSpec) -> list[SubtaskSpec]:
    """The plan's subtasks with the job's defaults, each planned by the model."""
    defaults = job.defaults.model_dump()
    return [
        SubtaskSpec.model_validate(
            {
                **defaults,
                "retry": job.defaults.retry,
                "id": p["id"],
                "query": p["query"],
                "weight": float(p["weight"]),
                "tools": list(p["tools"]),
                "planner": "model",
            }
        )
        for p in plan
    ]


@dataclass
class LeadContext:
    """What the lead's model calls need: client, model block, time, ids, observer, seed."""

    client: ModelClient
    model: ModelSpec
    clock: Clock
    trace_ids: TraceIds
    observer: ExecObserver | None = None
    seed: object = 0
    # Told True when a lead call waits for the endpoint's rate limit, False when it may go.
    on_limit_wait: Callable[[bool], None] | None = None
    # What the job's model calls spent, against its budget (the lead's calls count too).
    meter: TokenMeter | None = None
    # Told of the lead's answer as it is written (answer.delta) and once checked (answer):
    # the job's progress observer (docs/design.md §8, "Streaming"); None: nothing streams.
    progress: ProgressObserver | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.seed}/{LEAD}/model")
        self.attempts = 0
        self.trace: list[str] = []

    async def call(
        self,
        system: str,
        messages: list[TranscriptMessage],
        tools: Sequence[ToolSpec] = (),
        force_tool: str | None = None,
        max_tokens: int | None = None,
        stream: StreamSink | None = None,
    ) -> tuple[ToolResult, Any]:
        """One logical model call of the lead (retried by fanout's one retry layer);
        with ``stream``, its text is handed over as it is written."""
        trace_id = self.trace_ids.next(LEAD)
        self.trace.append(trace_id)
        if max_tokens is None:
            # Fitted to the endpoint where its window is known (docs/design.md §7).
            await probe_endpoint_of(self.client)
            facts = getattr(self.client, "facts", None)
            max_tokens = self.model.max_tokens
            if isinstance(facts, EndpointFacts):
                max_tokens = fitted_max_tokens(max_tokens, facts.window, local=facts.local)
        request = ModelRequest(
            system=system,
            messages=messages,
            tools=tools,
            max_tokens=max_tokens,
            temperature=self.model.temperature,
            force_tool=force_tool,
            subtask_id=LEAD,
        )

        def observe(event: Any) -> None:
            if event.kind == "start":
                self.attempts += 1
            if self.observer is not None:
                self.observer(event)

        result, turn = await call_model(
            self.client,
            request,
            spec=self.model,
            clock=self.clock,
            rng=self.rng,
            trace_id=trace_id,
            observer=observe,
            on_limit_wait=self.on_limit_wait,
            stream=stream,
        )
        if turn is not None and self.meter is not None:
            self.meter.count(LEAD, turn, request, self.client.provider)
        return result, turn


async def decompose(
    job: JobSpec, catalogue: Sequence[ToolSpec], lead: LeadContext
) -> tuple[list[SubtaskSpec], SubagentResult | None]:
    """The job's subtasks from the lead model; when it cannot plan, the degraded plan
    (the question as one subtask with every tool) and the lead's gap."""
    subtasks, gap = await _plan(job, catalogue, lead)
    if subtasks is not None:
        return subtasks, None
    assert gap is not None
    return degraded_plan(job, [t.name for t in catalogue]), gap


def cancelled_planning(job: JobSpec, lead: LeadContext) -> SubagentResult:
    """The lead's gap when the run was cancelled while it planned: trigger ``cancelled``,
    with the model attempts it had made (the job runs the degraded plan, cut at once)."""
    return _lead_gap(job, lead, "cancelled",
                     "the run was cancelled while the lead was planning it", None, [])


def rejected_plan(job: JobSpec, lead: LeadContext, by: str) -> SubagentResult:
    """The lead's gap when a person rejected its plan under review: trigger
    ``plan_rejected`` (docs/design.md §17); the run ends ``failed``, nothing ran."""
    return rejected_gap(job, by, attempts=lead.attempts, trace=lead.trace,
                        at_s=lead.clock.now())


def rejected_gap(
    job: JobSpec, by: str, *, attempts: int, trace: Sequence[str], at_s: float
) -> SubagentResult:
    """:func:`rejected_plan` from the lead's model attempts and trace ids and the job
    time (on Temporal the lead's context stays on its worker)."""
    spec = lead_subtask(job)
    run = SubagentRun.for_subtask(spec)
    run.attempts = attempts
    run.trace_ids = list(trace)
    run.started_s = 0.0
    run.ended_s = at_s
    run.state = "escalated"
    run.escalate("plan_rejected", f"{by} rejected the lead's plan; no subtask ran")
    return run.result()


def degraded_plan(job: JobSpec, tools: Sequence[str]) -> list[SubtaskSpec]:
    """The plan of a lead that could not plan: the question, with every tool (docs/design.md §7)."""
    return planned_subtasks(
        [{"id": QUESTION, "query": job.query, "weight": 1.0, "tools": list(tools)}], job
    )


async def _plan(
    job: JobSpec, catalogue: Sequence[ToolSpec], lead: LeadContext
) -> tuple[list[SubtaskSpec] | None, SubagentResult | None]:
    """The lead model's plan, or the lead's gap when it cannot plan."""
    names = [t.name for t in catalogue]
    plan_tool = ToolSpec(
        name=PLAN_TOOL,
        description="Submit the plan: the subtasks the subagents will research.",
        input_schema=plan_schema(job.max_subtasks),
    )
    system = decomposition_prompt(job, catalogue)
    messages: list[TranscriptMessage] = [UserMessage(job.query)]
    problems: list[str] = []
    # Every round's problems: a plan refused for its size, then answered with text only,
    # must still say it was too big (the second round alone said "got text only").
    seen: list[str] = []
    for round_ in (1, 2):
        result, turn = await lead.call(system, messages, [plan_tool], force_tool=PLAN_TOOL)
        if turn is None:
            action = model_failure(result, lead.model)
            return None, _lead_gap(
                job, lead, action.trigger, action.message, result, list(action.alternatives)
            )
        calls = [c for c in turn.calls if c.name == PLAN_TOOL]
        if not calls:
            problems = [f"expected a call of {PLAN_TOOL} with the subtasks, got text only"]
            call_id = None
        else:
            call_id = calls[0].id
            args = calls[0].arguments
            if args is None:
                problems = ["the arguments are not a JSON object"]
                plan: list[dict[str, Any]] = []
            else:
                plan, problems = check_plan(args, job, names)
            if not problems:
                return planned_subtasks(plan, job), None
        seen += [p for p in problems if p not in seen]
        if round_ == 2:
            break
        # The plan goes back once, with every problem named.
        messages = [*messages, AssistantMessage(turn)]
        feedback = json.dumps({"ok": False, "errors": problems}, ensure_ascii=False)
        if call_id is not None:
            messages.append(ToolResultMessage(call_id, PLAN_TOOL, feedback, is_error=True))
        else:
            messages.append(UserMessage(f"Your plan was not accepted: {feedback}"))
    message = "the lead's plan was not valid twice: " + "; ".join(seen)
    return None, _lead_gap(
        job,
        lead,
        "no_progress",
        message,
        None,
        [f"fix the plan: {p}" for p in seen[:3]]
        + ["write the subtasks in the job file instead"],
        category="validation",
    )


def _lead_gap(
    job: JobSpec,
    lead: LeadContext,
    trigger: Any,
    message: str,
    result: ToolResult | None,
    alternatives: list[str],
    *,
    category: Any = None,
) -> SubagentResult:
    spec = lead_subtask(job)
    run = SubagentRun.for_subtask(spec)
    run.attempts = lead.attempts
    run.trace_ids = list(lead.trace)
    run.started_s = 0.0
    run.ended_s = lead.clock.now()
    run.state = "escalated"
    run.escalate(
        trigger, message, result=result, category=category, alternatives=tuple(alternatives)
    )
    return run.result()


def lead_subtask(job: JobSpec, *, weight: float = 1.0) -> SubtaskSpec:
    """The pseudo-subtask a failed decomposition is reported under."""
    return SubtaskSpec(id=LEAD, query=job.query, planner="model", weight=weight)


def with_lead_gap(report: CoverageReport, job: JobSpec, gap: SubagentResult) -> CoverageReport:
    """``report`` with the lead's failed plan first: a row of weight 0 and a gap routed
    ``gap``, whatever its category (the job went on without a plan; coverage is that of
    what was researched)."""
    lead_job = job.model_copy(update={"subtasks": [lead_subtask(job, weight=0.0)]})
    return prepend_rows(report, lead_job, [gap], route_overrides={LEAD: "gap"})


def failed_decomposition(job: JobSpec, gap: SubagentResult, elapsed_s: float) -> CoverageReport:
    """The report of a run whose lead could not plan it: failed, one gap for ``lead``."""
    shown = job.model_copy(update={"subtasks": [lead_subtask(job)]})
    return assemble_report(shown, [gap], elapsed_s=elapsed_s)
