"""Benchmark 4: the context gate's cost per step, early and late in one subagent.

A step is what the loop does around one logical call: the gate (``ensure_room``), then
the call and its envelope entering the context (``add_call``, ``add_result``), each
message's tokens counted with tiktoken's cl100k once. Counting is incremental, so a
step late in a long subagent should cost what an early one costs. Two windows:
one too large to ever compact, and one that compacts every few dozen steps.
"""

from __future__ import annotations

import gc
import statistics
import time

from benchmarks.stats import BenchResult, Figure, Stats, Target, ratios
from shared.envelope import ToolResult
from subagents.context import Context

KEY = "context_gate"
TARGET_RATIO = 1.5
TOOL = "web_search"


def _envelope(step: int, items: int) -> ToolResult:
    data = {"results": [f"result {step}.{j}: a finding about solid-state cells" for j in
                        range(items)], "page": 1}
    return ToolResult.success(TOOL, data, trace_id=f"tr_{step:012x}", elapsed_s=0.4)


def step_costs(steps: int, *, window: int, budget: int, items: int) -> tuple[list[float], int]:
    """Seconds per step for ``steps`` steps of one context, and how often it compacted."""
    context = Context("solid-state battery commercialisation", window=window,
                      active_tool_budget=budget)
    envelopes = [_envelope(k, items) for k in range(1, steps + 1)]
    costs: list[float] = []
    gc.collect()
    for k, envelope in enumerate(envelopes, start=1):
        args = {"query": f"solid-state battery query {k}", "limit": 5}
        started = time.perf_counter()
        decision = context.ensure_room()
        context.add_call(TOOL, args)
        context.add_result(envelope)
        costs.append(time.perf_counter() - started)
        if decision.decision != "continue":
            raise AssertionError(f"the context ran out of room at step {k}")
    return costs, context.compactions


def _around(costs: list[float], step: int, half: int) -> float:
    """The median cost of the steps around ``step`` (1-based), robust to one slow step."""
    return statistics.median(costs[step - 1 - half : step + half])


def _block(costs: list[float], first: int, last: int) -> float:
    """The mean cost of steps ``first``..``last`` (1-based): compactions included."""
    return statistics.fmean(costs[first - 1 : last])


def run(late: int, repeat: int) -> BenchResult:
    """Measure both windows ``repeat`` times; ``late`` is the late step (1,000)."""
    early = 10
    result = BenchResult(
        KEY,
        "4 · token accounting",
        "Token accounting (context gate per step: ensure_room + add_call + add_result)",
        {"early_step": early, "late_step": late, "repeat": repeat},
    )
    flat_early: list[float] = []
    flat_late: list[float] = []
    for _ in range(repeat):
        costs, compactions = step_costs(late + 4, window=10**8, budget=2000, items=5)
        assert compactions == 0
        flat_early.append(_around(costs, early, 4))
        flat_late.append(_around(costs, late, 4))
    ratio = ratios(flat_late, flat_early)
    result.figures += [
        Figure(f"no compaction: step {early}", "µs/step", Stats.of(flat_early).scaled(1e6)),
        Figure(f"no compaction: step {late:,}", "µs/step", Stats.of(flat_late).scaled(1e6)),
        Figure(f"no compaction: step {late:,} ÷ step {early}", "×", ratio,
               Target(f"≤ {TARGET_RATIO:g}×", ratio.median, TARGET_RATIO)),
    ]
    # A window that compacts: each step adds ~130 tokens of result, the summaries and
    # calls stay, so compaction comes round every few dozen steps all the way to `late`.
    window = max(40_000, late * 45)
    block = max(10, late // 10)
    comp_early: list[float] = []
    comp_late: list[float] = []
    compacted = 0
    for _ in range(repeat):
        costs, compacted = step_costs(late, window=window, budget=2000, items=5)
        comp_early.append(_block(costs, 1, block))
        comp_late.append(_block(costs, late - block + 1, late))
    ratio = ratios(comp_late, comp_early)
    result.params.update({"compacting_window": window, "compactions": compacted})
    result.figures += [
        Figure(f"compacting ({window:,} window): steps 1–{block}", "µs/step",
               Stats.of(comp_early).scaled(1e6)),
        Figure(f"compacting: steps {late - block + 1:,}–{late:,}", "µs/step",
               Stats.of(comp_late).scaled(1e6), note=f"{compacted} compactions in all"),
        Figure("compacting: late ÷ early", "×", ratio,
               Target(f"≤ {TARGET_RATIO:g}×", ratio.median, TARGET_RATIO)),
    ]
    return result
