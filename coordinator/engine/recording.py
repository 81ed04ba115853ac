"""A stored run written out as a scenario that replays it offline (docs/design.md §7, recording).

``fanout run JOB --record OUT.yaml`` (and ``fanout ask --record``) turn a live run into a
scenario file: the job as it ran (the lead's plan as ``subtasks``), every model call as
a ``provider: scripted`` turn per subtask and for ``lead`` (failed calls included, with
the latency seen), each tool's responses per subtask (``by_subtask``, with the latency
seen), MCP tools as simulated tools of the same name, and the report as ``expect``.
``fanout replay OUT.yaml`` then reproduces the statuses, attempts, findings and gaps in
virtual time, with no server, no key and no network.

Nothing secret is written: the job comes from the stored spec (which the loader refuses
to hold a key) without ``base_url`` or ``api_key_env``; envelopes carry no headers.
Calls refused before execution (schema, allowlist, invented tools) consume no response,
so they are not recorded: the replay refuses them again from the same schemas.

Some runs cannot be replayed to the report they gave, and are refused
(:class:`NotReplayable`) rather than written as a recording that fails its own
``expect``: a run that was resumed (its report counts attempts of two processes, and the
attempts cut by the kill were made again) and a run that was cancelled (the cancel came
at a moment of wall time that a virtual-time replay has no way to place).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import yaml

from coordinator.engine.resume import planned_scenario, recorded_lead_gap
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.store.runs import RunStore
from subagents.models.scripted import FOLLOWUP_TOOL, PLAN_TOOL
from subagents.result import LEAD
from subagents.spec import PARALLEL_CALLS

# Error types of envelopes made before a call ran: they used no response.
_REFUSED = frozenset({"invalid_argument", "invalid_arguments", "unknown_tool", "not_allowed"})
_TRANSIENT = {"timeout", "unavailable", "connection_reset", "rate_limited"}
# A model failure's error_type → the scripted error that reproduces it.
_MODEL_ERRORS = {
    "overloaded": "overloaded",
    "rate_limited": "rate_limited",
    "timeout": "timeout",
    "unavailable": "unavailable",
    "connection_reset": "connection_reset",
    "auth": "auth",
    "forbidden": "forbidden",
    "quota": "quota",
    "context_length": "context_length",
    "model_not_found": "model_not_found",
    "bad_request": "bad_request",
}
_PARAM_KEYS = ("type", "enum", "minimum", "maximum", "pattern", "description")


def _latency(envelope: dict[str, Any]) -> float:
    return round(float(envelope.get("elapsed_s") or 0.0), 6)


def tool_response(envelope: dict[str, Any]) -> dict[str, Any] | None:
    """The simulated response that reproduces one attempt's envelope (None: refused)."""
    if envelope.get("ok"):
        if envelope.get("empty"):
            out: dict[str, Any] = {"empty": True}
        elif envelope.get("complete", True):
            out = {"ok": envelope.get("data")}
        else:
            out = {"partial": envelope.get("data")}
        out["latency_s"] = _latency(envelope)
        return out
    kind, category = envelope.get("error_type"), envelope.get("errorCategory")
    if kind in _REFUSED:
        return None
    message = envelope.get("message")
    if category == "transient":
        error = kind if kind in _TRANSIENT else "unavailable"
        out = {"error": error, "message": message}
        if envelope.get("retry_after_s") is not None:
            out["retry_after_s"] = envelope["retry_after_s"]
        if error != "timeout":
            out["latency_s"] = _latency(envelope)
        return out
    if category == "validation":
        out = {
            "error": "validation",
            "field": envelope.get("field"),
            "expected": envelope.get("expected"),
            "message": message,
        }
    elif category == "business":
        out = {
            "error": "business",
            "rule": envelope.get("rule"),
            "limit": envelope.get("limit"),
            "requested": envelope.get("requested"),
            "message": message,
        }
    elif category == "permission":
        out = {"error": "permission", "message": message}
    else:
        out = {"error": "crash", "message": message}
    out["latency_s"] = _latency(envelope)
    return {k: v for k, v in out.items() if v is not None}


def model_turn(envelope: dict[str, Any], *, decomposition: bool) -> dict[str, Any]:
    """The scripted turn that reproduces one model attempt."""
    latency = _latency(envelope)
    if not envelope.get("ok"):
        error = _MODEL_ERRORS.get(str(envelope.get("error_type")), "bad_request")
        out: dict[str, Any] = {"error": error, "message": envelope.get("message")}
        if envelope.get("retry_after_s") is not None:
            out["retry_after_s"] = envelope["retry_after_s"]
        if error != "timeout":
            out["latency_s"] = latency
        return out
    data = envelope.get("data") or {}
    calls = data.get("calls") or []
    if decomposition:
        plan = next((c for c in calls if c.get("name") == PLAN_TOOL), None)
        if plan is not None and isinstance(plan.get("arguments"), dict):
            return {"subtasks": plan["arguments"].get("subtasks"), "latency_s": latency}
    # The lead's follow-up plan (docs/design.md §11) replays as a followups turn.
    planned = next((c for c in calls if c.get("name") == FOLLOWUP_TOOL), None)
    if planned is not None and isinstance(planned.get("arguments"), dict):
        return {"followups": planned["arguments"].get("followups"), "latency_s": latency}
    turn: dict[str, Any] = {"latency_s": latency}
    if calls:
        turn["calls"] = [
            {
                "tool": c["name"],
                "args": c["arguments"] if "arguments" in c else c.get("raw_arguments"),
            }
            for c in calls
        ]
    if data.get("text"):
        turn["text"] = data["text"]
    if data.get("stop_reason") in ("max_tokens", "refusal"):
        turn["stop"] = data["stop_reason"]
    if isinstance(data.get("usage"), dict):
        # What the provider counted: the replay spends the same tokens (job.budget).
        turn["usage"] = dict(data["usage"])
    if "calls" not in turn and "text" not in turn:
        turn["text"] = ""
    return turn


def _params(schema: dict[str, Any]) -> dict[str, Any]:
    """An MCP tool's inputSchema as simulated-tool params (the checks the replay repeats)."""
    required = set(schema.get("required") or [])
    out: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        spec = {k: prop[k] for k in _PARAM_KEYS if isinstance(prop, dict) and k in prop}
        if isinstance(spec.get("type"), list):
            spec.pop("type")  # a union type: no check the simulated format can express
        if name not in required:
            spec["required"] = False
        out[str(name)] = spec
    return out


class NotReplayable(ValueError):
    """A stored run whose recording could not replay to its report; says why."""

    def __init__(self, run_id: str, reason: str) -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"run {run_id} cannot be recorded: {reason}")


def refusal(store: RunStore, run_id: str) -> str | None:
    """Why run ``run_id`` cannot be recorded as a scenario that replays it, or None."""
    row = store.get(run_id)
    if row.report is None:
        return f"it is {row.status}; only a finished run can be recorded"
    if row.sessions > 1:
        return (
            f"it was interrupted and resumed ({row.sessions} sessions): its report counts "
            "the attempts of every session, and the ones the interruption cut were made "
            "again, which one replay cannot reproduce"
        )
    cancelled = sorted(
        {g["subtask_id"] for g in row.report.get("gaps", []) if g.get("trigger") == "cancelled"}
    )
    if cancelled:
        return (
            f"it was cancelled (cut: {', '.join(cancelled)}); the cancel came at a moment of "
            "wall time that a replay in virtual time cannot place"
        )
    return None


def recording(store: RunStore, run_id: str) -> dict[str, Any]:
    """The scenario (as plain data) that replays stored run ``run_id``.

    Raises:
        NotReplayable: the run has not finished, was resumed, or was cancelled.
    """
    row = store.get(run_id)
    reason = refusal(store, run_id)
    if reason is not None or row.report is None:
        raise NotReplayable(row.id, reason or "it has not finished")
    written = load_scenario_text(row.spec_text, row.file)
    events = store.events(run_id)
    # A lead that could not plan degraded the job (docs/design.md §7): the job is written to
    # decompose, with the lead's failed plans as its turns, so the replay degrades the
    # same way and its report has the lead's row. Otherwise the plan is written as the
    # job's subtasks and the replay does not decompose.
    degraded = recorded_lead_gap(store, run_id) is not None
    scenario: Scenario = written if degraded else planned_scenario(written, store, run_id)
    decomposed = not degraded and any(
        e["subtask_id"] == LEAD and e["kind"] == "plan" for e in events
    )
    turns: dict[str, list[dict[str, Any]]] = defaultdict(list)
    responses: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(dict)
    began: dict[str, dict[str, list[tuple[float, dict[str, Any]]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    catalogue: dict[str, Any] = {}
    planned = False
    for event in events:
        sid, kind = event["subtask_id"], event["kind"]
        if kind == "plan":
            planned = True
        elif kind == "catalogue":
            catalogue.update(event.get("tools") or {})
        if kind != "attempt" or "result" not in event:
            continue
        envelope = event["result"]
        if event.get("tool") == "model":
            if sid == LEAD and decomposed and not planned:
                continue  # the job is written with the lead's plan: replay does not decompose
            turns[sid].append(model_turn(envelope, decomposition=not decomposed and sid == LEAD))
        else:
            response = tool_response(envelope)
            if response is not None:
                started = float(event.get("at") or 0.0) - _latency(envelope)
                began[str(event.get("tool"))][sid].append((round(started, 6), response))
    for tool, per_subtask in began.items():
        for sid, seen in per_subtask.items():
            # A subtask takes a tool's responses in the order its attempts started. The
            # trace lists a turn's calls that ran together call by call (docs/design.md §7,
            # "Parallel calls"), so a retry of the first may come after the second's
            # attempt in the trace and before it in time: sorted by start (stable: in
            # the trace's order at one instant, which is call order, as in a replay).
            responses[tool][sid] = [r for _, r in sorted(seen, key=lambda item: item[0])]
    return _scenario_data(scenario, row.report, turns, responses, catalogue, run_id)


def _scenario_data(
    scenario: Scenario,
    report: dict[str, Any],
    turns: dict[str, list[dict[str, Any]]],
    responses: dict[str, dict[str, list[dict[str, Any]]]],
    catalogue: dict[str, Any],
    run_id: str,
) -> dict[str, Any]:
    job = scenario.job
    subtasks = []
    for spec in job.subtasks:
        sub: dict[str, Any] = {
            "id": spec.id,
            "query": spec.query,
            "weight": spec.weight,
            "tools": list(spec.tools),
        }
        if spec.planner == "scripted":
            sub["plan"] = [s.model_dump(exclude_none=True) for s in spec.plan]
        for key in ("max_steps", "context_window", "active_tool_budget", "tool_timeout_s"):
            sub[key] = getattr(spec, key)
        if spec.parallel_calls != PARALLEL_CALLS:
            sub["parallel_calls"] = spec.parallel_calls
        sub["retry"] = spec.retry.model_dump(exclude_none=True)
        subtasks.append(sub)
    tools: dict[str, Any] = {}
    for name, spec_ in scenario.tools.items():
        tools[name] = spec_.model_dump(exclude_none=True, exclude_defaults=True)
        tools[name].setdefault(
            "responses", [r.model_dump(exclude_none=True) for r in spec_.responses]
        )
    for name, per_subtask in responses.items():
        tool = tools.setdefault(name, _mcp_tool(name, catalogue.get(name) or {}))
        tool["by_subtask"] = {sid: list(rs) for sid, rs in per_subtask.items()}
    data: dict[str, Any] = {
        "scenario": f"{scenario.scenario}-recorded",
        "description": f"Recorded from run {run_id} ({scenario.source}); replays it offline.",
        "seed": scenario.seed,
        "job": {
            "query": job.query,
            "concurrency": job.concurrency,
            **({"deadline_s": job.deadline_s} if job.deadline_s is not None else {}),
            **({"routing": dict(job.routing)} if job.routing else {}),
            # The budget replays with the recorded usage: the same subagents hand up.
            **({"budget": job.budget.model_dump(exclude_none=True)} if job.budget else {}),
            # A decomposed job followed up by default; written with its plan it would not.
            **({"followups": job.followups} if job.followups is not None else {}),
            **({"max_followups": job.max_followups} if job.max_followups != 3 else {}),
            # A job written to decompose keeps the lead's bound on its plan.
            **({"subtasks": subtasks} if subtasks else {"max_subtasks": job.max_subtasks}),
        },
        "tools": tools,
    }
    model = scenario.model
    if model is not None:
        data["model"] = {
            "provider": "scripted",
            "name": model.model_name,
            "max_tokens": model.max_tokens,
            "timeout_s": model.timeout_s,
            "retry": model.retry.model_dump(exclude_none=True),
            # The file's own limits (not what the provider's headers taught the limiter):
            # the replay waits its turns in virtual time as the run did in real time.
            **({"limits": model.limits.model_dump(exclude_none=True)} if model.limits else {}),
            "turns": dict(turns),
        }
    data["expect"] = _expect(report)
    return data


def _mcp_tool(name: str, listed: dict[str, Any]) -> dict[str, Any]:
    """A simulated stand-in for an MCP tool, with the schema its server listed."""
    return {
        "description": listed.get("description") or f"recorded from MCP tool {name}",
        "params": _params(listed.get("schema") or {}),
        # Only subtasks in by_subtask called it; any other would get this.
        "responses": [{"error": "unavailable", "message": f"{name}: no recorded response"}],
    }


def _expect(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "outcome": report["outcome"],
        "coverage": report["coverage"],
        "subtasks": {
            s["id"]: {
                "status": s["status"],
                "attempts": s["attempts"],
                "rounds": s["rounds"],
                "findings": s["findings"],
                **({"followup_of": s["followup_of"]} if s.get("followup_of") else {}),
            }
            for s in report["subtasks"]
        },
        "gaps": {
            g["subtask_id"]: {
                "errorCategory": g["errorCategory"],
                "trigger": g["trigger"],
                "route": g["route"],
                **({"filled_by": g["filled_by"]} if g.get("filled_by") else {}),
            }
            for g in report["gaps"]
        },
        "escalations": len(report["escalations"]),
        # The answer's kind and checks: a replay recomputes them and must agree (docs/design.md §7).
        **(
            {"answer": {k: answer[k] for k in ("kind", "checks") if k in answer}}
            if "kind" in (answer := report.get("answer") or {})
            else {}
        ),
    }


def write_recording(store: RunStore, run_id: str, path: str) -> None:
    """Write the recording of ``run_id`` to ``path`` as YAML."""
    text = yaml.safe_dump(recording(store, run_id), sort_keys=False, allow_unicode=True, width=100)
    with open(path, "w", encoding="utf-8") as out:
        out.write(f"# fanout recording of run {run_id}: `fanout replay {path}` reproduces it.\n")
        out.write(text)
