"""Benchmark 2: 100,000 subtasks at concurrency 1,000 — wall time and peak RSS.

Each repetition runs in a fresh interpreter (``python -m benchmarks.scale --child``) so
the peak resident set (``ru_maxrss``) is this job's alone, not that of earlier
benchmarks. The peak covers everything the process holds: the job spec itself (the
input), the results streaming in, and the assembled coverage report.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from benchmarks.stats import BenchResult, Figure, Stats, Target

KEY = "scale"
RSS_LIMIT_MIB = 400.0


def peak_rss_mib() -> float:
    """This process's peak resident set, in MiB.

    ``VmHWM`` counts this process image only; ``ru_maxrss`` also counts the pages of
    the parent it was forked from, which can be the larger (the harness, after the
    benchmarks before this one). ``ru_maxrss`` is the fallback where /proc is absent.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(subtasks: int, concurrency: int) -> dict[str, Any]:
    """Build and run the job in this process; what the parent records."""
    from benchmarks.workloads import fanout_job, instant_tools
    from coordinator.fanout import run_job

    started = time.perf_counter()
    job = fanout_job(subtasks, concurrency=concurrency)
    built = time.perf_counter() - started
    tools = instant_tools()

    async def main() -> tuple[float, str, int]:
        t0 = time.perf_counter()
        report = await run_job(job, tools)
        # Summarise inside the loop: the report stays out of the loop's return value.
        return time.perf_counter() - t0, report.outcome, len(report.subtasks)

    run_s, outcome, n = anyio.run(main, backend="asyncio")
    peak = peak_rss_mib()
    return {"build_s": built, "run_s": run_s, "peak_rss_mib": peak, "outcome": outcome,
            "subtasks": n}


def _in_subprocess(subtasks: int, concurrency: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", "--child", str(subtasks), str(concurrency)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,  # where `benchmarks` imports from
    )
    data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def run(subtasks: int, concurrency: int, repeat: int) -> BenchResult:
    """Run the job ``repeat`` times, each in a fresh subprocess."""
    result = BenchResult(
        KEY,
        "2 · scale",
        f"Scale ({subtasks:,} subtasks at concurrency {concurrency:,}, asyncio, fresh process)",
        {"subtasks": subtasks, "concurrency": concurrency, "repeat": repeat},
    )
    runs = [_in_subprocess(subtasks, concurrency) for _ in range(repeat)]
    for r in runs:
        if r["outcome"] != "complete" or r["subtasks"] != subtasks:
            raise AssertionError(f"the scale job did not complete: {r}")
    run_s = Stats.of([r["run_s"] for r in runs])
    rss = Stats.of([r["peak_rss_mib"] for r in runs])
    result.figures += [
        Figure("run_job wall time", "s", run_s, note="the job spec is built before the clock"),
        Figure("µs per subagent", "µs", run_s.scaled(1e6 / subtasks)),
        Figure("building the JobSpec (input)", "s", Stats.of([r["build_s"] for r in runs])),
        Figure("peak RSS (whole process)", "MiB", rss,
               Target(f"< {RSS_LIMIT_MIB:g} MiB", rss.median, RSS_LIMIT_MIB, strict=True)),
    ]
    return result


def main(argv: Sequence[str] | None = None) -> None:
    """``--child N C``: run one job here and print its figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale")
    parser.add_argument("--child", nargs=2, type=int, metavar=("SUBTASKS", "CONCURRENCY"))
    args = parser.parse_args(argv)
    if args.child is None:
        parser.error("run the benchmarks with `python -m benchmarks`")
    print(json.dumps(child(*args.child)))


if __name__ == "__main__":
    main()
