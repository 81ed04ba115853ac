"""Inputs for the report renderers: a replayed scenario's report and trace, as plain dicts."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import run_scenario
from shared.clock import run_in_virtual_time
from subagents.result import ProgressEvent

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
HOSTILE = '<script>alert(1)</script> "quotes" & ampersands'
HOSTILE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; &quot;quotes&quot; &amp; ampersands"


def event_dict(event: ProgressEvent, seq: int, session: int = 1) -> dict[str, Any]:
    """A progress event in the stored trace's format (what the run store keeps)."""
    row: dict[str, Any] = {"seq": seq, "session": session, "subtask_id": event.subtask_id,
                           "kind": event.kind, "at": event.at}
    if event.kind == "state":
        row["state"] = event.state
    elif event.kind == "call":
        row.update(tool=event.tool, step=event.step)
    else:
        row.update(tool=event.tool, attempt=event.attempt)
        if event.kind == "wait":
            row["wait_s"] = event.wait_s
        if event.kind == "attempt" and event.result is not None:
            row["result"] = event.result.to_wire()
    return row


@functools.cache
def _traced(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")

    def observe(event: ProgressEvent) -> None:
        events.append(event_dict(event, len(events)))

    async def go() -> dict[str, Any]:
        return (await run_scenario(scenario, observer=observe)).to_wire()

    return run_in_virtual_time(go), events


def traced(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Replay ``scenarios/NAME.yaml`` with an observer: its report wire dict and trace."""
    return copy.deepcopy(_traced(name))


def hostile(report: dict[str, Any], events: list[dict[str, Any]]) -> None:
    """Put markup, quotes and ampersands into every kind of text the renderers show."""
    report["query"] = f"battery {HOSTILE}"
    report["subtasks"][0]["query"] = HOSTILE
    section = report["answer"]["sections"][0]
    section["query"] = HOSTILE
    section["findings"][0]["data"] = {"note": HOSTILE, "items": [HOSTILE, "x | y"]}
    section["findings"][0]["tool"] = f"tool {HOSTILE}"
    gap = report["gaps"][0]
    gap.update(message=HOSTILE, attempted_query=f"a | b {HOSTILE}", alternatives=[HOSTILE])
    report["answer"]["missing"].append(HOSTILE)
    for e in events:
        if e["kind"] == "attempt" and not e["result"]["ok"]:
            e["result"]["message"] = HOSTILE
            e["tool"] = HOSTILE
