"""Regenerate docs/report.html and docs/report.png from scenarios/research_demo.yaml.

Run with ``.venv/bin/python docs/make_screenshot.py`` (needs Debian's chromium).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import run_scenario
from coordinator.views.html import render_html
from shared.clock import run_in_virtual_time
from subagents.result import ProgressEvent

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def trace_of(scenario_file: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Replay a scenario in virtual time; return its report and its trace as dicts."""
    events: list[dict[str, Any]] = []

    def observe(e: ProgressEvent) -> None:
        row: dict[str, Any] = {"seq": len(events), "session": 1, "subtask_id": e.subtask_id,
                               "kind": e.kind, "at": e.at}
        if e.kind == "state":
            row["state"] = e.state
        elif e.kind == "call":
            row.update(tool=e.tool, step=e.step)
        elif e.kind in ("start", "attempt", "wait"):
            row.update(tool=e.tool, attempt=e.attempt)
            if e.kind == "wait":
                row["wait_s"] = e.wait_s
            if e.kind == "attempt" and e.result is not None:
                row["result"] = e.result.to_wire()
        events.append(row)

    scenario = load_scenario(scenario_file)

    async def go() -> dict[str, Any]:
        return (await run_scenario(scenario, observer=observe)).to_wire()

    return run_in_virtual_time(go), events


def main() -> int:
    """Write docs/report.html and screenshot it to docs/report.png."""
    scenario_file = ROOT / "scenarios" / "research_demo.yaml"
    report, events = trace_of(scenario_file)
    run = {"id": "20261129-demo", "job": "research-demo",
           "file": "scenarios/research_demo.yaml", "status": "finished",
           "outcome": report["outcome"], "coverage": report["coverage"],
           "elapsed_s": report["elapsed_s"], "sessions": 1}
    html_file = DOCS / "report.html"
    html_file.write_text(render_html(report, events, run), encoding="utf-8")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.stderr.write("chromium not found: wrote docs/report.html only\n")
        return 1
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--screenshot={DOCS / 'report.png'}", "--window-size=1280,1800",
             html_file.as_uri()],
            check=True, timeout=120, capture_output=True,
        )
    sys.stdout.write(f"wrote {html_file} and {DOCS / 'report.png'}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
