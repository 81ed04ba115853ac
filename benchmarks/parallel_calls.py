"""Parallel calls (docs/design.md §7): one model turn of three tool calls, one after another vs
together.

A model-planned subagent whose model asks, in one turn, for three searches that each take
``latency_s`` of real time (a simulated tool on the real clock, asyncio, no virtual
time), then answers. The same subagent runs with ``parallel_calls: 1`` (the calls one
after another, as before) and with the default (4: together). The model answers at once
(a function of the request), so the wall time is the turn's tools and fanout's own
overhead. Side by side in one run, in this process; the figure that matters is the
ratio of the two walls, which three equal calls bound by 3.
"""

from __future__ import annotations

import json
import time

import anyio

from benchmarks.stats import BenchResult, Figure, Stats, Target
from shared.clock import AnyioClock
from shared.ids import SeededTraceIds
from subagents.loop import run_subagent
from subagents.models.base import ModelRequest, ModelTurn, ToolCall
from subagents.models.spec import ModelSpec
from subagents.planners.model import ModelPlanner
from subagents.run import SubagentRun
from subagents.simulated.spec import ParamSpec, ResponseSpec, SimToolSpec
from subagents.simulated.tools import SimulatedTools
from subagents.spec import SubtaskSpec

KEY = "parallel_calls"
QUERIES = ("sodium-ion cell cost", "sodium-ion cold performance", "sodium-ion cycle life")


class ThreeSearches:
    """A model whose first turn asks for three searches and whose second answers."""

    provider = "function"
    name = "three-searches"

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """Three calls in the first turn; the answer once they have answered."""
        if len(request.messages) == 1:
            calls = tuple(
                ToolCall(f"call_{i}", "web_search", {"query": q}) for i, q in enumerate(QUERIES)
            )
            return ModelTurn(calls=calls, stop_reason="tool_use")
        return ModelTurn(text="Cheaper than LFP, strong in the cold (web_search).")

    async def aclose(self) -> None:
        """Nothing to release."""


async def _wall(parallel_calls: int, latency_s: float) -> float:
    """Seconds of wall time one subagent takes, its turn's calls ``parallel_calls`` at once."""
    clock = AnyioClock()
    spec = SubtaskSpec(id="s", query="sodium-ion cells against LFP", tools=["web_search"],
                       planner="model", parallel_calls=parallel_calls)
    tool = SimToolSpec(params={"query": ParamSpec(type="string")}, latency_s=latency_s,
                       responses=[ResponseSpec(ok={"results": ["a snippet"]})])
    tools = SimulatedTools({"web_search": tool}, clock)
    planner = ModelPlanner(ThreeSearches(), ModelSpec(provider="scripted"), spec.id)
    run = SubagentRun.for_subtask(spec, planner=planner)
    began = time.perf_counter()
    result = await run_subagent(run, tools.for_subtask(spec.id), clock=clock,
                                trace_ids=SeededTraceIds(0))
    took = time.perf_counter() - began
    if result.steps != len(QUERIES) or result.escalation is not None:
        raise RuntimeError(f"the subagent did not make its three calls: {result}")
    return took


def run(latency_s: float, repeat: int) -> BenchResult:
    """The turn's wall time one after another and together, and their ratio."""
    walls: dict[int, list[float]] = {1: [], 4: []}
    for _ in range(repeat):
        for parallel in (1, 4):  # interleaved: a slow moment of the machine hits both
            walls[parallel].append(anyio.run(_wall, parallel, latency_s, backend="asyncio"))
    ratios = [a / b for a, b in zip(walls[1], walls[4], strict=True)]
    ratio = Stats.of(ratios)
    result = BenchResult(
        KEY, "Parallel calls",
        f"Parallel calls: a model turn of 3 tool calls of {latency_s:g} s each, "
        "parallel_calls 1 vs 4 (real time)",
        {"latency_s": latency_s, "repeat": repeat, "calls": len(QUERIES)},
    )
    result.figures = [
        Figure("one after another (parallel_calls 1): the subagent's wall", "s",
               Stats.of(walls[1])),
        Figure("together (parallel_calls 4): the subagent's wall", "s", Stats.of(walls[4])),
        Figure("one after another / together", "x", ratio,
               target=Target("three calls together take a third of the time, or near",
                             ratio.median, 2.5, higher_is_better=True)),
    ]
    return result


if __name__ == "__main__":  # pragma: no cover - a manual run
    print(json.dumps({f.label: f.stats.median if f.stats else None
                      for f in run(1.0, 3).figures}, indent=1))
