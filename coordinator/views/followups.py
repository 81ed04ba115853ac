"""One line per gap the lead followed up (docs/design.md §11), the same in every view.

"patents — access denied → filled by patents_web (web_search)", or "… → not filled
(follow-up patents_web: gap)" when the follow-up did not cover it either, or "… → not
followed up, a person decided it (accept, patents:1): the lead's patents_web did not run"
when the lead planned one for a gap a person had decided (docs/design.md §17); the gap's cause
in plain words (:mod:`coordinator.views.words`). Built from the report's wire form, so
the terminal, Markdown and HTML views say the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordinator.views.words import trigger_words

_MODEL_TOOL = "model"  # a model's own words are not a tool's evidence


def _tools(report: Mapping[str, Any], subtask_id: str) -> str:
    for section in report.get("answer", {}).get("sections", []):
        if section.get("subtask_id") == subtask_id:
            names = dict.fromkeys(
                f.get("tool") for f in section.get("findings", []) if f.get("tool") != _MODEL_TOOL
            )
            return ", ".join(str(n) for n in names if n)
    return ""


def followup_outcomes(report: Mapping[str, Any]) -> dict[str, str]:
    """Per gap with a follow-up, what came of it: "filled by patents_web (web_search)", or
    "not filled (follow-up patents_web: gap)"."""
    rows = report.get("subtasks", [])
    planned: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("followup_of"):
            planned.setdefault(str(row["followup_of"]), []).append(row)
    outcomes: dict[str, str] = {}
    for gap in report.get("gaps", []):
        sid = str(gap.get("subtask_id"))
        skipped = gap.get("skipped_followups") or []
        if skipped:
            note = (f"{_decided_by(report, sid)}: the lead's "
                    f"{', '.join(str(s) for s in skipped)} did not run")
            if sid not in planned:
                outcomes[sid] = f"not followed up, {note}"
                continue
        if sid not in planned:
            continue
        filled = gap.get("filled_by") or []
        if filled:
            parts = []
            for fid in filled:
                tools = _tools(report, fid)
                parts.append(f"{fid} ({tools})" if tools else str(fid))
            outcomes[sid] = "filled by " + ", ".join(parts)
        else:
            tried = ", ".join(f"{r.get('id')}: {r.get('status')}" for r in planned[sid])
            outcomes[sid] = f"not filled (follow-up {tried})"
        if skipped:
            outcomes[sid] += f"; {note}"
    return outcomes


def _decided_by(report: Mapping[str, Any], subtask_id: str) -> str:
    """"a person decided it (accept, patents:1)": the last decision on ``subtask_id``."""
    made = [d for d in report.get("decisions", [])
            if d.get("subtask_id") == subtask_id and d.get("do")]
    if not made:
        return "a person decided it"
    last = made[-1]
    return f"a person decided it ({last.get('do')}, {last.get('escalation') or subtask_id})"


def followup_lines(report: Mapping[str, Any]) -> dict[str, str]:
    """Per gap with a follow-up, its line: the gap, its cause, filled by whom or not."""
    causes = {str(g.get("subtask_id")): g.get("trigger") for g in report.get("gaps", [])}
    return {
        sid: f"{sid} — {trigger_words(causes[sid])} → {outcome}"
        for sid, outcome in followup_outcomes(report).items()
    }
