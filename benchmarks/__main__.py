"""``python -m benchmarks`` (``make bench``): run every benchmark, print one table, write JSON.

The benchmarks and their sizes are listed in :mod:`benchmarks.registry`, three sizes
each: by default the ``bench`` sizes (about ten minutes on 2 cores, baseline included);
``--full`` (``make bench-full``) the issues' sizes; ``--quick`` a tiny size — a smoke
run: the figures mean nothing — that writes no file unless ``--out`` is given. Each
figure is shown against its baseline: the same figure of the baseline tree
(:mod:`benchmarks.baseline_tree`, by default the previous release), measured in this
same run at the same size right after the current tree's. In a bench or full run each
benchmark of the current tree runs in an interpreter of its own, as the baseline tree's
do (``--here`` runs them in this one). The floors and the competitors are contenders
inside each benchmark, measured side by side in the same repetitions. A complete bench
or full run writes ``benchmarks/results.json`` (its ``mode`` says which) and rewrites
the tables generated from it (:mod:`benchmarks.readme_table`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import readme_table, results
from benchmarks.baseline_tree import BaselineTree, default_ref
from benchmarks.registry import REGISTRY, Entry, Mode, failed_result, failures, keys, run_all
from benchmarks.stats import BenchResult

HERE = Path(__file__).parent

__all__ = ["main", "run_all"]


def _with_baseline(
    current: list[BenchResult], tree: BaselineTree | None, entry: Entry, mode: Mode
) -> dict[str, str]:
    """Run the baseline tree's same benchmarks at the same size; fill in each figure's
    baseline.

    Returns, per benchmark, why it has no baseline (empty when it has one).
    """
    why: dict[str, str] = {}
    for result in current:
        if tree is None:
            why[result.key] = "no baseline (--no-baseline)"
            continue
        got = tree.run(result.key, entry.params(mode))
        if isinstance(got, str):
            why[result.key] = got
            continue
        results.with_baselines([result], {"benchmarks": {result.key: got}})
        why[result.key] = ""
    return why


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line, run, print, write."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    size.add_argument("--full", action="store_true",
                      help="the issues' sizes (make bench-full; the default is make bench's "
                      "smaller ones)")
    parser.add_argument("--only", action="append", choices=keys(), default=[],
                        help="run only this benchmark (repeatable)")
    parser.add_argument("--out", type=Path, help="where to write the JSON results "
                        "(default: benchmarks/results.json for a complete bench or full run)")
    parser.add_argument("--baseline-ref", default=None, metavar="REF",
                        help="the git ref whose tree is the baseline, run side by side "
                        "(default: the newest release tag, else HEAD~1)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="run the current tree only (no ÷ baseline column)")
    parser.add_argument("--here", action="store_true",
                        help="run every benchmark in this interpreter (a bench or full run "
                        "gives each a fresh one, as the baseline tree's are)")
    parser.add_argument("--markdown", action="store_true",
                        help="also print the table as Markdown (for the README)")
    args = parser.parse_args(argv)
    mode: Mode = "quick" if args.quick else "full" if args.full else "bench"
    started = time.perf_counter()
    ref = None if args.no_baseline else (args.baseline_ref or default_ref())
    done: list[BenchResult] = []
    why: dict[str, str] = {}
    # Each benchmark's wall seconds, this tree's and the baseline tree's: what sizing a
    # mode to its time budget starts from.
    timings: dict[str, dict[str, float]] = {}
    tree = BaselineTree(ref) if ref is not None else None
    with tree if tree is not None else _Nothing():
        # Benchmark by benchmark: the current tree's, then the baseline tree's, so drift
        # on a shared machine over the run's minutes hits both sides of each ratio alike.
        for entry in REGISTRY:
            if args.only and entry.key not in args.only:
                continue
            # One benchmark failing (a tree mid-edit, a missing service) still leaves the
            # others' figures; the run then says which failed and exits 1.
            began = time.perf_counter()
            if mode == "quick" or args.here:
                now = run_all(mode, only=[entry.key], keep_going=True)
            else:
                now = [_in_own_interpreter(entry.key, mode)]
            between = time.perf_counter()
            why.update(_with_baseline(now, tree, entry, mode))
            ended = time.perf_counter()
            timings[entry.key] = {"current_s": round(between - began, 1),
                                  "baseline_s": round(ended - between, 1)}
            print(f"{entry.key}: {between - began:.0f} s, its baseline {ended - between:.0f} s "
                  f"({ended - started:.0f} s in all)", file=sys.stderr, flush=True)
            done += now
    seconds = time.perf_counter() - started
    results.show(done)
    for key, reason in why.items():
        if reason:
            print(f"{key}: {reason}", file=sys.stderr)
    if args.markdown:
        print(results.markdown(done))
    failed = failures(done)
    # A run with a failure does not replace the recorded results (an explicit --out does).
    default = None if mode == "quick" or failed or args.only else HERE / "results.json"
    out = args.out or default
    if out is not None:
        command = "python -m benchmarks" + _FLAG[mode] + "".join(
            f" --only {o}" for o in args.only
        )
        doc = results.document(done, command=command, seconds=seconds, mode=mode)
        doc["timings"] = timings
        doc["baseline"] = (tree.describe() if tree is not None else None)
        if tree is not None:
            doc["baseline"]["why_missing"] = {k: v for k, v in why.items() if v}
        results.write(out, doc)
        print(f"wrote {out} ({seconds:.0f} s)")
        if out == default:
            for path in readme_table.update_all(doc):
                print(f"updated the table in {path}")
    if failed:
        print(f"failed: {', '.join(failed)} (benchmarks/results.json left as it was)",
              file=sys.stderr)
        sys.exit(1)


_FLAG: dict[Mode, str] = {"quick": " --quick", "bench": "", "full": " --full"}


def _in_own_interpreter(key: str, mode: Mode = "bench") -> BenchResult:
    """Benchmark ``key`` of this tree in a fresh ``python -m benchmarks --only KEY --here``,
    exactly as the baseline tree's is run: the figures of both sides of a ratio come from
    an interpreter that ran nothing before. (Run here instead, after the other
    benchmarks, the service-load clients shared a heap grown by those: their
    event-delivery p99 read 334–441 ms in this process against 12–53 ms in a fresh one.)
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{key}.json"
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks", "--only", key, "--here", "--no-baseline",
             "--out", str(out), *_FLAG[mode].split()],
            cwd=HERE.parent, capture_output=True, text=True, check=False,
        )
        if not out.exists():
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            return failed_result(key, f"exit {proc.returncode}: {tail}")
        doc = json.loads(out.read_text(encoding="utf-8"))
    return BenchResult.from_json(key, doc["benchmarks"][key])


class _Nothing:
    """A context manager that does nothing (no baseline tree)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()
