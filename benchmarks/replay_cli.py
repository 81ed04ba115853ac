"""Benchmark 6: ``fanout replay`` end to end, timed as a user times it, against a bare
anyio task group timed the same way.

A file of N subtasks, one instant simulated call each, at the default concurrency
(:func:`benchmarks.workloads.one_call_scenario`), is replayed by a fresh
``python -m coordinator.cli replay FILE --json`` (what the ``fanout`` script runs) with
its output sent to /dev/null: start-up, loading (YAML, validation), the run in virtual
time, the report, the ``expect`` check, the JSON and the exit. The floor is a bare anyio
task group making the same instant calls (benchmark 1's), run as a process of its own
that imports nothing else (``python -c``). Both sides are whole processes, timed by the
parent (wall) and by ``os.wait4`` (the child's user + system CPU). The cost per subagent
is the marginal one, (T(N) − T(10)) / (N − 10), so start-up cancels out; taken from the
least disturbed of the repetitions (each size's fastest), as a person timing it on a
quiet machine would; the per-repetition ratios are shown beside it. Repetitions
interleave the four processes, so drift on a shared machine hits each alike.

The floor was once timed inside this harness's own process, N tasks in a fresh event
loop of it (that row is still shown, for comparison), and divided per repetition, by
median: on 2026-12-02 that said 6.67× where the user's stopwatch said 10.1×. A loop in
the harness allocates among the harness's objects (fanout and the benchmarks imported,
tens of thousands more than a bare process holds), so each collection its 5,000 tasks
trigger walks more: the floor came out slower than in a process of its own. The replay
side ran ``main([...])`` under ``python -c``, which unfreezes the heap at the end (a
full collection the ``fanout`` script skips). And a median of per-repetition ratios
lets every disturbance of the small floor (~0.1 s over 4,990 tasks) pull the ratio down.

A file of ``memory_n`` subtasks gives the peak RSS of a large replay: the child's own
``VmHWM``, read by the child as it exits (``ru_maxrss`` would count the parent's pages
it was forked with).

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


# The floor as its own process: a bare anyio task group making benchmark 1's instant
# calls (benchmarks.workloads.lookup, written out: importing benchmarks would import
# fanout), and nothing else imported.
_BARE_CHILD = """
import sys
import anyio
async def lookup(i):
    return {"item": i, "results": [f"result {i}"]}
async def main(n):
    out = [None] * n
    async def one(i):
        out[i] = await lookup(i)
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
anyio.run(main, int(sys.argv[1]))
"""


def timed_process(command: list[str], *, cwd: Path, env: dict[str, str], what: str) -> Replayed:
    """Run ``command`` to its end: its wall and CPU seconds (it must exit 0)."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            raise AssertionError(f"{what} exited {proc.returncode}: {tail}")
    return Replayed(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def replay_once(file: Path, *, tree: Path = ROOT) -> Replayed:
    """``fanout replay FILE --json`` of ``tree`` as a user runs it, in a process of its own
    (``python -m coordinator.cli``, what the ``fanout`` script runs); it must pass. Its
    ``rss_mib`` is ``ru_maxrss``: see :func:`replay_peak` for the child's own peak.

    Raises:
        AssertionError: the replay did not exit 0 (its expect block was not met).
    """
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "coordinator.cli", "replay", str(file), "--json"]
    return timed_process(command, cwd=tree, env=env, what=f"replay of {file.name}")


def bare_once(n: int) -> Replayed:
    """The floor as a user times it: a bare anyio task group of ``n`` instant calls in a
    process of its own."""
    return timed_process([sys.executable, "-c", _BARE_CHILD, str(n)], cwd=ROOT,
                    env=dict(os.environ), what=f"the bare task group of {n}")


def replay_peak(file: Path, *, tree: Path = ROOT) -> Replayed:
    """A replay whose ``rss_mib`` is the child's own peak (``VmHWM``, read as it exits).

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


def _in_this_loop(n: int) -> float:
    """The floor as it was once timed: ``n`` tasks in a fresh event loop of this process
    (for comparison only)."""
    return timed_in_loop(lambda: bare_fanout(n))


def run(
    sizes: Sequence[int] = (10, 5_000),
    memory_n: int = 20_000,
    repeat: int = 5,
    memory_repeat: int = 2,
    tree: Path = ROOT,
    full_fanout: bool = False,
    warm: bool = True,
) -> BenchResult:
    """Replay N = ``sizes`` (small, large) ``repeat`` times beside the floor, and
    ``memory_n`` for its peak.

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
        f"`fanout replay FILE --json` and a bare anyio task group, each a whole process "
        f"timed from outside (one instant call per subtask, {shape})",
        {"sizes": list(sizes), "memory_n": memory_n, "repeat": repeat,
         "memory_repeat": memory_repeat, "tree": str(tree), "full_fanout": full_fanout},
    )
    per = 1e6 / (large - small)
    runs: dict[str, dict[int, list[Replayed]]] = {
        side: {small: [], large: []} for side in ("fanout", "bare")}
    in_loop: dict[int, list[float]] = {small: [], large: []}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for n in (small, large, memory_n):
            files[n] = Path(tmp) / f"one_call_{n}.yaml"
            text = one_call_scenario(n, concurrency=n if full_fanout else None)
            files[n].write_text(text, encoding="utf-8")
        if warm:  # the page cache and the bytecode, for both sides
            replay_once(files[small], tree=tree)
            bare_once(small)
        for _ in range(repeat):
            for n in (small, large):
                runs["fanout"][n].append(replay_once(files[n], tree=tree))
                runs["bare"][n].append(bare_once(n))
                in_loop[n].append(_in_this_loop(n))
        smallest = [replay_peak(files[small], tree=tree) for _ in range(memory_repeat)]
        memory = [replay_peak(files[memory_n], tree=tree) for _ in range(memory_repeat)]

    def least_disturbed(side: str, cpu: bool = False) -> float:
        """The marginal per subagent from each size's fastest run, in µs."""
        fastest = {n: min(r.cpu_s if cpu else r.wall_s for r in runs[side][n])
                   for n in (small, large)}
        return (fastest[large] - fastest[small]) * per

    def per_repetition(side: str) -> list[float]:
        return [(b.wall_s - a.wall_s) * per
                for a, b in zip(runs[side][small], runs[side][large], strict=True)]

    ours, floor = least_disturbed("fanout"), least_disturbed("bare")
    ours_cpu, floor_cpu = least_disturbed("fanout", cpu=True), least_disturbed("bare", cpu=True)
    # A smoke run's sizes may leave a floor's marginal at or under the timer's resolution.
    tiny = "below the timer's resolution at this size"
    ratio = Stats.of([ours / floor]) if floor > 0 else None
    cpu_ratio = Stats.of([ours_cpu / floor_cpu]) if floor_cpu > 0 else None
    measured = [(a, b) for a, b in zip(per_repetition("fanout"), per_repetition("bare"),
                                       strict=True) if b > 0]
    each = ratios(*zip(*measured, strict=True)) if measured else None
    best = f"least disturbed of {repeat}"
    marginal = f"marginal N={small}→{large:,}"
    walls = {n: [r.wall_s for r in runs["fanout"][n]] for n in (small, large)}
    peak = Stats.of([m.rss_mib for m in memory])
    floor_peak = Stats.of([m.rss_mib for m in smallest])
    result.figures += [
        Figure(f"fanout replay, N={small:,}: whole process", "s", Stats.of(walls[small]),
               note="start-up: the interpreter, the imports, the token encoding"),
        Figure(f"fanout replay, N={large:,}: whole process", "s", Stats.of(walls[large])),
        Figure(f"fanout replay: {marginal} per subagent (whole process, {best})", "µs",
               Stats.of([ours])),
        Figure(f"bare anyio task group: {marginal} per subagent (own process, {best})",
               "µs", Stats.of([floor]), note="python -c: anyio and the tool, nothing else"),
        Figure(f"fanout replay ÷ bare anyio, whole processes ({marginal}, {best})", "×",
               ratio, Target(f"≤ {TARGET_RATIO:g}×", ratio.median, TARGET_RATIO)
               if ratio else None, note="what a user's stopwatch says" if ratio else tiny),
        Figure(f"fanout replay ÷ bare anyio, whole processes ({marginal}, each repetition)",
               "×", each, note="the spread: a disturbance of the small floor moves it most"
               if each else tiny),
        Figure(f"fanout replay ÷ bare anyio, CPU ÷ CPU ({marginal}, {best})", "×",
               cpu_ratio, note="the children's user + system time" if cpu_ratio else tiny),
        Figure(f"bare anyio task group in this harness's event loop: {marginal} per "
               "subagent", "µs", Stats.of([(b - a) * per for a, b in zip(
                   in_loop[small], in_loop[large], strict=True)]),
               note="for comparison: the floor as it was once timed (a loop among the "
               "harness's objects)"),
        Figure(f"fanout replay, N={memory_n:,}", "s", Stats.of([m.wall_s for m in memory])),
        Figure(f"fanout replay, N={memory_n:,}: peak RSS", "MiB", peak,
               Target(f"< {RSS_LIMIT_MIB:g} MiB", peak.median, RSS_LIMIT_MIB, strict=True)),
        Figure(f"fanout replay, N={small}: peak RSS", "MiB", floor_peak,
               note="the floor: the interpreter, the imports, the token encoding"),
        Figure(f"fanout replay, N={memory_n:,}: peak above that floor", "MiB",
               Stats.of([m.rss_mib - floor_peak.median for m in memory]),
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
