"""Benchmark 6: ``fanout replay`` end to end, through the CLI, against a bare task group.

A file of N subtasks, one instant simulated call each, at the default concurrency
(:func:`benchmarks.workloads.one_call_scenario`), is replayed by a fresh
``python -m coordinator.cli replay FILE --json`` with its output sent to /dev/null:
loading (YAML, validation), the run in virtual time, the report, the ``expect`` check
and the JSON. The wall time, CPU time (user + system) and peak RSS are the child's own
(``os.wait4``; the peak is the child's own ``VmHWM``, read by the child as it exits:
``ru_maxrss`` would count the parent's pages it was forked with). The cost per
subagent is the marginal one, (T(N) − T(10)) / (N − 10),
so start-up (imports, the token encoding) cancels out. The floor is benchmark 1's bare
anyio task group making the same calls, timed the same way: the marginal between 10
and N tasks, each in a fresh event loop. Repetitions interleave all four runs, so
drift on a shared machine hits each alike. A file of ``memory_n`` subtasks gives the
peak RSS of a large replay.

``python -m benchmarks.replay_cli --tree DIR --out FILE`` runs the CLI of another
checkout on this interpreter: that is how the baseline was taken (the tree before
issue 15, ``git archive`` of its commit).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.overhead import bare_fanout
from benchmarks.stats import BenchResult, Figure, Stats, Target, ratios, timed_in_loop
from benchmarks.workloads import one_call_scenario

KEY = "replay_cli"
FULL_KEY = "replay_full"
TARGET_RATIO = 8.0
RSS_LIMIT_MIB = 200.0
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Replayed:
    """One CLI replay as the parent saw it."""

    wall_s: float
    cpu_s: float
    rss_mib: float


# The child: `fanout replay FILE --json` as the console script runs it, then its own peak
# (VmHWM counts this process image only; ru_maxrss would include the forked parent's).
_CHILD = """
import sys
from coordinator.cli.main import main
code = main(["replay", sys.argv[1], "--json"])
sys.stdout.flush()
peak = None
try:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
except OSError:
    pass
with open(sys.argv[2], "w") as out:
    out.write("null" if peak is None else str(peak))
sys.exit(code)
"""


def replay_once(file: Path, *, tree: Path = ROOT) -> Replayed:
    """Run ``fanout replay FILE --json`` of ``tree`` in a fresh interpreter; it must pass.

    Raises:
        AssertionError: the replay did not exit 0 (its expect block was not met).
    """
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as peak_file:
        command = [sys.executable, "-c", _CHILD, str(file), peak_file.name]
        started = time.perf_counter()
        proc = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            raise AssertionError(f"replay of {file.name} exited {proc.returncode}: {tail}")
        peak = json.loads(peak_file.read() or "null")
    if peak is None:  # no /proc: ru_maxrss (KiB on Linux), an upper bound
        peak = usage.ru_maxrss / 1024
    return Replayed(wall, usage.ru_utime + usage.ru_stime, float(peak))


def _bare(n: int) -> tuple[float, float]:
    """The floor's wall and CPU seconds (this process's user + system time while it ran):
    the CPU ratio divides CPU by CPU, not the child's CPU by the floor's wall time."""
    cpu = time.process_time()
    wall = timed_in_loop(lambda: bare_fanout(n))
    return wall, time.process_time() - cpu


def run(
    sizes: Sequence[int] = (10, 5_000),
    memory_n: int = 20_000,
    repeat: int = 5,
    memory_repeat: int = 2,
    tree: Path = ROOT,
    full_fanout: bool = False,
    warm: bool = True,
) -> BenchResult:
    """Replay N = ``sizes`` (small, large) ``repeat`` times, and ``memory_n`` for its peak.

    ``full_fanout``: each file at concurrency = N (every subagent alive at once), the
    shape of ``benchmarks.replay_full``; else the default concurrency. ``warm``: one
    replay first, not counted (a smoke run skips it).
    """
    small, large = sizes
    shape = "concurrency = N: every subagent alive at once" if full_fanout else (
        "default concurrency"
    )
    result = BenchResult(
        FULL_KEY if full_fanout else KEY,
        "6b · replay at full fan-out" if full_fanout else "6 · replay end to end",
        f"fanout replay FILE --json through the CLI (one instant call per subtask, "
        f"{shape}, fresh process)",
        {"sizes": list(sizes), "memory_n": memory_n, "repeat": repeat,
         "memory_repeat": memory_repeat, "tree": str(tree), "full_fanout": full_fanout},
    )
    per = 1e6 / (large - small)
    walls: dict[int, list[float]] = {small: [], large: []}
    cpus: dict[int, list[float]] = {small: [], large: []}
    rss_small: list[float] = []
    bare: dict[int, list[float]] = {small: [], large: []}
    bare_cpu: dict[int, list[float]] = {small: [], large: []}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for n in (small, large, memory_n):
            files[n] = Path(tmp) / f"one_call_{n}.yaml"
            text = one_call_scenario(n, concurrency=n if full_fanout else None)
            files[n].write_text(text, encoding="utf-8")
        if warm:
            replay_once(files[small], tree=tree)  # warm the page cache and the bytecode
            _bare(small)
        for _ in range(repeat):
            for n in (small, large):
                done = replay_once(files[n], tree=tree)
                walls[n].append(done.wall_s)
                cpus[n].append(done.cpu_s)
                if n == small:
                    rss_small.append(done.rss_mib)
                wall_s, cpu_s = _bare(n)
                bare[n].append(wall_s)
                bare_cpu[n].append(cpu_s)
        memory = [replay_once(files[memory_n], tree=tree) for _ in range(memory_repeat)]

    def marginal(times: dict[int, list[float]]) -> list[float]:
        return [(b - a) * per for a, b in zip(times[small], times[large], strict=True)]

    ours, ours_cpu = marginal(walls), marginal(cpus)
    floor, floor_cpu = marginal(bare), marginal(bare_cpu)
    vs_bare = ratios(ours, floor)
    # Repetitions whose floor used measurable CPU (a tiny smoke size may not).
    measured = [(a, b) for a, b in zip(ours_cpu, floor_cpu, strict=True) if b > 0]
    cpu_ratio = ratios(*zip(*measured, strict=True)) if measured else None
    peak = Stats.of([m.rss_mib for m in memory])
    result.figures += [
        Figure(f"fanout replay, N={small:,}", "s", Stats.of(walls[small]),
               note="start-up: imports, the token encoding"),
        Figure(f"fanout replay, N={large:,}", "s", Stats.of(walls[large])),
        Figure("fanout replay: marginal per subagent (wall)", "µs", Stats.of(ours)),
        Figure("bare anyio task group: marginal per subagent", "µs", Stats.of(floor)),
        Figure(f"fanout replay ÷ bare anyio (marginal, N={small}→{large:,})", "×", vs_bare,
               Target(f"≤ {TARGET_RATIO:g}×", vs_bare.median, TARGET_RATIO)),
        Figure("fanout replay: marginal per subagent (CPU)", "µs", Stats.of(ours_cpu),
               note="user + system time: steadier than wall on a shared machine"),
        Figure("bare anyio task group: marginal per subagent (CPU)", "µs",
               Stats.of(floor_cpu)),
        Figure("fanout replay ÷ bare anyio (marginal, CPU ÷ CPU)", "×",
               cpu_ratio, note="" if cpu_ratio else "below the timer's resolution at this size"),
        Figure(f"fanout replay, N={memory_n:,}", "s", Stats.of([m.wall_s for m in memory])),
        Figure(f"fanout replay, N={memory_n:,}: peak RSS", "MiB", peak,
               Target(f"< {RSS_LIMIT_MIB:g} MiB", peak.median, RSS_LIMIT_MIB, strict=True)),
        Figure(f"fanout replay, N={small}: peak RSS", "MiB", Stats.of(rss_small),
               note="the floor: the interpreter, the imports, the token encoding"),
        Figure(f"fanout replay, N={memory_n:,}: peak above that floor", "MiB",
               Stats.of([m.rss_mib - Stats.of(rss_small).median for m in memory]),
               note="what the subtasks themselves cost"),
    ]
    return result


def main(argv: Sequence[str] | None = None) -> None:
    """Run this benchmark alone, on this checkout or another (``--tree``)."""
    from benchmarks import results

    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay_cli")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose CLI runs")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--full", action="store_true", help="concurrency = N (full fan-out)")
    parser.add_argument("--out", type=Path, help="also write a results document here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    done = run(repeat=args.repeat, tree=args.tree.resolve(), full_fanout=args.full)
    results.show([done])
    if args.out:
        command = " ".join(["python -m benchmarks.replay_cli", *(argv or sys.argv[1:])])
        doc = results.document([done], command=command, seconds=time.perf_counter() - started)
        results.write(args.out, doc)


if __name__ == "__main__":
    main()
