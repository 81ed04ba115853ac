"""A plan refused for its size says so, whatever the lead answers when told."""

from __future__ import annotations

from coordinator.jobfile.loader import load_scenario_text
from coordinator.replay import replay

JOB = """\
scenario: too-many
model:
  provider: scripted
  turns:
    lead:
      - subtasks:
          - {id: a, query: "a", tools: [web_search]}
          - {id: b, query: "b", tools: [web_search]}
          - {id: c, query: "c", tools: [web_search]}
      - {text: "I will plan fewer subtasks."}
job:
  query: "q"
  max_subtasks: 2
tools:
  web_search:
    params: {query: {type: string}}
    responses: [{ok: {results: ["x"]}}]
"""


def test_max_subtasks_exceeded_then_text_still_names_the_size() -> None:
    """A plan over max_subtasks answered with text on the correction round: the lead's gap
    names the size limit, not only "got text only" (the job then degrades to `question`,
    whose scripted model has no turns: a gap of its own)."""
    report = replay(load_scenario_text(JOB, "too-many.yaml")).report
    gap = report["gaps"][0]
    assert gap["subtask_id"] == "lead" and gap["trigger"] == "no_progress"
    assert "at most 2 subtasks, got 3" in gap["message"]
    assert "got text only" in gap["message"]
    assert any("at most 2 subtasks" in a for a in gap["alternatives"])


def test_a_plan_of_copies_of_one_query_goes_back_naming_them() -> None:
    """Six subtasks with one query (what Gemma 3 270M planned) are refused like duplicate
    ids: each copy is named, and the lead is asked once more."""
    from coordinator.job import JobSpec
    from coordinator.lead.decompose import check_plan

    job = JobSpec(query="How do sodium-ion cells do in the cold?")
    copies = [{"id": str(n), "query": "Sodium-ion  cells in the cold?", "tools": []}
              for n in range(1, 4)]
    copies[2]["query"] = "sodium-ion cells in the COLD?"
    _, problems = check_plan({"subtasks": copies}, job, [])
    assert problems == [
        "subtasks[1].query: the same query as subtasks[0]: give each subtask a different "
        "part of the question",
        "subtasks[2].query: the same query as subtasks[0]: give each subtask a different "
        "part of the question",
    ]
