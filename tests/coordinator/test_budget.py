"""The job's token budget: subagents hand up when it is spent, the synthesis keeps a reserve."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coordinator.jobfile.loader import load_scenario, load_scenario_text
from coordinator.replay import replay
from subagents.models.spend import TokenBudget

LIBRARY = Path(__file__).resolve().parents[2] / "scenarios"


def _budget_job(budget: str, *, lead: bool = True) -> str:
    """Two model-planned subtasks of 1,100 tokens each, one at a time; a lead that writes."""
    data = yaml.safe_load((LIBRARY / "model_budget.yaml").read_text())
    data.pop("expect")
    data["job"]["budget"] = yaml.safe_load(budget)
    data["job"]["concurrency"] = 1
    data["job"]["subtasks"] = data["job"]["subtasks"][:2]
    for sid in "cde":
        del data["model"]["turns"][sid]
    if not lead:
        del data["model"]["turns"]["lead"]
    return yaml.safe_dump(data)


def test_running_subagents_hand_up_and_queued_ones_are_gaps() -> None:
    """Past the subagents' share, running ones keep their findings and queued ones never call."""
    report = replay(load_scenario(LIBRARY / "model_budget.yaml")).report
    rows = {s["id"]: s for s in report["subtasks"]}
    assert [rows[s]["status"] for s in "abcde"] == ["complete"] * 2 + ["partial"] * 2 + ["gap"]
    assert rows["e"]["attempts"] == 0
    gaps = {g["subtask_id"]: g for g in report["gaps"]}
    for sid in "cde":
        assert (gaps[sid]["errorCategory"], gaps[sid]["trigger"]) == (
            "business",
            "threshold_breach",
        )
    assert len(gaps["c"]["partial_results"]) == 1


def test_tokens_are_reported_per_subtask_and_in_all() -> None:
    """Each subtask's tokens and the lead's add up to the job's total, with its budget."""
    report = replay(load_scenario(LIBRARY / "model_budget.yaml")).report
    spend = report["tokens"]
    per_subtask = sum(s["tokens"]["input_tokens"] for s in report["subtasks"])
    assert spend["input_tokens"] == per_subtask + spend["lead"]["input_tokens"] == 3200
    assert spend["output_tokens"] == 750
    assert spend["budget"] == {"total_tokens": 4000, "synthesis_reserve": 0.25}


def test_the_synthesis_runs_in_its_reserve() -> None:
    """The subagents stopped short of the budget's reserve, so the lead still wrote."""
    report = replay(load_scenario(LIBRARY / "model_budget.yaml")).report
    assert report["answer"]["text"].startswith("a and b are answered")
    assert "synthesis_error" not in report["answer"]


def test_no_synthesis_when_the_whole_budget_is_spent() -> None:
    """With no reserve left, the report stands without the lead's text and says why."""
    scenario = load_scenario_text(_budget_job("{total_tokens: 1500, synthesis_reserve: 0}"), "b")
    report = replay(scenario).report
    error = report["answer"]["synthesis_error"]
    assert report["answer"].get("text") is None
    assert (error["errorCategory"], error["trigger"]) == ("business", "threshold_breach")
    assert report["subtasks"][1]["status"] == "partial"


def test_an_output_budget_stops_subagents_too() -> None:
    """A budget of output tokens alone is held like a total one: b never calls its model."""
    scenario = load_scenario_text(_budget_job("{output_tokens: 150}", lead=False), "b")
    report = replay(scenario).report
    # a asked with 100 of the subagents' 135 spent, so it finished; b found 200 spent.
    assert [s["status"] for s in report["subtasks"]] == ["complete", "gap"]


def test_a_job_without_usage_or_budget_reports_no_tokens() -> None:
    """Reports of jobs that counted nothing are as they were: no tokens field anywhere."""
    report = replay(load_scenario(LIBRARY / "model_overload_rate_limit.yaml")).report
    assert "tokens" not in report
    assert all("tokens" not in s for s in report["subtasks"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("200000", TokenBudget(total_tokens=200000), id="total"),
        pytest.param("150_000:20,000", TokenBudget(input_tokens=150000, output_tokens=20000),
                     id="in-out"),
        pytest.param("150000:", TokenBudget(input_tokens=150000), id="input-only"),
        pytest.param(":5000", TokenBudget(output_tokens=5000), id="output-only"),
    ],
)
def test_budget_flag_forms(text: str, expected: TokenBudget) -> None:
    """--budget takes N (in and out together) or IN:OUT with either side optional."""
    assert TokenBudget.parse(text) == expected


@pytest.mark.parametrize("text", ["lots", "0", ":", "-5:3", "1.5"])
def test_bad_budget_flags_are_refused(text: str) -> None:
    """Anything but positive whole numbers is a clear error, never a silent default."""
    with pytest.raises(ValueError, match="tokens"):
        TokenBudget.parse(text)
