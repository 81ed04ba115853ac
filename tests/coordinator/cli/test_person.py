"""The person at the terminal: ``--ask`` decides escalations on the run's desk as they
happen, ``--review`` reviews the lead's plan, typed at stdin (docs/design.md §17)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from coordinator.api.person import os_user
from coordinator.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
ASK_RETRY = DATA / "ask_retry.yaml"  # patent_db denies once, then answers
REVIEW_PLAN = DATA / "review_plan.yaml"  # a scripted lead plans market and patents


def _run(
    args: list[str], typed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, dict[str, object], str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    code = main([*args, "--speed", "1000", "--json", "--store", str(tmp_path / "runs.sqlite")])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _decisions(report: dict[str, object]) -> dict[str, dict[str, object]]:
    decisions = report["decisions"]
    assert isinstance(decisions, list)
    return {d["escalation"]: d for d in decisions}


def test_ask_retry_is_carried_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Choosing retry at the prompt runs patents again, and it completes."""
    code, report, err = _run(["run", str(ASK_RETRY), "--ask"], "o1\n", tmp_path,
                             monkeypatch, capsys)
    assert code == 0
    statuses = {s["id"]: s["status"] for s in report["subtasks"]}  # type: ignore[attr-defined]
    assert statuses == {"patents": "complete", "licence_prices": "complete"}
    decided = _decisions(report)
    assert decided["patents:1"]["do"] == "retry"
    assert decided["patents:1"]["by"] == os_user()
    change = decided["patents:1"]["change"]
    assert isinstance(change, dict)
    assert (change["status_before"], change["status_after"]) == ("partial", "complete")
    assert change["coverage_after"] == 1.0
    # The escalation and its options were shown before the question (on stderr: --json).
    assert "escalation patents:1: patents" in err
    assert "o1: retry" in err and "permission_denied" in err


def test_ask_answer_refused_source_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An answer whose source the desk refuses names the field and is asked again."""
    typed = ("o3\nToyota leads\nftp://nowhere\n"
             "o3\nToyota leads, 412 families\nhttps://example.org/ip\n")
    code, report, err = _run(["run", str(ASK_RETRY), "--ask"], typed, tmp_path,
                             monkeypatch, capsys)
    assert code == 0
    assert "refused: source" in err
    answered = _decisions(report)["patents:1"]
    assert answered["do"] == "answer"
    assert answered["text"] == "Toyota leads, 412 families"
    assert answered["source"] == "https://example.org/ip"


def test_ask_with_stdin_closed_decides_as_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With nobody at stdin the run does not wait: each escalation is accepted at once."""
    code, report, err = _run(["run", str(ASK_RETRY), "--ask"], "", tmp_path,
                             monkeypatch, capsys)
    assert code == 0
    assert {d["do"] for d in _decisions(report).values()} == {"accept"}
    assert "stdin closed" in err


def test_review_edit_runs_the_edited_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refused edit names its field and is asked again; the edit made then is what runs."""
    typed = ("edit\nnope\n\n"
             "edit\npatents\nmarket=solid-state battery market forecast\n\n")
    code, report, err = _run(["run", str(REVIEW_PLAN), "--review"], typed, tmp_path,
                             monkeypatch, capsys)
    assert code == 0
    assert "refused: edit.remove[0]" in err
    assert "the lead's plan waits for your review" in err
    subtasks = report["subtasks"]
    assert isinstance(subtasks, list)
    assert [(s["id"], s["query"]) for s in subtasks] == [
        ("market", "solid-state battery market forecast")
    ]


def test_review_reject_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rejecting the plan ends the run failed with the lead's gap plan_rejected."""
    code, report, _ = _run(["run", str(REVIEW_PLAN), "--review"], "reject\n", tmp_path,
                           monkeypatch, capsys)
    assert report["outcome"] == "failed"
    gaps = report["gaps"]
    assert isinstance(gaps, list)
    assert [(g["subtask_id"], g["trigger"]) for g in gaps] == [("lead", "plan_rejected")]
    assert code != 0


def test_review_with_detach_refused_on_temporal(capsys: pytest.CaptureFixture[str]) -> None:
    """--review needs a person at this terminal, which --detach leaves: bad input, exit 2
    (on Temporal it asks as locally: tests/coordinator/temporal/test_person.py)."""
    code = main(["run", str(REVIEW_PLAN), "--review", "--executor", "temporal", "--detach"])
    assert code == 2
    assert "--review needs a person at this terminal" in capsys.readouterr().err


def test_ask_command_review_reject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fanout ask --review` shows the lead's plan; rejecting it runs nothing."""
    import yaml

    job = yaml.safe_load(REVIEW_PLAN.read_text())
    tools = tmp_path / "tools.yaml"
    tools.write_text(yaml.safe_dump({"model": job["model"], "tools": job["tools"]}))
    code, report, err = _run(
        ["ask", job["job"]["query"], "--tools", str(tools), "--model", "scripted", "--review"],
        "reject\n", tmp_path, monkeypatch, capsys)
    assert "market" in err and "patents" in err  # the plan's table
    assert report["outcome"] == "failed"
    gaps = report["gaps"]
    assert isinstance(gaps, list)
    assert [g["trigger"] for g in gaps] == ["plan_rejected"]
    assert code != 0
