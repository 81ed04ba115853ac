"""Benchmark 1: fan-out overhead per subagent against a bare task group and LangGraph.

All three run the same instant async function once per branch, at concurrency N, on
asyncio, each timed inside its own event loop: a bare anyio task group (the floor: no
envelope, no retry, no context, no report), LangGraph's ``Send`` fan-out with one trivial
async node per branch reduced into an ``operator.add`` list, and ``fanout``'s
``run_job`` doing all its work (schema check, envelope, context gate and token
counting, routing, the coverage report).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, TypedDict

import anyio

from benchmarks.stats import BenchResult, Figure, Stats, Target, ratios, timed_in_loop
from benchmarks.workloads import fanout_job, instant_tools, lookup
from coordinator.fanout import run_job
from coordinator.job import JobSpec
from coordinator.report import CoverageReport

KEY = "fanout_overhead"
TARGET_VS_BARE = 5.0


async def bare_fanout(n: int) -> list[Any]:
    """The limit: a bare anyio task group calling the instant tool ``n`` times."""
    out: list[Any] = [None] * n

    async def one(i: int) -> None:
        out[i] = await lookup(i)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return out


class FanState(TypedDict):
    """LangGraph's state: how many branches, and the reduced results."""

    n: int
    results: Annotated[list[dict[str, Any]], operator.add]


class Item(TypedDict):
    """What ``Send`` hands one branch."""

    i: int


def langgraph_fanout() -> Callable[[int], Awaitable[list[Any]]] | None:
    """LangGraph's ``Send`` fan-out as ``run(n)``, or None when langgraph is not installed."""
    try:
        from langgraph.graph import END, START, StateGraph
        from langgraph.types import Send
    except ImportError:
        return None

    def fan(state: FanState) -> list[Any]:  # Send, imported lazily above
        return [Send("work", {"i": i}) for i in range(state["n"])]

    async def work(item: Item) -> dict[str, Any]:
        return {"results": [await lookup(item["i"])]}

    graph = StateGraph(FanState)
    # LangGraph's overloads do not admit an async node typed on its Send payload.
    graph.add_node("work", work)  # type: ignore[call-overload]
    graph.add_conditional_edges(START, fan, ["work"])
    graph.add_edge("work", END)
    app = graph.compile()

    async def run(n: int) -> list[Any]:
        state = await app.ainvoke({"n": n, "results": []})
        results: list[Any] = state["results"]
        return results

    return run


def _checked(fn: Callable[[], Awaitable[Any]], check: Callable[[Any], bool]) -> float:
    """Time ``fn`` in a fresh loop and make sure it did the whole job."""
    holder: list[Any] = []

    async def call() -> None:
        holder.append(await fn())

    seconds = timed_in_loop(call)
    if not check(holder[0]):
        raise AssertionError("a fan-out did not return one result per branch")
    return seconds


def run(sizes: Sequence[int], repeat: int) -> BenchResult:
    """Run the three fan-outs side by side, ``repeat`` times per size, interleaved."""
    lg = langgraph_fanout()
    tools = instant_tools()
    result = BenchResult(
        KEY,
        "1 · fan-out overhead",
        "Fan-out overhead (one instant async call per subagent, concurrency N, asyncio)",
        {"sizes": list(sizes), "repeat": repeat, "langgraph": lg is not None},
    )
    # Warm up imports, the token encoding and pydantic's validators outside any timing.
    warm = fanout_job(10, concurrency=10)
    _checked(lambda: bare_fanout(10), lambda r: len(r) == 10)
    _checked(lambda: run_job(warm, tools), lambda r: r.outcome == "complete")
    if lg is not None:
        _checked(lambda: lg(10), lambda r: len(r) == 10)
    for n in sizes:
        job = fanout_job(n, concurrency=n)
        bare: list[float] = []
        graph: list[float] = []
        ours: list[float] = []
        def bare_run(n: int = n) -> Awaitable[list[Any]]:
            return bare_fanout(n)

        def ours_run(job: JobSpec = job) -> Awaitable[CoverageReport]:
            return run_job(job, tools)

        def one_each(r: list[Any], n: int = n) -> bool:
            return len(r) == n

        def complete(r: CoverageReport, n: int = n) -> bool:
            return r.outcome == "complete" and len(r.subtasks) == n

        for _ in range(repeat):
            bare.append(_checked(bare_run, one_each))
            if lg is not None:
                graph.append(_checked(functools.partial(lg, n), one_each))
            ours.append(_checked(ours_run, complete))
        per = 1e6 / n
        result.figures.append(Figure(f"bare anyio task group, N={n:,}", "µs/subagent",
                                     Stats.of(bare).scaled(per)))
        if lg is not None:
            result.figures.append(Figure(f"LangGraph Send, N={n:,}", "µs/subagent",
                                         Stats.of(graph).scaled(per)))
        else:
            result.figures.append(Figure(f"LangGraph Send, N={n:,}", "µs/subagent", None,
                                         note="not installed"))
        result.figures.append(Figure(f"fanout run_job, N={n:,}", "µs/subagent",
                                     Stats.of(ours).scaled(per)))
        vs_bare = ratios(ours, bare)
        result.figures.append(
            Figure(f"fanout ÷ bare anyio, N={n:,}", "×", vs_bare,
                   Target(f"≤ {TARGET_VS_BARE:g}×", vs_bare.median, TARGET_VS_BARE))
        )
        if lg is not None:
            vs_lg = ratios(ours, graph)
            result.figures.append(
                Figure(f"fanout ÷ LangGraph, N={n:,}", "×", vs_lg,
                       Target("< 1× (faster)", vs_lg.median, 1.0, strict=True))
            )
        else:
            result.figures.append(Figure(f"fanout ÷ LangGraph, N={n:,}", "×", None,
                                         note="not installed"))
    return result
