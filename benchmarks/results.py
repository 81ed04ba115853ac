"""The results file and the table: machine, versions, every figure against its baseline.

One table for every benchmark: each figure's median (and min–max over repetitions),
its baseline (the same figure of the baseline tree, run side by side in the same
run), the ratio of the two, and the target it must meet.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.stats import BenchResult

PACKAGES = ("fanout", "anyio", "trio", "pydantic", "tenacity", "tiktoken", "langgraph")


def machine() -> dict[str, Any]:
    """Where the figures were taken."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
    }


def versions() -> dict[str, str | None]:
    """The versions of fanout and the packages the figures depend on (None: not installed)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def document(results: Sequence[BenchResult], *, command: str, seconds: float,
             mode: str | None = None) -> dict[str, Any]:
    """The JSON document ``benchmarks/results.json`` holds (``mode``: the registry's size,
    ``quick``, ``bench`` or ``full``; None for a benchmark run alone by its own command)."""
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    return {
        "generated": generated,
        "command": command,
        "mode": mode,
        "duration_s": round(seconds, 1),
        "machine": machine(),
        "versions": versions(),
        "benchmarks": {r.key: {**r.to_json(), "taken": generated} for r in results},
    }


def merged(previous: dict[str, Any], doc: dict[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """``previous`` with the benchmarks of ``doc`` replaced (a rerun of some of them).

    Each benchmark keeps the time it was ``taken``; the document's own header is the
    rerun's. Benchmarks are listed in ``order`` (the registry's), unknown ones last.
    """
    old = {k: {"taken": previous.get("generated"), **v}
           for k, v in previous.get("benchmarks", {}).items()}
    both = {**old, **doc["benchmarks"]}
    ranked = sorted(both, key=lambda k: order.index(k) if k in order else len(order))
    return {**doc, "command": f"{doc['command']} (merged into {previous.get('command')!r})",
            "benchmarks": {k: both[k] for k in ranked}}


def write(path: Path, doc: dict[str, Any]) -> None:
    """Write the results file (pretty-printed, stable key order)."""
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load(path: Path) -> dict[str, Any] | None:
    """A results document written by :func:`write` (None when there is no such file)."""
    if not path.exists():
        return None
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def with_baselines(results: Sequence[BenchResult], doc: dict[str, Any] | None) -> None:
    """Give each figure the median of the same figure (benchmark key, label) in ``doc``."""
    if doc is None:
        return
    for result in results:
        before = {
            f["label"]: f.get("median")
            for f in doc.get("benchmarks", {}).get(result.key, {}).get("figures", [])
        }
        result.figures = [
            dataclasses.replace(f, baseline=before[f.label])
            if before.get(f.label) is not None and f.baseline is None
            else f
            for f in result.figures
        ]


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _spread(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"{_fmt(low)}–{_fmt(high)}"


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{_fmt(value)}×"


def _verdict(target: dict[str, Any] | None, note: str, *, rich: bool) -> str:
    if target is None:
        return note
    met = target["met"]
    if rich:
        mark = "[green]met[/]" if met else "[red]missed[/]"
    else:
        mark = "met" if met else "**missed**"
    return f"{target['target']}: {mark}" + (f" ({note})" if note else "")


COLUMNS = ("figure", "unit", "median", "min–max", "baseline", "÷ baseline", "target")


def _rows(doc: dict[str, Any], *, rich: bool) -> list[tuple[str, list[list[str]]]]:
    """Per benchmark: its heading and one row of cells per figure (the table's content).

    The heading is the short one in a terminal, the heading and title in Markdown.
    """
    out = []
    for bench in doc["benchmarks"].values():
        rows = []
        for f in bench["figures"]:
            rows.append([
                f["label"], f["unit"], _fmt(f["median"]), _spread(f["min"], f["max"]),
                _fmt(f.get("baseline")), _ratio(f.get("vs_baseline")),
                _verdict(f.get("target"), f.get("note", ""), rich=rich),
            ])
        heading = bench["heading"] if rich else f"{bench['heading']} — {bench['title']}"
        out.append((heading, rows))
    return out


def _doc(results: Sequence[BenchResult]) -> dict[str, Any]:
    return {"benchmarks": {r.key: r.to_json() for r in results}}


def table(results: Sequence[BenchResult]) -> Table:
    """One rich table: a section per benchmark, a row per figure."""
    grid = Table(title="fanout benchmarks", show_lines=False, header_style="bold")
    for column in COLUMNS:
        right = column in ("median", "min–max", "baseline", "÷ baseline")
        grid.add_column(column, justify="right" if right else "left",
                        no_wrap=column != "target")
    for heading, rows in _rows(_doc(results), rich=True):
        grid.add_section()
        grid.add_row(f"[bold]{heading}[/]", *[""] * (len(COLUMNS) - 1))
        for cells in rows:
            grid.add_row("  " + cells[0], *cells[1:])
    return grid


def _markdown_rows(doc: dict[str, Any]) -> list[str]:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|---:|---:|---:|---:|---|"]
    for heading, rows in _rows(doc, rich=False):
        lines.append(f"| **{heading}** |" + " |" * (len(COLUMNS) - 1))
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return lines


def markdown(results: Sequence[BenchResult]) -> str:
    """The same table as Markdown, for the README."""
    return "\n".join(_markdown_rows(_doc(results)))


README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"


SIZES = {
    "quick": "the smoke run's tiny sizes: the figures mean nothing",
    "bench": "`make bench`: the reduced sizes of each entry's `bench` in registry.py",
    "full": "`make bench-full`: the issues' sizes, each entry's `full` in registry.py",
}
"""What a results document's ``mode`` means, as the tables under it say."""


def sizes(doc: dict[str, Any]) -> str:
    """Which run (and so which sizes) a results document comes from."""
    return SIZES.get(str(doc.get("mode")), "sizes not recorded")


def markdown_from_json(doc: dict[str, Any]) -> str:
    """The Markdown table of a results document, with the run and machine it comes from."""
    lines = _markdown_rows(doc)
    m, v = doc["machine"], doc["versions"]
    installed = ", ".join(f"{k} {val}" for k, val in v.items() if val) or "none"
    lines += [
        "",
        f"Taken {doc['generated']} with `{doc['command']}` ({sizes(doc)}; "
        f"{doc['duration_s']:g} s) on "
        f"{m['platform']}, {m['cpu_count']} CPUs, Python {m['python']}; {installed}.",
    ]
    return "\n".join(lines)


def update_readme(path: Path, doc: dict[str, Any]) -> bool:
    """Replace the table between the README's results markers; False if it has none."""
    if not path.exists():
        return False
    text = path.read_text(encoding="utf-8")
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        return False
    body = f"{README_START}\n{markdown_from_json(doc)}\n"
    path.write_text(text[:start] + body + text[end:], encoding="utf-8")
    return True


def show(results: Sequence[BenchResult], console: Console | None = None) -> None:
    """Print the table (plain text when not a terminal, then at least 170 columns wide)."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 170))
    console.print(table(results))
