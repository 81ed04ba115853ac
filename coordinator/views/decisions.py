"""A person's part of a report in words: decisions, and findings a person gave
(docs/design.md §17), for every view alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coordinator.decision import given_by
from shared.envelope import PERSON

__all__ = ["decision_line", "is_person_finding", "person_line", "split_findings"]

_DONE = {
    "retry": "ran it again",
    "use_tool": "continued it with another tool",
    "requery": "continued it with a changed query",
    "answer": "answered it",
    "accept": "accepted the gap",
    "stop": "stopped the run",
}


def is_person_finding(finding: Mapping[str, Any]) -> bool:
    """Whether a finding (wire form) was given by a person, not found by a tool."""
    return finding.get("tool") == PERSON and finding.get("by") is not None


def split_findings(
    findings: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """``(tool findings, findings a person gave)``, each in order: shown apart."""
    tools = [f for f in findings if not is_person_finding(f)]
    people = [f for f in findings if is_person_finding(f)]
    return tools, people


def person_line(finding: Mapping[str, Any]) -> str:
    """A person's finding in one line: ``given by ana, 2026-12-04: TEXT (source URL)``."""
    data = finding.get("data")
    text = data.get("text") if isinstance(data, Mapping) else data
    source = f" (source {finding['url']})" if finding.get("url") else ""
    return f"{given_by(finding.get('by'), finding.get('at'))}: {text}{source}"


def _percent(value: Any) -> str:
    return f"{float(value):.0%}" if isinstance(value, int | float) else "?"


def decision_line(decision: Mapping[str, Any]) -> str:
    """One decision (wire form) in words: what was chosen, by whom and when, and what
    it changed; a handler's bare choice as "decision for SUBTASK: CHOICE"."""
    subtask = decision.get("subtask_id")
    do = decision.get("do")
    if do is None:
        return f"decision for {subtask}: {decision.get('choice', '')}"
    at = decision.get("at")
    if at is None and decision.get("at_s") is not None:
        # A real-time run's seconds are read off the loop's clock: hundredths are enough.
        at = f"+{round(float(decision['at_s']), 2):g}s"
    who = given_by(decision.get("by"), at).removeprefix("given ")
    line = f"{decision.get('escalation') or subtask}: {_DONE.get(str(do), do)} ({do}) {who}"
    if do == "answer" and decision.get("text"):
        line += f": {decision['text']!r}"
    elif do == "use_tool" and decision.get("tool"):
        line += f": {decision['tool']}"
    elif do == "requery" and decision.get("query"):
        line += f": {decision['query']!r}"
    change = decision.get("change")
    if isinstance(change, Mapping):
        line += (f"; {subtask} {change.get('status_before')} → {change.get('status_after')}, "
                 f"coverage {_percent(change.get('coverage_before'))} → "
                 f"{_percent(change.get('coverage_after'))}")
    return line
