"""Benchmark 5: the failure path — every call fails transiently twice, then succeeds.

The fan-out of benchmark 1 (one instant call per subagent, concurrency N) in virtual
time, once with the tool answering at once and once with it failing twice with a
transient error first: two backoff waits (full jitter from each subtask's own stream)
and three attempts per logical call. The ratio is what recovering costs in wall time.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping

from benchmarks.stats import BenchResult, Figure, Stats, ratios
from benchmarks.workloads import fanout_job, flaky_tools, instant_tools
from coordinator.fanout import run_job
from coordinator.job import JobSpec
from shared.clock import AnyioClock, run_in_virtual_time
from subagents.tool import Tool

KEY = "failure_path"


def _timed(job: JobSpec, tools: Mapping[str, Tool], attempts: int) -> tuple[float, float]:
    """(wall seconds, virtual seconds) of one run; every subtask must end complete."""
    gc.collect()

    async def main() -> tuple[float, float, bool]:
        started = time.perf_counter()
        report = await run_job(job, tools, clock=AnyioClock(), seed=1)
        wall = time.perf_counter() - started
        ok = report.outcome == "complete" and all(
            s.attempts == attempts for s in report.subtasks
        )
        return wall, report.elapsed_s, ok

    wall, virtual, ok = run_in_virtual_time(main)
    if not ok:
        raise AssertionError("the failure-path fan-out did not recover every subtask")
    return wall, virtual


def run(n: int, repeat: int) -> BenchResult:
    """Both fan-outs ``repeat`` times, interleaved."""
    job = fanout_job(n, concurrency=n)
    result = BenchResult(
        KEY,
        "5 · failure path",
        f"Failure path (N={n:,}, concurrency N, virtual time; 2 transient failures per call)",
        {"subtasks": n, "repeat": repeat, "retry": job.subtasks[0].retry.model_dump()},
    )
    ok_tools, flaky = instant_tools(), flaky_tools()
    _timed(fanout_job(10, concurrency=10), ok_tools, 1)  # warm-up
    success: list[float] = []
    failing: list[float] = []
    virtual = 0.0
    for _ in range(repeat):
        success.append(_timed(job, ok_tools, 1)[0])
        wall, virtual = _timed(job, flaky, 3)
        failing.append(wall)
    per = 1e6 / n
    result.params["virtual_elapsed_s"] = virtual
    result.figures += [
        Figure("success path", "µs/subagent", Stats.of(success).scaled(per)),
        Figure("fail twice, then succeed", "µs/subagent", Stats.of(failing).scaled(per),
               note=f"{virtual:.3g} virtual s of backoff per run"),
        Figure("failure path ÷ success path", "×", ratios(failing, success)),
    ]
    return result
