"""The tables the READMEs quote, generated from ``benchmarks/results.json``, never typed in.

``README.md`` (its Performance section) holds the headline figures between
``<!-- bench:start -->`` and ``<!-- bench:end -->``; ``benchmarks/README.md`` holds the
whole table between its results markers, and between ``<!-- sizes:start -->`` and
``<!-- sizes:end -->`` each benchmark's sizes in ``make bench`` and ``make bench-full``
(from :mod:`benchmarks.registry`) with the seconds it took in the recorded run. A
complete ``make bench`` (or ``make bench-full``) rewrites them all from the results it
has just written, and says which run they come from; ``python -m benchmarks.readme_table
[RESULTS.json]`` rewrites them from a results file (``tests/test_benchmarks_smoke.py``
checks that the READMEs say what ``benchmarks/results.json`` says).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import results
from benchmarks.registry import REGISTRY

HERE = Path(__file__).parent
ROOT = HERE.parent
RESULTS = HERE / "results.json"
START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
SIZES_START = "<!-- sizes:start -->"
SIZES_END = "<!-- sizes:end -->"
# Benchmarks without a target show this many of their figures.
UNTARGETED_ROWS = 4

__all__ = ["headline", "main", "rewrite", "sizes", "update_all"]


def _fmt(value: float | None) -> str:
    return results._fmt(value)


def _cell(f: dict[str, Any]) -> str:
    if f.get("median") is None:
        return f"— ({f.get('note', 'not measured')})"
    text = f"{_fmt(f['median'])} {f['unit']}".rstrip()
    if f.get("min") is not None and f["min"] != f["max"]:
        text += f" ({_fmt(f['min'])}–{_fmt(f['max'])})"
    return text


def _baseline(f: dict[str, Any]) -> str:
    if f.get("baseline") is None:
        return "—"
    ratio = f.get("vs_baseline")
    return f"{_fmt(f['baseline'])}" + (f" ({_fmt(ratio)}×)" if ratio is not None else "")


def _target(f: dict[str, Any]) -> str:
    target = f.get("target")
    if target is None:
        return ""
    return f"{target['target']}: " + ("met" if target["met"] else "**missed**")


def headline(doc: dict[str, Any]) -> str:
    """The README's table: each benchmark's figures with a target (or its first few).

    Baselines are shown only when the document's baseline tree ran in the same run
    (a results file from before that carries figures from another session: not shown).
    """
    base = doc.get("baseline") or {}
    same_run = bool(base.get("commit"))
    lines = ["| benchmark | figure | median (min–max) | baseline (÷) | target |",
             "|---|---|---:|---:|---|"]
    for bench in doc["benchmarks"].values():
        figures = bench["figures"]
        shown = [f for f in figures if f.get("target")] or figures[:UNTARGETED_ROWS]
        for i, f in enumerate(shown):
            name = bench["heading"] if i == 0 else ""
            shown_base = _baseline(f) if same_run else "—"
            lines.append(f"| {name} | {f['label']} | {_cell(f)} | {shown_base} | "
                         f"{_target(f)} |")
    against = (f"the baseline tree {base.get('commit')} ({base.get('ref')}), run in the same "
               "run" if base.get("commit") else "no baseline tree")
    m = doc["machine"]
    lines += ["", f"From one `{doc['command']}` ({results.sizes(doc)}) of {doc['generated']} "
              f"({doc['duration_s']:g} s, {m['cpu_count']} CPUs, Python {m['python']}); "
              f"baseline: {against}."]
    return "\n".join(lines)


def _params(params: Mapping[str, Any]) -> str:
    def shown(value: Any) -> str:
        if isinstance(value, Path):
            return value.name
        if isinstance(value, tuple | list):
            return "(" + ", ".join(shown(v) for v in value) + ")"
        return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else (
            str(value))

    return ", ".join(f"{k}={shown(v)}" for k, v in params.items()) or "(defaults)"


def sizes(doc: dict[str, Any]) -> str:
    """Each benchmark's parameters in ``make bench`` and ``make bench-full``, and the
    seconds it took in ``doc``'s run (this tree's + the baseline tree's)."""
    timings: dict[str, dict[str, float]] = doc.get("timings") or {}
    mode = f"{doc['mode']}: " if doc.get("mode") else ""
    lines = [f"| benchmark | `make bench` | `make bench-full` | s in the recorded run ({mode}"
             "tree + baseline) |", "|---|---|---|---:|"]
    for entry in REGISTRY:
        took = timings.get(entry.key)
        spent = f"{took['current_s']:g} + {took['baseline_s']:g}" if took else "—"
        lines.append(f"| {entry.key} | {_params(entry.bench)} | {_params(entry.full)} | "
                     f"{spent} |")
    total = f"{doc['duration_s']:g} s in all" if timings else "no timings recorded"
    lines += ["", f"The recorded run (`{doc['command']}`, {doc['generated']}): {total}."]
    return "\n".join(lines)


def rewrite(path: Path, body: str, start: str = START, end: str = END) -> bool:
    """Replace what lies between ``start`` and ``end`` in ``path``; False without them."""
    if not path.exists():
        return False
    text = path.read_text(encoding="utf-8")
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        return False
    path.write_text(text[:i] + f"{start}\n{body}\n" + text[j:], encoding="utf-8")
    return True


def update_all(doc: dict[str, Any], root: Path = ROOT) -> list[Path]:
    """Rewrite both READMEs' generated tables from ``doc``; the files changed."""
    changed = []
    if rewrite(root / "README.md", headline(doc)):
        changed.append(root / "README.md")
    bench_readme = root / "benchmarks" / "README.md"
    tables = results.update_readme(bench_readme, doc)
    if rewrite(bench_readme, sizes(doc), SIZES_START, SIZES_END) or tables:
        changed.append(bench_readme)
    return changed


def main(argv: Sequence[str] | None = None) -> None:
    """Rewrite the READMEs' tables from a results file."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.readme_table")
    parser.add_argument("results", nargs="?", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    doc = json.loads(args.results.read_text(encoding="utf-8"))
    for path in update_all(doc):
        print(f"updated the table in {path}")


if __name__ == "__main__":
    main()
