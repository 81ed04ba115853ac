"""The people: block and the person's job fields in a scenario file (docs/design.md §17)."""

from __future__ import annotations

import pytest

from coordinator.jobfile.expect import check_expect
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import scenario_json_schema
from shared.errors import InputFileErrors

BASE = """\
scenario: people
job:
  query: "q"
  escalations: {wait_s: 120, on_timeout: stop}
  review_plan: true
  subtasks:
    - id: patents
      query: "p"
      tools: [db]
      plan: [{call: db}]
tools:
  db: {responses: [{ok: 1}]}
"""


def test_the_people_block_and_job_fields_load() -> None:
    """Decisions, plan reviews and requests load as steps; the job keeps its wait."""
    scenario = load_scenario_text(BASE + """\
people:
  - {after_s: 30, decide: {subtask: patents, do: answer, text: "412", source: "https://a.example"}}
  - {after_s: 5, review_plan: approve}
  - {after_s: 6, review_plan: {edit: {change: {patents: {weight: 2}}}}}
  - {after_s: 12, request: {subtask: patents, stop: true}}
  - {after_s: 13, decide: {subtask: patents, option: o2, by: ana}}
""", "inline.yaml")
    assert [s.kind for s in scenario.people] == ["decide", "review_plan", "review_plan",
                                                 "request", "decide"]
    assert scenario.job.escalation_wait().wait_s == 120
    assert scenario.job.escalation_wait().on_timeout == "stop"
    assert scenario.job.review_plan is True
    edit = scenario.people[2].review_plan
    assert edit is not None and edit.verdict == "edit"
    assert edit.edit is not None and edit.edit.change["patents"].weight == 2


def test_a_job_without_the_fields_serialises_as_before() -> None:
    """escalations and review_plan are left out of a job's dump when unset."""
    scenario = load_scenario_text(BASE.replace("  escalations: {wait_s: 120, on_timeout: stop}\n",
                                               "").replace("  review_plan: true\n", ""), "x.yaml")
    dumped = scenario.job.model_dump()
    assert "escalations" not in dumped and "review_plan" not in dumped
    assert scenario.job.escalation_wait().wait_s == 900
    assert scenario.job.escalation_wait().on_timeout == "accept"


def test_a_review_in_a_job_that_asks_for_none_is_refused() -> None:
    """A review_plan step needs job.review_plan: true, or no plan would wait for it."""
    with pytest.raises(InputFileErrors) as info:
        load_scenario_text(BASE.replace("  review_plan: true\n", "") + """\
people:
  - {after_s: 5, review_plan: reject}
""", "inline.yaml")
    [error] = info.value.errors
    assert (error.line, error.field) == (13, "people[0].review_plan")


@pytest.mark.parametrize(
    ("step", "field", "fragment"),
    [
        pytest.param("{after_s: 5, review_plan: maybe}", "people[0].review_plan",
                     "approve, reject, or edit", id="review-word"),
        pytest.param("{after_s: 5, review_plan: {edit: {remove: 3}}}",
                     "people[0].review_plan.edit.remove", "a list", id="edit-shape"),
        pytest.param("{after_s: 5, review_plan: {edt: {}}}", "people[0].review_plan.edt",
                     "did you mean 'edit'?", id="edit-misspelt"),
        pytest.param("{after_s: 5, request: {subtask: patents}}", "people[0].request",
                     "exactly one of stop: true, hint", id="request-neither"),
        pytest.param("{after_s: -1, request: {subtask: patents, hint: h}}", "people[0].after_s",
                     "≥ 0", id="negative-time"),
        pytest.param("{after_s: 1, decide: {subtask: patents, do: retyr}}",
                     "people[0].decide.do", "one of retry", id="unknown-kind"),
    ],
)
def test_each_bad_step_is_one_error_with_its_line(step: str, field: str, fragment: str) -> None:
    """A malformed step is reported once, on its line, naming its field."""
    with pytest.raises(InputFileErrors) as info:
        load_scenario_text(BASE + f"people:\n  - {step}\n", "inline.yaml")
    [error] = info.value.errors
    assert (error.line, error.field) == (14, field), error.describe()
    assert fragment in error.describe()


def test_expect_decisions_names_a_subtask() -> None:
    """expect.decisions keys are escalation or subtask ids of the job."""
    with pytest.raises(InputFileErrors) as info:
        load_scenario_text(BASE + 'expect:\n  decisions: {"news:1": {do: accept}}\n', "x.yaml")
    [error] = info.value.errors
    assert error.field == 'expect.decisions["news:1"]'


def test_expect_checks_decisions_by_escalation_subtask_or_count() -> None:
    """A decision is matched by its escalation id, else its subtask; an int is a count."""
    report = {"decisions": [{"subtask_id": "patents", "escalation": "patents:1", "do": "retry",
                             "change": {"coverage_after": 1.0}}]}
    assert check_expect({"decisions": {"patents:1": {"do": "retry"}}}, report) == []
    assert check_expect({"decisions": {"patents": {"change": {"coverage_after": 1}}}},
                        report) == []
    assert check_expect({"decisions": 1}, report) == []
    [count] = check_expect({"decisions": 2}, report)
    assert (count.path, count.actual) == ("decisions", 1)
    [wrong] = check_expect({"decisions": {"patents:2": {"do": "accept"}}}, report)
    assert wrong.actual == "<no decision>"


def test_the_schema_takes_a_review_as_a_word_or_an_edit() -> None:
    """The JSON schema of people steps lets review_plan be approve, reject or an edit."""
    import jsonschema

    doc = {"scenario": "s", "job": {"query": "q"},
           "people": [{"after_s": 1, "review_plan": "approve"},
                      {"after_s": 2, "review_plan": {"edit": {"remove": ["a"]}}},
                      {"after_s": 3, "decide": {"subtask": "a", "do": "accept"}}]}
    jsonschema.validate(doc, scenario_json_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "people": [{"after_s": 1, "review_plan": "maybe"}]},
                            scenario_json_schema())
