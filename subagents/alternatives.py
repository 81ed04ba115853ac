"""Concrete next steps a person could take for an escalation, never generic advice."""

from __future__ import annotations

import json
import re
from typing import Any

from shared.categories import Trigger
from shared.envelope import ToolResult
from subagents.spec import SubtaskSpec

# "role analyst lacks patents:read" → who="role analyst", scope="patents:read"
_LACKS = re.compile(
    r"(?:(?P<who>(?:role|user|team|key)\s+\S+)\s+)?lacks\s+(?P<scope>[\w.:/-]+)", re.I
)


def _args(args: dict[str, Any] | None) -> str:
    return json.dumps(args or {}, separators=(",", ":"), ensure_ascii=False)


def alternatives_for(
    trigger: Trigger,
    spec: SubtaskSpec,
    *,
    tool: str | None = None,
    args: dict[str, Any] | None = None,
    result: ToolResult | None = None,
    detail: dict[str, Any] | None = None,
) -> list[str]:
    """What could unblock ``spec`` after ``trigger``, most specific first."""
    if result is not None and result.tool == "model":
        # A failed model call: the model planner names its own (provider, key variable,
        # model name); tool-shaped advice ("request access for model") would mislead.
        return []
    detail = detail or {}
    others = [t for t in spec.tools if t != tool]
    use_other = [f"try {t}, also on this subtask's allowlist" for t in others[:2]]
    out: list[str] = []
    if trigger == "permission_denied":
        if tool is not None and tool not in spec.tools:
            out.append(f"add {tool} to subtask {spec.id!r}'s tools allowlist")
        elif result is not None and result.scope:
            out.append(f"request the {result.scope} scope for {tool}")
        elif result is not None and (lack := _LACKS.search(result.message or "")):
            who = f" for {lack['who']}" if lack["who"] else ""
            out.append(f"request {lack['scope']}{who} (needed by {tool})")
        elif result is not None and result.message:
            out.append(f"request access for {tool}: {result.message}")
        out += use_other
    elif trigger == "no_progress" and result is not None:
        field = result.field or "the arguments"
        value = (args or {}).get(result.field or "", None) if result.field else None
        shown = f" (sent {value!r})" if value is not None else ""
        expected = result.expected or "a valid value"
        if expected.startswith("a required argument"):
            kind = expected.removeprefix("a required argument").strip(" ()") or "any value"
            out.append(f"provide the missing argument {field} ({kind})")
        else:
            out.append(f"set {field} to {expected}{shown}")
        out.append(f"add an on_validation correction for {field} to step {detail.get('step', 0)}")
    elif trigger == "retries_exhausted" and result is not None:
        attempts = result.attempts
        out.append(f"retry {tool} later: {attempts} attempts ended in {result.error_type}")
        if result.retry_after_s:
            out.append(f"wait at least {result.retry_after_s:g}s (the source's Retry-After)")
        if result.error_type == "timeout":
            out.append(f"call {tool} with a smaller request than {_args(args)}")
        out += use_other
    elif trigger == "threshold_breach" and result is not None:
        rule = result.rule or "the rule"
        out.append(f"lower the request to within {rule}'s limit {result.limit}")
        out.append(f"ask the owner of {rule} to approve {result.requested}")
    elif trigger == "business_rule" and result is not None:
        rule = result.rule or "the business rule"
        out.append(f"ask the owner of {rule} whether it can be waived: {result.message}")
        out += use_other
    elif trigger == "unknown_state":
        key = result.idempotency_key if result is not None else None
        out.append(f"check whether {tool} {_args(args)} took effect (idempotency key {key})")
        out.append(f"make {tool} idempotent on its idempotency key so it can be retried safely")
    elif trigger == "internal_error":
        if result is not None:
            out.append(f"report a bug in {tool}: {result.message}")
        else:
            # No envelope: the bug is in the planner, the tool source or the loop, not in
            # the last tool called, which only says where the subagent was.
            where = f" (its last call was {tool})" if tool else ""
            out.append(
                f"report a bug in the subagent's planner or loop{where}: "
                f"{detail.get('message', 'see the message')}"
            )
        out += use_other
    elif trigger == "step_budget":
        out.append(f"raise max_steps above {spec.max_steps} for subtask {spec.id!r}")
        out.append("split the subtask into smaller ones")
    elif trigger == "context_budget":
        out.append(
            f"raise context_window above {spec.context_window} or lower active_tool_budget "
            f"({spec.active_tool_budget})"
        )
        out.append("ask tools for fewer or shorter results")
    elif trigger == "deadline":
        out.append("resume the run, or raise the job's deadline_s")
    elif trigger == "incomplete_data":
        out.append(f"fetch the remaining pages from {tool}")
    elif trigger == "interrupted":
        out.append("resume the run with `fanout resume RUN_ID`; finished subtasks are kept")
    elif trigger == "cancelled":
        out.append("submit the job again; the cancelled run keeps what it found")
    elif trigger == "model_refusal":
        out.append(f"rephrase subtask {spec.id!r}'s query, or plan it with another model")
    elif trigger == "no_evidence":
        tools = ", ".join(spec.tools[:4])
        out.append(f"research subtask {spec.id!r} with its tools ({tools}); the model used none")
        out.append("plan the subtask with a model that calls tools reliably")
    elif trigger == "human_request":
        out.append(f"answer the subagent's question for subtask {spec.id!r}")
    elif trigger == "no_match":
        missing = detail.get("missing") or []
        if missing:
            out.append("add documents that cover " + ", ".join(repr(m) for m in missing[:4]))
        out.append(f"rephrase subtask {spec.id!r}'s query in the documents' own words")
        out.append("read the passages found: they are related, but none answers the query")
    return out
