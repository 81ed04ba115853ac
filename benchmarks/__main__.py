"""``python -m benchmarks`` (``make bench``): run every benchmark, print the table, write JSON.

Sizes are the issue's: N = 1,000 and 10,000 for the fan-out overhead, 100,000 subtasks
at concurrency 1,000 for scale, step 10 against step 1,000 for the context gate, and
N = 1,000 for the failure path. ``--quick`` runs every benchmark at a tiny size (a smoke
run: the figures mean nothing) and writes no file unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import context_gate, failure_path, overhead, replay_speed, results, scale
from benchmarks.stats import BenchResult

HERE = Path(__file__).parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Sizes:
    """How big and how often each benchmark runs."""

    fanout_sizes: tuple[int, ...]
    fanout_repeat: int
    scale_subtasks: int
    scale_concurrency: int
    scale_repeat: int
    replay_repeat: int
    gate_late_step: int
    gate_repeat: int
    failure_n: int
    failure_repeat: int


FULL = Sizes((1_000, 10_000), 9, 100_000, 1_000, 3, 7, 1_000, 7, 1_000, 7)
QUICK = Sizes((20, 50), 2, 300, 30, 1, 1, 30, 2, 20, 2)

BENCHMARKS: dict[str, Callable[[Sizes], BenchResult]] = {
    overhead.KEY: lambda s: overhead.run(s.fanout_sizes, s.fanout_repeat),
    scale.KEY: lambda s: scale.run(s.scale_subtasks, s.scale_concurrency, s.scale_repeat),
    replay_speed.KEY: lambda s: replay_speed.run(ROOT / "scenarios", s.replay_repeat),
    context_gate.KEY: lambda s: context_gate.run(s.gate_late_step, s.gate_repeat),
    failure_path.KEY: lambda s: failure_path.run(s.failure_n, s.failure_repeat),
}


def run_all(sizes: Sizes, only: Sequence[str] = ()) -> list[BenchResult]:
    """Run the chosen benchmarks (all by default), in the issue's order."""
    return [bench(sizes) for key, bench in BENCHMARKS.items() if not only or key in only]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line, run, print, write."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--only", action="append", choices=list(BENCHMARKS), default=[],
                        help="run only this benchmark (repeatable)")
    parser.add_argument("--out", type=Path, help="where to write the JSON results "
                        "(default: benchmarks/results.json for a full run)")
    parser.add_argument("--markdown", action="store_true",
                        help="also print the table as Markdown (for the README)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    started = time.perf_counter()
    done = run_all(sizes, args.only)
    seconds = time.perf_counter() - started
    results.show(done)
    if args.markdown:
        print(results.markdown(done))
    default = None if args.quick else HERE / "results.json"
    out = args.out or default
    if out is not None:
        command = "python -m benchmarks" + (" --quick" if args.quick else "") + "".join(
            f" --only {o}" for o in args.only
        )
        doc = results.document(done, command=command, seconds=seconds)
        results.write(out, doc)
        print(f"wrote {out} ({seconds:.0f} s)")
        if out == default and not args.only and results.update_readme(HERE / "README.md", doc):
            print(f"updated the table in {HERE / 'README.md'}")


if __name__ == "__main__":
    main()
