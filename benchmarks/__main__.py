"""``python -m benchmarks`` (``make bench``): run every benchmark, print one table, write JSON.

The benchmarks and their sizes are listed in :mod:`benchmarks.registry` (the issues'
sizes; ``--quick`` runs each at a tiny size — a smoke run: the figures mean nothing —
and writes no file unless ``--out`` is given). Each figure is shown against its
baseline, the same figure in ``benchmarks/baseline.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import results
from benchmarks.registry import failures, keys, run_all

HERE = Path(__file__).parent
BASELINE = HERE / "baseline.json"

__all__ = ["main", "run_all"]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line, run, print, write."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--only", action="append", choices=keys(), default=[],
                        help="run only this benchmark (repeatable)")
    parser.add_argument("--out", type=Path, help="where to write the JSON results "
                        "(default: benchmarks/results.json for a full run)")
    parser.add_argument("--baseline", type=Path, default=BASELINE,
                        help="the results document each figure is compared with "
                        "(default: benchmarks/baseline.json)")
    parser.add_argument("--markdown", action="store_true",
                        help="also print the table as Markdown (for the README)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    # One benchmark failing (a tree mid-edit, a missing service) still leaves the others'
    # figures; the run then says which failed and exits 1.
    done = run_all(quick=args.quick, only=args.only, keep_going=True)
    seconds = time.perf_counter() - started
    results.with_baselines(done, results.load(args.baseline))
    results.show(done)
    if args.markdown:
        print(results.markdown(done))
    failed = failures(done)
    # A run with a failure does not replace the recorded results (an explicit --out does).
    default = None if args.quick or failed else HERE / "results.json"
    out = args.out or default
    if out is not None:
        command = "python -m benchmarks" + (" --quick" if args.quick else "") + "".join(
            f" --only {o}" for o in args.only
        )
        doc = results.document(done, command=command, seconds=seconds)
        previous = results.load(out) if out == default and args.only else None
        if previous is not None:
            # A rerun of some benchmarks replaces only theirs in the recorded results.
            doc = results.merged(previous, doc, keys())
        results.write(out, doc)
        print(f"wrote {out} ({seconds:.0f} s)")
        if out == default and results.update_readme(HERE / "README.md", doc):
            print(f"updated the table in {HERE / 'README.md'}")
    if failed:
        print(f"failed: {', '.join(failed)} (benchmarks/results.json left as it was)",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
