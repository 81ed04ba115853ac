"""Hypothesis strategies for whole scenario files: jobs, plans, faults, policies, routing.

Every generated document is a *valid* scenario (docs/design.md §5): it must load, and its replay
must keep the invariants of :mod:`tests.reliability.invariants`. The values are drawn
from small vocabularies on purpose, so that `when` rules match, latencies meet timeouts
exactly, retry_after exceeds backoff, and the shrinker lands on readable counterexamples.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import strategies as st

from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario

ERROR_KINDS = (
    "timeout",
    "unavailable",
    "connection_reset",
    "rate_limited",
    "validation",
    "business",
    "permission",
    "crash",
)
RESPONSE_KINDS = ("ok", "ok_empty", "empty", "partial", *ERROR_KINDS)
CATEGORIES = ("transient", "validation", "business", "permission", "internal")
ROUTES = ("retry_later", "gap", "escalate", None)
PLAN_TRIGGERS = ("human_request", "missing_policy", "no_progress", "business_rule", "deadline")
# Small, overlapping vocabularies: a `when` rule matches some calls, a latency equals a
# timeout, a correction sometimes changes nothing.
QUERIES = ("a", "b", "special")
TIMEOUTS = (1.0, 2.5, 30.0)
LATENCIES = (0.0, 0.2, 1.0, 2.5, 40.0)


def response(kind: str, draw: st.DrawFn) -> dict[str, Any]:
    """One scripted response of ``kind`` (docs/design.md §5), with the details that kind may
    carry."""
    if kind == "ok":
        return {"ok": draw(st.sampled_from([{"results": ["r1", "r2"]}, "text", 7, ["x"]]))}
    if kind == "ok_empty":
        return {"ok": draw(st.sampled_from([{"results": []}, [], None, ""]))}
    if kind == "empty":
        return {"empty": True}
    if kind == "partial":
        return {"partial": draw(st.sampled_from([{"results": ["page 1"]}, [], "half"]))}
    out: dict[str, Any] = {"error": kind}
    if kind == "rate_limited":
        retry_after = draw(st.sampled_from([None, 0.0, 0.5, 3.0, 12.0]))
        if retry_after is not None:
            out["retry_after_s"] = retry_after
    elif kind == "validation":
        field = draw(st.sampled_from([None, "q", "n"]))
        if field is not None:
            out["field"] = field
            out["expected"] = "a better value"
    elif kind == "business":
        if draw(st.booleans()):
            out["limit"] = draw(st.sampled_from([10, 0, "EUR 500"]))
            out["requested"] = 20
        out["rule"] = "quota"
    elif kind in ("permission", "crash") and draw(st.booleans()):
        out["message"] = f"scripted {kind}"
    return out


@st.composite
def responses(draw: st.DrawFn, max_size: int = 5) -> list[dict[str, Any]]:
    """A tool's per-attempt responses (the last repeats)."""
    kinds = draw(st.lists(st.sampled_from(RESPONSE_KINDS), min_size=1, max_size=max_size))
    return [response(k, draw) for k in kinds]


@st.composite
def tool(draw: st.DrawFn) -> dict[str, Any]:
    """A simulated tool: schema, side-effect flags, latency, responses, `when` rules."""
    spec: dict[str, Any] = {
        "params": {
            "q": {"type": "string"},
            "n": {"type": "integer", "minimum": 1, "maximum": 10, "required": False},
        },
        "latency_s": draw(st.sampled_from(LATENCIES)),
        "responses": draw(responses()),
    }
    if draw(st.booleans()):
        spec["side_effects"] = True
    idempotent = draw(st.sampled_from([None, None, True, False]))
    if idempotent is not None:
        spec["idempotent"] = idempotent
    rules = draw(st.lists(st.sampled_from(QUERIES), max_size=2, unique=True))
    if rules:
        spec["when"] = [{"match": {"q": q}, "responses": draw(responses(3))} for q in rules]
    return spec


@st.composite
def call_step(draw: st.DrawFn, tools: list[str]) -> dict[str, Any]:
    """A call with valid or invalid arguments and, sometimes, a correction."""
    step: dict[str, Any] = {"call": draw(st.sampled_from(tools))}
    shape = draw(st.sampled_from(["valid", "valid", "valid", "n", "bad_type", "missing", "extra"]))
    q = draw(st.sampled_from(QUERIES))
    shapes: dict[str, dict[str, Any]] = {
        "valid": {"q": q},
        "n": {"q": q, "n": draw(st.sampled_from([0, 3, 11]))},
        "bad_type": {"q": 5},
        "missing": {},
        "extra": {"q": q, "zz": 1},
    }
    args = shapes[shape]
    explicit = draw(st.booleans())  # `args: {}` written out, or no args key at all
    if args or explicit:
        step["args"] = args
    fixes: list[dict[str, Any] | None] = [None, None, {"q": "b"}, {"n": 3}, {}, {"q": q}]
    fix = draw(st.sampled_from(fixes))
    if fix is not None:
        step["on_validation"] = fix
    return step


@st.composite
def plan(draw: st.DrawFn, tools: list[str]) -> list[dict[str, Any]]:
    """A plan: calls mostly, finish and escalate steps sometimes."""
    kinds = draw(
        st.lists(
            st.sampled_from(["call"] * 6 + ["finish", "finish_empty", "escalate"]), max_size=5
        )
    )
    steps: list[dict[str, Any]] = []
    for kind in kinds:
        if kind == "call":
            steps.append(draw(call_step(tools)))
        elif kind == "finish":
            steps.append({"finish": "concluded from the findings"})
        elif kind == "finish_empty":
            steps.append({"finish": ""})
        else:
            step: dict[str, Any] = {"escalate": draw(st.sampled_from(PLAN_TRIGGERS))}
            if draw(st.booleans()):
                step["message"] = "a person must decide"
            steps.append(step)
    return steps


@st.composite
def retry_policy(draw: st.DrawFn) -> dict[str, Any]:
    """Some keys of a retry policy (the rest come from defaults)."""
    keys = {
        "max_attempts": st.integers(1, 5),
        "initial_backoff_s": st.sampled_from([0.0, 0.5, 1.0]),
        "multiplier": st.sampled_from([1.0, 2.0, 3.0]),
        "max_backoff_s": st.sampled_from([0.0, 2.0, 8.0]),
        "jitter": st.sampled_from(["full", "none"]),
        "max_total_s": st.sampled_from([1.0, 5.0, 20.0]),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(keys)), unique=True, max_size=len(keys)))
    return {k: draw(keys[k]) for k in sorted(chosen)}


@st.composite
def settings(draw: st.DrawFn) -> dict[str, Any]:
    """Budget and retry overrides for ``job.defaults`` or one subtask."""
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["max_steps"] = draw(st.integers(0, 8))
    if draw(st.booleans()):
        out["tool_timeout_s"] = draw(st.sampled_from(TIMEOUTS))
    if draw(st.integers(0, 9)) == 0:
        # A small window: compaction, and sometimes the context budget stop.
        out["context_window"] = draw(st.sampled_from([60, 200, 400]))
        out["active_tool_budget"] = draw(st.sampled_from([0, 20, 50]))
    if draw(st.booleans()):
        out["retry"] = draw(retry_policy())
    return out


@st.composite
def scenario_documents(draw: st.DrawFn, max_subtasks: int = 30) -> dict[str, Any]:
    """A whole scenario file as data: job, subtasks, tools (no expect block)."""
    n_tools = draw(st.integers(1, 5))
    names = [f"t{i}" for i in range(n_tools)]
    tools = {name: draw(tool()) for name in names}
    n_subtasks = draw(st.integers(1, max_subtasks))
    subtasks = []
    for i in range(n_subtasks):
        sub: dict[str, Any] = {"id": f"s{i}", "query": f"subtask {i}"}
        allowed = draw(st.lists(st.sampled_from(names), unique=True, max_size=n_tools))
        # Mostly the plan's tools are allowed; sometimes one is not (a permission error).
        sub["plan"] = draw(plan(names))
        called = {s["call"] for s in sub["plan"] if "call" in s}
        if draw(st.integers(0, 4)):
            allowed = sorted(set(allowed) | called)
        sub["tools"] = allowed
        weight = draw(st.sampled_from([None, None, 0.0, 0.5, 2.0, 3.0]))
        if weight is not None:
            sub["weight"] = weight
        sub.update(draw(settings()))
        subtasks.append(sub)
    job: dict[str, Any] = {"query": "chaos", "subtasks": subtasks}
    concurrency = draw(st.sampled_from([None, 1, 2, 4, 8]))
    if concurrency is not None:
        job["concurrency"] = concurrency
    deadline = draw(st.sampled_from([None, None, 1.0, 5.0, 30.0, 120.0]))
    if deadline is not None:
        job["deadline_s"] = deadline
    routing = draw(
        st.dictionaries(st.sampled_from(CATEGORIES), st.sampled_from(ROUTES), max_size=3)
    )
    if routing:
        job["routing"] = routing
    defaults = draw(settings())
    if defaults:
        job["defaults"] = defaults
    doc: dict[str, Any] = {"scenario": "chaos", "job": job, "tools": tools}
    seed = draw(st.sampled_from([None, 0, 7, "seed-α"]))
    if seed is not None:
        doc["seed"] = seed
    return doc


def to_yaml(doc: dict[str, Any]) -> str:
    """The document as a scenario file's text."""
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def load(doc: dict[str, Any], file: str = "<chaos>") -> Scenario:
    """Load a generated document through the real loader (a valid file must load)."""
    return load_scenario_text(to_yaml(doc), file)


@st.composite
def scenarios(draw: st.DrawFn, max_subtasks: int = 30) -> Scenario:
    """A loaded scenario (its YAML text is kept in ``source`` for the counterexample)."""
    return load(draw(scenario_documents(max_subtasks)))
