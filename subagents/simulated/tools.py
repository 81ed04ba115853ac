"""Simulated tools for scenarios: scripted responses per attempt, per subtask, in any time.

Each tool's ``responses`` has one counter per subtask, and each ``when`` rule its own;
the last response repeats. An executed attempt costs ``latency_s`` on the clock; a
``timeout`` response never answers, so the executor's per-attempt limit cuts it.

Each tool is built once per job, not once per subtask: its body learns which subtask
calls it from the call's context (``ctx.scope``, the subtask id the loop passes), and
keeps that subtask's counters in the subtask's own table.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Coroutine, Mapping
from types import MappingProxyType
from typing import Any

from shared.clock import Clock
from shared.errors import (
    BusinessRuleViolation,
    InvalidToolInput,
    ToolPermissionDenied,
    TransientToolError,
)
from subagents.simulated.spec import ResponseSpec, SimToolSpec
from subagents.tool import CallContext, Tool, ToolOutput


class SimulatedCrash(RuntimeError):
    """The exception a simulated ``error: crash`` raises: a bug, classified internal."""


RuleKey = tuple[str, int]
"""(tool name, rule index; -1 for the default responses): one response counter."""


class SimulatedTools:
    """The simulated tools of one job, with their per-subtask response counters."""

    def __init__(self, specs: Mapping[str, SimToolSpec], clock: Clock) -> None:
        self.specs = dict(specs)
        self.clock = clock
        self.counters: dict[str, dict[RuleKey, int]] = {}
        """Per subtask id, how many responses each (tool, rule) has given it."""
        self.executions: Counter[tuple[str, str]] = Counter()
        """Per (subtask id, tool), how many times the tool's body ran."""
        self._shared: Mapping[str, Tool] | None = None
        # One key object per (tool, rule), so counting allocates nothing per call.
        self._keys = {
            name: [(name, i) for i in range(-1, len(spec.when))]
            for name, spec in self.specs.items()
        }

    def for_subtask(self, subtask_id: str) -> Mapping[str, Tool]:
        """The tools as one subtask sees them (its own counters): the same tools for all."""
        if type(self)._tool is not SimulatedTools._tool:
            # A subclass that builds its tools per subtask keeps exactly that behaviour.
            return {name: self._tool(name, spec, subtask_id) for name, spec in self.specs.items()}
        return self.tools()

    def tools(self) -> Mapping[str, Tool]:
        """Every tool, built on first use; each body counts for the subtask calling it."""
        if self._shared is None:
            # Read-only: every subtask gets this same mapping.
            self._shared = MappingProxyType(
                {name: self._build(name, spec) for name, spec in self.specs.items()}
            )
        return self._shared

    def snapshot(self, subtask_id: str) -> list[list[Any]]:
        """One subtask's response counters, as JSON-ready [tool, rule, count] triples."""
        own = self.counters.get(subtask_id, {})
        return [[tool, rule, n] for (tool, rule), n in sorted(own.items())]

    def restore(self, subtask_id: str, counters: list[list[Any]]) -> None:
        """Continue one subtask's counters from a :meth:`snapshot`."""
        self.counters[subtask_id] = {(str(tool), int(rule)): int(n) for tool, rule, n in counters}

    def _build(self, name: str, spec: SimToolSpec) -> Tool:
        async def body(ctx: CallContext, **args: Any) -> Any:
            return await self._execute(name, spec, ctx.scope, args)

        return Tool.from_schema(
            name,
            body,
            spec.json_schema(),
            description=spec.description,
            side_effects=spec.side_effects,
            idempotent=spec.is_idempotent,
            wants_context=True,
            real_time=False,  # its latency is simulated: --speed scales it
            search=spec.search,
        )

    def _tool(self, name: str, spec: SimToolSpec, subtask_id: str) -> Tool:
        """Tool ``name`` bound to one subtask, whatever the call's scope (a subclass hook)."""

        async def body(ctx: CallContext, **args: Any) -> Any:
            return await self._execute(name, spec, subtask_id, args)

        return dataclasses.replace(self.tools()[name], body=body)

    def _execute(
        self, name: str, spec: SimToolSpec, subtask_id: str, args: Mapping[str, Any]
    ) -> Coroutine[Any, Any, Any]:
        """The response is taken now; the coroutine that answers with it (awaited by the
        tool's body: no frame of its own for every call in flight)."""
        response = self._next_response(name, spec, subtask_id, args)
        self.executions[(subtask_id, name)] += 1
        return self._respond(name, spec, response)

    def _next_response(
        self, name: str, spec: SimToolSpec, subtask_id: str, args: Mapping[str, Any]
    ) -> ResponseSpec:
        responses, index = spec.responses, -1
        own = spec.by_subtask.get(subtask_id) if spec.by_subtask else None
        if own:
            # A recorded run: this subtask's responses, as they came (rule -2).
            responses, index = own, -2
        else:
            for i, rule in enumerate(spec.when):
                if all(k in args and args[k] == v for k, v in rule.match.items()):
                    responses, index = rule.responses, i
                    break
        counters = self.counters.get(subtask_id)
        if counters is None:
            counters = self.counters[subtask_id] = {}
        key = self._keys[name][index + 1] if name in self._keys and index >= -1 else (name, index)
        n = counters.get(key, 0)
        counters[key] = n + 1
        return responses[min(n, len(responses) - 1)]

    async def _respond(self, name: str, spec: SimToolSpec, response: ResponseSpec) -> Any:
        if response.error == "timeout":
            # Never answers: the executor's per-attempt timeout decides what this costs. It
            # waits on the job's clock, so a clock that cuts its timeouts in its own time
            # (shared.clock.PacedClock) cuts this one there too.
            await self.clock.sleep(math.inf)
        latency = spec.latency_s if response.latency_s is None else response.latency_s
        await self.clock.sleep(latency)
        kind = response.kind
        if kind == "ok":
            return response.ok
        if kind == "empty":
            return ToolOutput(data=None, empty=True)
        if kind == "partial":
            return ToolOutput(data=response.partial, complete=False)
        raise _exception(name, response)


def _exception(name: str, r: ResponseSpec) -> Exception:
    error = r.error
    if error in ("unavailable", "connection_reset", "rate_limited"):
        default = {
            "unavailable": f"{name} is unavailable (503)",
            "connection_reset": f"connection to {name} was reset",
            "rate_limited": f"{name} rate limited the caller (429)",
        }[error]
        return TransientToolError(
            r.message or default, error_type=error, retry_after_s=r.retry_after_s
        )
    if error == "validation":
        return InvalidToolInput(
            r.field or "<arguments>", r.expected or "a valid value", message=r.message
        )
    if error == "business":
        return BusinessRuleViolation(
            r.rule or "business_rule", limit=r.limit, requested=r.requested, message=r.message
        )
    if error == "permission":
        return ToolPermissionDenied(r.message or f"access to {name} denied", scope=r.scope)
    return SimulatedCrash(r.message or f"{name} crashed")
