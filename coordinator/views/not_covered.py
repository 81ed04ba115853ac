"""What the answer does not cover, and what follow-ups covered, in plain words: the same
lines under "Not covered" and "Covered by a follow-up" in every view.

``answer.missing`` keeps the wire's words (``supply_chain: no category/incomplete_data →
gap; tried …``) for programs; a person reads ``supply_chain: partial data — trade_data
returned partial data …`` (:mod:`coordinator.views.words`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordinator.views.followups import followup_outcomes
from coordinator.views.words import gap_words

__all__ = ["filled_lines", "missing_lines"]


def missing_lines(report: Mapping[str, Any]) -> list[str]:
    """``answer.missing`` for a person: each open gap as "supply_chain: partial data —
    trade_data returned partial data (it marked its answer incomplete)", with what its
    follow-up found; any other line (findings cut to fit the model) as it is."""
    gaps = {str(g.get("subtask_id")): g for g in report.get("gaps", [])}
    outcomes = followup_outcomes(report)
    lines = []
    for line in (report.get("answer") or {}).get("missing", []):
        sid = str(line).split(": ", 1)[0]
        gap = gaps.get(sid)
        if gap is None or gap.get("filled_by"):
            lines.append(str(line))
            continue
        plain = (f"{sid}: {gap_words(gap.get('errorCategory'), gap.get('trigger'))} — "
                 f"{gap.get('message', '')}")
        if sid in outcomes:
            plain += f"; {outcomes[sid]}"
        lines.append(plain)
    return lines


def filled_lines(report: Mapping[str, Any]) -> list[str]:
    """The gaps a follow-up filled, each as "patents: access denied — filled by
    patents_web (web_search)": covered, so under their own heading, not "Not covered"."""
    outcomes = followup_outcomes(report)
    return [
        f"{g.get('subtask_id')}: {gap_words(g.get('errorCategory'), g.get('trigger'))} — "
        f"{outcomes[str(g.get('subtask_id'))]}"
        for g in report.get("gaps", [])
        if g.get("filled_by") and str(g.get("subtask_id")) in outcomes
    ]
