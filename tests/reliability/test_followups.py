"""Chaos properties of the lead's follow-ups (docs/design.md §11): generated decomposed jobs whose
lead plans follow-ups (for gaps, for covered subtasks, for nothing at all), whose
follow-ups find evidence, nothing, or only words; each replayed twice and against the
same job without follow-ups."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.report import CoverageReport
from tests.reliability.counts import count
from tests.reliability.jobs import load
from tests.reliability.profiles import scaled
from tests.reliability.trace import Observed, observe

MODEL_TOOL = "model"
RESPONSES = {
    "ok": {"ok": {"found": "something"}},
    "empty": {"empty": True},
    "partial": {"partial": {"page": 1, "pages": 2}},
    "permission": {"error": "permission", "message": "denied"},
    "business": {"error": "business", "message": "limit exceeded"},
    "unavailable": {"error": "unavailable"},
}
KINDS = st.sampled_from(sorted(RESPONSES))
FAILS = st.sampled_from(["ok", "partial", "partial", "permission", "permission", "business"])


@st.composite
def documents(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A decomposed job with follow-ups, and the same job whose lead plans none."""
    n = draw(st.integers(1, 4))
    ids = [f"s{i}" for i in range(n)]
    tools: dict[str, Any] = {}
    turns: dict[str, list[dict[str, Any]]] = {}
    plan = []
    for i, sid in enumerate(ids):
        tools[f"t{i}"] = {
            "params": {"q": {"type": "string"}},
            "latency_s": draw(st.sampled_from([0.5, 1, 2])),
            # Mostly failures: gaps for the lead to follow up.
            "responses": [RESPONSES[k] for k in draw(st.lists(FAILS, min_size=1, max_size=3))],
        }
        weight = draw(st.sampled_from([0.5, 1, 2]))
        plan.append({"id": sid, "query": f"q{i}", "weight": weight, "tools": [f"t{i}"]})
        turns[sid] = [{"calls": [{"tool": f"t{i}", "args": {"q": "x"}}]}, {"text": f"{sid} ok"}]
    followup_turns = []
    for _ in range(draw(st.integers(1, 2))):
        items = []
        for j in range(draw(st.integers(0, 3))):
            # Mostly a subtask (a gap or not); now and then no subtask, or a taken id.
            target = draw(st.sampled_from([*ids * 4, "nowhere"]))
            fid = draw(st.sampled_from([f"f{j}"] * 6 + ["s0"]))
            items.append({"for": target, "id": fid, "query": f"again {target}", "tools": ["web"]})
        followup_turns.append({"followups": items})
    for j in range(3):
        if draw(st.booleans()):
            turns[f"f{j}"] = [{"calls": [{"tool": "web", "args": {"q": f"f{j}"}}]},
                              {"text": "found it"}]
        else:  # words only, twice: no evidence
            turns[f"f{j}"] = [{"text": "from memory"}, {"text": "still from memory"}]
    tools["web"] = {
        "params": {"q": {"type": "string"}},
        "latency_s": 1,
        "responses": [RESPONSES[k] for k in draw(st.lists(KINDS, min_size=1, max_size=3))],
    }
    lead = [{"subtasks": plan}, *followup_turns, {"text": "the answer [s0]"}]
    doc: dict[str, Any] = {
        "scenario": "chaos-followups",
        "seed": draw(st.integers(0, 1000)),
        "model": {"provider": "scripted", "latency_s": 1,
                  "retry": {"max_attempts": 2, "initial_backoff_s": 1, "jitter": "none"},
                  "turns": {"lead": lead, **turns}},
        "job": {"query": "chaos", "concurrency": draw(st.integers(1, 3)), "max_subtasks": 4,
                "defaults": {"retry": {"max_attempts": 2, "initial_backoff_s": 1,
                                       "jitter": "none"}}},
        "tools": tools,
    }
    baseline = json.loads(json.dumps(doc))
    baseline["model"]["turns"]["lead"] = [{"subtasks": plan}, {"text": "the answer [s0]"}]
    return doc, baseline


def _twice(doc: dict[str, Any]) -> Observed:
    scenario = load(doc)
    first, second = observe(scenario), observe(scenario)
    assert first.wire() == second.wire(), "two replays give byte-identical reports"
    assert first.trace_text() == second.trace_text(), "two replays give identical traces"
    return first


def _gap_keys(report: CoverageReport) -> set[tuple[Any, ...]]:
    return {(g.subtask_id, g.category, g.trigger, g.route, g.message) for g in report.gaps}


@pytest.mark.slow  # generated jobs, each run twice: seconds (tests/tiers.py)
@scaled(0.5)
@given(documents())
def test_follow_ups_never_hide_a_failure_and_fill_a_gap_only_with_evidence(
    docs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """Every gap and escalation of the job without follow-ups stays; its rows are
    unchanged; a gap is filled only by covered follow-ups with a tool's evidence, and
    coverage counts exactly the filled gaps' weight more; replays are byte-identical."""
    doc, baseline_doc = docs
    report = _twice(doc).report
    baseline = _twice(baseline_doc).report
    # Never removes a gap or an escalation; the fan-out's own rows are the same.
    assert _gap_keys(baseline) <= _gap_keys(report)
    esc = {e.subtask_id for e in report.escalations}
    assert {e.subtask_id for e in baseline.escalations} <= esc
    # The lead's own row (a synthesis rejected by its checks: a second followups turn
    # read as the answer writes no text, docs/design.md §7) is not the fan-out's.
    rows = [s for s in report.subtasks if s.id != "lead"]
    base_rows = [s for s in baseline.subtasks if s.id != "lead"]
    n = len(base_rows)
    assert rows[:n] == base_rows
    followups = {s.id: s for s in rows[n:]}
    assert all(s.followup_of is not None and s.weight == 0 for s in followups.values())
    gaps = {g.subtask_id for g in baseline.gaps}
    assert all(s.followup_of in gaps for s in followups.values()), "a follow-up for a non-gap"
    sections = {s.subtask_id: s for s in report.answer.sections}
    filled: dict[str, list[str]] = {}
    for gap in report.gaps:
        for fid in gap.filled_by or []:
            row = followups[fid]
            assert row.followup_of == gap.subtask_id
            assert row.status in ("complete", "empty")
            evidence = [f for f in sections[fid].findings if f.tool != MODEL_TOOL]
            assert evidence, f"{fid} filled {gap.subtask_id} without a tool's evidence"
            filled.setdefault(gap.subtask_id, []).append(fid)
    for fid, row in followups.items():
        if row.status in ("complete", "empty"):
            assert fid in filled.get(str(row.followup_of), []), f"covered {fid} filled nothing"
    # Coverage: the fan-out's covered weight plus the filled gaps' weight, nothing else.
    total = sum(s.weight for s in report.subtasks)
    covered = sum(
        s.weight for s in report.subtasks if s.status in ("complete", "empty") or s.id in filled
    )
    assert abs(report.coverage - covered / total) < 1e-9
    assert report.coverage >= baseline.coverage
    open_ids = [m.split(":")[0] for m in report.answer.missing]
    assert open_ids == [g.subtask_id for g in report.gaps if not g.filled_by]
    count("cases")
    if followups:
        count("followed up")
    if filled:
        count("gaps filled")
