"""A person's decision during the lead's follow-up round is carried out as one made in
the first fan-out (docs/design.md §17): ``use_tool`` and ``requery`` continue the
follow-up after its round, and what the continuation fills counts for the job."""

from __future__ import annotations

from pathlib import Path

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay

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
