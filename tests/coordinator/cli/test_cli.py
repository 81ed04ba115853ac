"""The fanout CLI: exit codes, JSON output, determinism, errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
DESIGN = DATA / "design_example.yaml"
MALFORMED = Path(__file__).resolve().parents[1] / "malformed"


def test_replay_json_shape_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    """replay --json prints one document with the contract's keys and exits 0 on a pass."""
    code = main(["replay", str(DESIGN), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["passed"] == 1 and out["failed"] == 0
    entry = out["scenarios"][0]
    assert set(entry) == {"scenario", "file", "passed", "mismatches", "report"}
    report = entry["report"]
    for key in ("outcome", "coverage", "elapsed_s", "subtasks", "gaps", "escalations", "answer"):
        assert key in report
    gap = report["gaps"][0]
    for key in ("subtask_id", "errorCategory", "trigger", "route", "attempted_query",
                "partial_results", "alternatives", "message"):
        assert key in gap


def test_main_in_process_leaves_the_callers_heap_as_it_was(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the ``fanout`` process (argv read from sys.argv) freezes its heap for a quick
    exit: a caller passing its arguments gets its collector back as it was."""
    import gc

    before = gc.get_freeze_count()
    assert main(["replay", str(DESIGN), "--json"]) == 0
    assert gc.get_freeze_count() == before
    capsys.readouterr()
    frozen: list[bool] = []
    monkeypatch.setattr(sys, "argv", ["fanout", "--help"])
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    with pytest.raises(SystemExit):
        main()
    assert frozen == [True]


def test_replay_is_byte_identical(capsys: pytest.CaptureFixture[str]) -> None:
    """Replaying the same scenario twice prints exactly the same JSON."""
    main(["replay", str(DESIGN), "--json"])
    first = capsys.readouterr().out
    main(["replay", str(DESIGN), "--json"])
    assert capsys.readouterr().out == first


def test_replay_mismatch_exits_1_and_names_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An expect block the report does not meet is a mismatch with path, expected, actual."""
    text = DESIGN.read_text().replace("coverage: 0.5", "coverage: 0.75")
    bad = tmp_path / "wrong.yaml"
    bad.write_text(text)
    code = main(["replay", str(bad), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    mismatch = out["scenarios"][0]["mismatches"][0]
    assert mismatch == {"path": "coverage", "expected": 0.75, "actual": 0.5}


def test_replay_human_output_lists_mismatches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json the mismatch table shows the path and both values."""
    bad = tmp_path / "wrong.yaml"
    bad.write_text(DESIGN.read_text().replace("attempts: 3", "attempts: 9"))
    assert main(["replay", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "subtasks.market.attempts" in out and "FAIL" in out


@pytest.mark.process
def test_malformed_file_exits_2_without_traceback() -> None:
    """A malformed scenario is an error naming file and line, exit 2, no traceback."""
    bad = MALFORMED / "duplicate_subtask_id.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "coordinator.cli", "replay", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "duplicate_subtask_id.yaml:" in proc.stderr


def test_one_bad_file_means_nothing_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """When any file of a replay is malformed, no scenario runs and the exit code is 2."""
    good = tmp_path / "a_good.yaml"
    good.write_text(DESIGN.read_text())
    (tmp_path / "b_bad.yaml").write_text("scenario: x\njob: {query: q, subtasks: []}\n")
    code = main(["replay", str(tmp_path), "--json"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "b_bad.yaml" in captured.err


def test_missing_file_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    """A path that does not exist is bad input, not a crash."""
    assert main(["replay", "does/not/exist.yaml"]) == 2


def test_schema_prints_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """fanout schema prints a JSON Schema describing the top-level keys."""
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"scenario", "job", "tools", "expect"} <= set(schema["properties"])


def test_run_json_uses_real_time_at_speed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run --json executes the job on the asyncio backend and prints the report."""
    store = str(tmp_path / "runs.sqlite")
    code = main(["run", str(DESIGN), "--json", "--speed", "1000", "--store", store])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["outcome"] == "partial"
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "market": "complete",
        "patents": "gap",
    }


@pytest.mark.process
def test_ask_carries_out_the_option_a_person_picks(tmp_path: Path) -> None:
    """With --ask, the escalation is shown as it happens and the option typed at stdin is
    carried out: retry runs patents again, and it completes."""
    proc = subprocess.run(
        [sys.executable, "-m", "coordinator.cli", "run", str(DATA / "ask_retry.yaml"),
         "--speed", "100", "--ask", "--store", str(tmp_path / "runs.sqlite")],
        input="o1\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "escalation patents:1: patents" in proc.stdout
    assert "o1: retry" in proc.stdout
    stored = subprocess.run(
        [sys.executable, "-m", "coordinator.cli", "report", "--format", "json",
         "--store", str(tmp_path / "runs.sqlite")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    report = json.loads(stored.stdout)
    assert [(d["escalation"], d["do"]) for d in report["decisions"]] == [("patents:1", "retry")]
    assert {s["id"]: s["status"] for s in report["subtasks"]}["patents"] == "complete"
