"""Benchmark 3: replay speed — virtual seconds covered per wall second.

The whole ``scenarios/`` library (``live/`` excluded: those talk to real MCP servers) is
replayed in virtual time as ``fanout replay`` does it (run, report, ``expect`` check);
the figure is the sum of the reports' ``elapsed_s`` over the wall time. A dedicated
scenario (``benchmarks/data/long_backoff.yaml``) holds over ten virtual minutes of
exponential backoff and is timed on its own.
"""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.stats import BenchResult, Figure, Stats, Target
from coordinator.jobfile.loader import load_scenario
from coordinator.jobfile.scenario import Scenario
from coordinator.replay import replay, replay_all, scenario_files

KEY = "replay_speed"
TARGET_RATE = 1000.0
LONG_BACKOFF = Path(__file__).parent / "data" / "long_backoff.yaml"


def library(root: Path) -> list[Scenario]:
    """The scenario library under ``root``, without ``live/``."""
    files = [f for f in scenario_files([root]) if "live" not in f.relative_to(root).parts]
    return [load_scenario(f) for f in files]


def _replayed(scenario: Scenario) -> tuple[float, float]:
    """(virtual seconds, wall seconds) of one replay; it must meet its expect block."""
    started = time.perf_counter()
    result = replay(scenario)
    wall = time.perf_counter() - started
    if not result.passed:
        raise AssertionError(f"{scenario.scenario} did not meet its expect: {result.mismatches}")
    return float(result.report["elapsed_s"]), wall


def run(root: Path, repeat: int) -> BenchResult:
    """Replay the library and the long-backoff scenario ``repeat`` times each."""
    scenarios = library(root)
    long = load_scenario(LONG_BACKOFF)
    result = BenchResult(
        KEY,
        "3 · replay speed",
        "Replay speed (virtual time: trio + MockClock autojump)",
        {"scenarios": len(scenarios), "root": str(root), "repeat": repeat,
         "long_backoff": LONG_BACKOFF.name},
    )
    replay_all(scenarios[:1])  # load the encoding and the trio backend outside the timing
    rates: list[float] = []
    walls: list[float] = []
    virtual = 0.0
    for _ in range(repeat):
        covered = wall = 0.0
        for scenario in scenarios:
            v, w = _replayed(scenario)
            covered += v
            wall += w
        virtual = covered
        rates.append(covered / wall)
        walls.append(wall)
    long_runs = [_replayed(long) for _ in range(repeat)]
    long_rate = Stats.of([v / w for v, w in long_runs])
    rate = Stats.of(rates)
    result.figures += [
        # Labels stay the same when the library grows (baselines match by label).
        Figure("library: virtual s per wall s", "virtual s/wall s",
               rate, Target(f"≥ {TARGET_RATE:,.0f}", rate.median, TARGET_RATE,
                            higher_is_better=True),
               note=f"{len(scenarios)} scenarios, {virtual:g} virtual s"),
        Figure("library wall time", "ms", Stats.of(walls).scaled(1e3)),
        Figure("long backoff: wall time", "ms",
               Stats.of([w for _, w in long_runs]).scaled(1e3),
               Target("< 1 s", Stats.of([w for _, w in long_runs]).median * 1e3, 1000.0,
                      strict=True), note=f"{long_runs[0][0]:g} virtual s"),
        Figure("long backoff rate", "virtual s/wall s", long_rate),
    ]
    return result
