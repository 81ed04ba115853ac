"""Simulated tools for scenarios: scripted responses per attempt, per subtask, in any time.

Each tool's ``responses`` has one counter per subtask, and each ``when`` rule its own;
the last response repeats. An executed attempt costs ``latency_s`` on the clock; a
``timeout`` response never answers, so the executor's per-attempt limit cuts it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import anyio

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


CounterKey = tuple[str, str, int]
"""(subtask id, tool name, rule index; -1 for the default responses)."""


class SimulatedTools:
    """The simulated tools of one job, with their per-subtask response counters."""

    def __init__(self, specs: Mapping[str, SimToolSpec], clock: Clock) -> None:
        self.specs = dict(specs)
        self.clock = clock
        self.counters: Counter[CounterKey] = Counter()
        self.executions: Counter[tuple[str, str]] = Counter()

    def for_subtask(self, subtask_id: str) -> dict[str, Tool]:
        """The tools as one subtask sees them (its own counters)."""
        return {name: self._tool(name, spec, subtask_id) for name, spec in self.specs.items()}

    def snapshot(self, subtask_id: str) -> list[list[Any]]:
        """One subtask's response counters, as JSON-ready [tool, rule, count] triples."""
        return [
            [tool, rule, n] for (sid, tool, rule), n in sorted(self.counters.items())
            if sid == subtask_id
        ]

    def restore(self, subtask_id: str, counters: list[list[Any]]) -> None:
        """Continue one subtask's counters from a :meth:`snapshot`."""
        for key in [k for k in self.counters if k[0] == subtask_id]:
            del self.counters[key]
        for tool, rule, n in counters:
            self.counters[(subtask_id, str(tool), int(rule))] = int(n)

    def _tool(self, name: str, spec: SimToolSpec, subtask_id: str) -> Tool:
        async def body(ctx: CallContext, **args: Any) -> Any:
            response = self._next_response(name, spec, subtask_id, args)
            self.executions[(subtask_id, name)] += 1
            return await self._respond(name, spec, response)

        return Tool.from_schema(
            name,
            body,
            spec.json_schema(),
            description=spec.description,
            side_effects=spec.side_effects,
            idempotent=spec.is_idempotent,
            wants_context=True,
        )

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
        key = (subtask_id, name, index)
        n = self.counters[key]
        self.counters[key] = n + 1
        return responses[min(n, len(responses) - 1)]

    async def _respond(self, name: str, spec: SimToolSpec, response: ResponseSpec) -> Any:
        if response.error == "timeout":
            # Never answers: the executor's per-attempt timeout decides what this costs.
            await anyio.sleep_forever()
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
