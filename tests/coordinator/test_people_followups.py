"""A person's decision during the lead's follow-up round is carried out as one made in
the first fan-out (docs/design.md §17): ``use_tool`` and ``requery`` continue the
follow-up after its round, and what the continuation fills counts for the job. A gap a
person decided before the follow-ups is not followed up by the lead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.views.followups import followup_lines

FOLLOWUP = Path(__file__).parent / "data" / "person_decides_followup.yaml"

# The follow-up's model asks for a person, naming a query to search for instead.
_ASKS = '''    patents_db:
      - calls:
          - tool: escalate
            args:
              trigger: human_request
              message: "The patent database is closed to us; search the web instead?"
              alternatives: ['search for "sulfide electrolyte patent holders"']
'''


def test_use_tool_decided_for_a_followup_runs_its_continuation() -> None:
    """use_tool on the follow-up patents_db runs patents_db-decided-1 with web_search:
    it completes, fills the follow-up's gap and the gap it follows up, coverage 0.5 → 1."""
    result = replay(load_scenario(FOLLOWUP))
    assert result.passed, result.mismatches


def test_requery_decided_for_a_followup_runs_its_continuation(tmp_path: Path) -> None:
    """requery on a follow-up that escalated asking for another query runs its
    continuation with that query, which fills the gaps as use_tool's does."""
    text = FOLLOWUP.read_text()
    start = text.index("    patents_db:\n")
    end = text.index("    patents_db-decided-1:")
    text = text[:start] + _ASKS + text[end:]
    text = text.replace("decide: {subtask: patents_db, do: use_tool}",
                        "decide: {subtask: patents_db, do: requery}")
    text = text.replace("{do: use_tool, tool: web_search,", "{do: requery,")
    path = tmp_path / "requery.yaml"
    path.write_text(text)
    result = replay(load_scenario(path))
    assert result.passed, result.mismatches
    [decision] = [d for d in result.report["decisions"] if d["escalation"] == "patents_db:1"]
    assert decision["query"] == "sulfide electrolyte patent holders"
    [row] = [s for s in result.report["subtasks"] if s["id"] == "patents_db-decided-1"]
    assert row["query"] == "sulfide electrolyte patent holders"


RESEARCH_LEAD = Path(__file__).parents[2] / "scenarios" / "research_lead.yaml"


def _decided_for_patents(do: str, tmp_path: Path) -> dict[str, Any]:
    """scenarios/research_lead.yaml's report with a person who decides ``do`` for patents
    at once (escalations wait 60 s, then accept)."""
    spec = yaml.safe_load(RESEARCH_LEAD.read_text())
    spec.pop("expect", None)
    spec["job"]["escalations"] = {"wait_s": 60, "on_timeout": "accept"}
    step: dict[str, Any] = {"subtask": "patents", "do": do}
    if do == "answer":
        step["text"] = "Toyota 412, Samsung 198, LG 121 families (WIPO 2025)"
    spec["people"] = [{"after_s": 0, "decide": step}]
    path = tmp_path / "research_lead.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    report: dict[str, Any] = replay(load_scenario(path)).report
    return report


@pytest.mark.parametrize(("do", "skipped"), [
    pytest.param("accept", True, id="accept"),
    pytest.param("answer", False, id="answer"),  # no gap left to say it on
    pytest.param("retry", True, id="retry"),  # denied again, then accepted by timeout
])
def test_a_gap_a_person_decided_is_not_followed_up(
    do: str, skipped: bool, tmp_path: Path
) -> None:
    """research_lead's lead plans patents_web for the patents gap; once a person decided
    that gap the follow-up does not run (the gap says so, and its follow-up note), while
    the lead's follow-up of supply_chain still runs."""
    report = _decided_for_patents(do, tmp_path)
    ids = [row["id"] for row in report["subtasks"]]
    assert "patents_web" not in ids
    assert "supply_chain_pages" in ids
    gaps = {g["subtask_id"]: g for g in report["gaps"]}
    if not skipped:
        assert "patents" not in gaps  # the person's answer covers it
        return
    assert gaps["patents"]["skipped_followups"] == ["patents_web"]
    line = followup_lines(report)["patents"]
    assert "a person decided it" in line and "patents_web did not run" in line


def test_a_gap_a_persons_continuation_did_not_fill_stays_open_to_the_lead(
    tmp_path: Path,
) -> None:
    """use_tool for patents: its continuation (no scripted turns: a gap) does not fill
    the gap, so the lead's patents_web still runs and fills it."""
    report = _decided_for_patents("use_tool", tmp_path)
    gaps = {g["subtask_id"]: g for g in report["gaps"]}
    assert gaps["patents"]["filled_by"] == ["patents_web"]
    assert "skipped_followups" not in gaps["patents"]
