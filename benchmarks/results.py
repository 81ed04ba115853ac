"""The results file and the table: machine, versions, and every figure with min/median/max."""

from __future__ import annotations

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

from benchmarks.stats import BenchResult, Figure

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


def document(results: Sequence[BenchResult], *, command: str, seconds: float) -> dict[str, Any]:
    """The JSON document ``benchmarks/results.json`` holds."""
    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "duration_s": round(seconds, 1),
        "machine": machine(),
        "versions": versions(),
        "benchmarks": {r.key: r.to_json() for r in results},
    }


def write(path: Path, doc: dict[str, Any]) -> None:
    """Write the results file (pretty-printed, stable key order)."""
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


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


def _verdict(figure: Figure) -> str:
    if figure.target is None:
        return figure.note
    mark = "[green]met[/]" if figure.target.met else "[red]missed[/]"
    return f"{figure.target.text}: {mark}" + (f" ({figure.note})" if figure.note else "")


def table(results: Sequence[BenchResult]) -> Table:
    """One rich table: a section per benchmark, a row per figure."""
    grid = Table(title="fanout benchmarks", show_lines=False, header_style="bold")
    grid.add_column("figure", no_wrap=True)
    grid.add_column("unit", no_wrap=True)
    for column in ("min", "median", "max"):
        grid.add_column(column, justify="right", no_wrap=True)
    grid.add_column("target")
    for result in results:
        grid.add_section()
        grid.add_row(f"[bold]{result.heading}[/]", "", "", "", "", "")
        for f in result.figures:
            s = f.stats
            grid.add_row(
                "  " + f.label, f.unit,
                _fmt(s.min if s else None), _fmt(s.median if s else None),
                _fmt(s.max if s else None), _verdict(f),
            )
    return grid


def markdown(results: Sequence[BenchResult]) -> str:
    """The same table as Markdown, for the README."""
    lines = ["| benchmark / figure | unit | min | median | max | target |",
             "|---|---|---:|---:|---:|---|"]
    for result in results:
        lines.append(f"| **{result.heading}** — {result.title} | | | | | |")
        for f in result.figures:
            s = f.stats
            verdict = ""
            if f.target is not None:
                verdict = f"{f.target.text}: {'met' if f.target.met else '**missed**'}"
            if f.note:
                verdict = f"{verdict} ({f.note})" if verdict else f.note
            lines.append(
                f"| {f.label} | {f.unit} | {_fmt(s.min if s else None)} | "
                f"{_fmt(s.median if s else None)} | {_fmt(s.max if s else None)} | {verdict} |"
            )
    return "\n".join(lines)


README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"


def markdown_from_json(doc: dict[str, Any]) -> str:
    """The Markdown table of a results document, with the machine it was taken on."""
    lines = ["| benchmark / figure | unit | min | median | max | target |",
             "|---|---|---:|---:|---:|---|"]
    for bench in doc["benchmarks"].values():
        lines.append(f"| **{bench['heading']}** — {bench['title']} | | | | | |")
        for f in bench["figures"]:
            verdict = ""
            if "target" in f:
                t = f["target"]
                verdict = f"{t['target']}: {'met' if t['met'] else '**missed**'}"
            if f.get("note"):
                verdict = f"{verdict} ({f['note']})" if verdict else f["note"]
            lines.append(
                f"| {f['label']} | {f['unit']} | {_fmt(f['min'])} | {_fmt(f['median'])} | "
                f"{_fmt(f['max'])} | {verdict} |"
            )
    m, v = doc["machine"], doc["versions"]
    installed = ", ".join(f"{k} {val}" for k, val in v.items() if val) or "none"
    lines += [
        "",
        f"Taken {doc['generated']} with `{doc['command']}` ({doc['duration_s']:g} s) on "
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
    """Print the table (plain text when not a terminal, then at least 120 columns wide)."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 120))
    console.print(table(results))
