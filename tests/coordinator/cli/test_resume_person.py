"""`fanout resume` of a run that waited for a person, and `fanout runs` saying that a
run waits (docs/design.md §17): with ``--ask`` the same escalation is asked again at the
terminal and the decision applies; without it the resume says so before the run goes on.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from coordinator.api.person import os_user
from coordinator.cli import main
from coordinator.cli.run import _resume_hint
from coordinator.store.runs import RunStore, wait_for
from coordinator.views.terminal import runs_table
from tests.coordinator.engine.sessions import session

DATA = Path(__file__).resolve().parents[1] / "data"
WAITS = DATA / "person_waits.yaml"  # patents waits for a person at 0.6s


def _waiting_run(tmp_path: Path) -> tuple[Path, str]:
    """A store whose run stopped while patents:1 waited for a person, and its id."""
    store = tmp_path / "runs.sqlite"
    run_id, _ = session(RunStore(store), WAITS, None, [{"stop": True}])
    return store, run_id


def _cli(
    args: list[str], typed: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_resume_ask_asks_the_same_escalation_again_and_the_decision_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fanout resume RUN --ask`: patents:1 is shown with the options it waited with,
    the retry typed at stdin runs patents again, and the report lists the decision."""
    store, run_id = _waiting_run(tmp_path)
    [waited] = [e["escalation"] for e in RunStore(store).events(run_id)
                if e["kind"] == "decision.needed"]
    code, out, err = _cli(["resume", run_id, "--ask", "--json", "--speed", "1000",
                           "--store", str(store)], "o1\n", monkeypatch, capsys)
    assert code == 0, err
    assert "patents:1 waited for a person when the run stopped: asked again" in err
    assert "escalation patents:1: patents" in err
    for option in waited["options"]:
        assert f"{option['id']}: {option['do']}" in err
    report = json.loads(out)
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "patents": "complete", "overview": "complete"}
    [decision] = report["decisions"]
    assert (decision["escalation"], decision["option"], decision["do"], decision["by"]) == (
        "patents:1", "o1", "retry", os_user())
    row = RunStore(store).get(run_id)
    assert (row.status, row.waiting) == ("finished", 0)


def test_resume_without_ask_says_the_wait_is_left_undecided_and_how_to_be_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --ask nobody is asked (a resume finishes): before it goes on it warns that
    patents:1 is reported undecided, naming `fanout resume RUN --ask`; the report lists
    the escalation and no decision, as a run without a person does."""
    store, run_id = _waiting_run(tmp_path)
    code, out, err = _cli(["resume", run_id, "--json", "--speed", "1000", "--store",
                           str(store)], "", monkeypatch, capsys)
    assert "warning: patents:1 waited for a person" in " ".join(err.split())
    assert f"fanout resume {run_id} --ask" in err.replace("\n", "")
    report = json.loads(out)
    assert report["decisions"] == []
    assert [e["subtask_id"] for e in report["escalations"]] == ["patents"]
    assert code == 0 and report["outcome"] == "partial"


def test_runs_says_an_interrupted_run_waits_for_a_person(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fanout runs` shows `interrupted · waiting (1)` (`· waits` at 80 columns, the id
    kept whole), `--json` a `waiting` count beside the fields it had."""
    store, run_id = _waiting_run(tmp_path)
    code, out, _ = _cli(["runs", "--json", "--store", str(store)], "", monkeypatch, capsys)
    [row] = json.loads(out)
    assert code == 0
    assert {"id", "job", "file", "started", "finished", "status", "outcome", "coverage",
            "elapsed_s", "sessions"} < set(row)
    assert (row["status"], row["waiting"]) == ("interrupted", 1)
    assert RunStore(store).waiting(run_id) == ["patents:1"]
    for width, shown in ((140, "interrupted · waiting (1)"), (80, "interrupted · waits")):
        console = Console(record=True, width=width, file=io.StringIO())
        console.print(runs_table(RunStore(store).runs(), width=width))
        [line] = [line for line in console.export_text().splitlines() if run_id in line]
        assert shown in line and len(line) <= width


def test_ctrl_c_names_resume_ask_when_a_person_is_waited_for(tmp_path: Path) -> None:
    """The Ctrl-C hint of a run whose escalation waits names `--ask`, which asks again."""
    store, run_id = _waiting_run(tmp_path)
    console = Console(record=True, width=200, file=io.StringIO())
    _resume_hint(console, [run_id], RunStore(store))
    said = console.export_text()
    assert f"`fanout resume {run_id} --ask` asks again" in said and "patents:1" in said


@pytest.mark.process
def test_a_killed_run_ask_is_asked_again_by_resume_ask(tmp_path: Path) -> None:
    """`fanout run --ask` waits at the prompt (`fanout runs`: running, waiting 1); killed
    there (interrupted, waiting 1), `fanout resume --ask` asks the same escalation and
    the retry typed then runs patents again to complete."""
    store = tmp_path / "runs.sqlite"
    env = {**os.environ, "COLUMNS": "120"}
    fanout = [sys.executable, "-m", "coordinator.cli"]
    proc = subprocess.Popen(
        [*fanout, "run", str(WAITS), "--ask", "--json", "--speed", "20", "--store", str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    runs = RunStore(store)

    def listed() -> list[dict[str, Any]]:
        done = subprocess.run([*fanout, "runs", "--json", "--store", str(store)],
                              capture_output=True, text=True, env=env, timeout=60,
                              check=True)
        rows: list[dict[str, Any]] = json.loads(done.stdout)
        return rows

    try:
        assert wait_for(lambda: store.exists() and any(
            e["kind"] == "decision.needed" for r in runs.runs() for e in runs.events(r.id)),
            timeout=60), "patents never waited"
        [row] = listed()
        assert (row["status"], row["waiting"]) == ("running", 1)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        assert proc.stdin is not None
        proc.stdin.close()
    [row] = listed()
    assert (row["status"], row["waiting"]) == ("interrupted", 1)

    resumed = subprocess.run([*fanout, "resume", row["id"], "--ask", "--json", "--store",
                              str(store)], input="o1\n", capture_output=True, text=True,
                             env=env, timeout=120, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert "escalation patents:1: patents" in resumed.stderr
    report = json.loads(resumed.stdout)
    [decision] = report["decisions"]
    assert (decision["escalation"], decision["do"]) == ("patents:1", "retry")
    assert {s["id"]: s["status"] for s in report["subtasks"]}["patents"] == "complete"
    [row] = listed()
    assert (row["status"], row["sessions"], row["waiting"]) == ("finished", 2, 0)


def test_report_of_an_interrupted_run_lists_the_decisions_made_so_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fanout report` of a run killed while licences waits, after patents was answered:
    the decision is listed as recorded (who, when, what it changed), the person's
    finding is counted in patents, and licences, still waiting, is an undecided gap."""
    store = tmp_path / "runs.sqlite"
    answer = {"do": "answer", "text": "Toyota leads with 412 families",
              "source": "https://example.org/ip"}
    run_id, _ = session(RunStore(store), DATA / "person_decides.yaml", None, [
        {"subtask": "patents", "decide": answer}, {"subtask": "licences", "stop": True}])
    assert RunStore(store).get(run_id).status == "interrupted"
    code, out, err = _cli(["report", run_id, "--format", "json", "--store", str(store)], "",
                          monkeypatch, capsys)
    assert code == 0, err
    report = json.loads(out)
    [decision] = report["decisions"]
    changed = next(e for e in RunStore(store).events(run_id) if e["kind"] == "decision.changed")
    assert decision == changed["decision"]
    assert (decision["escalation"], decision["do"], decision["by"]) == (
        "patents:1", "answer", "test")
    rows = {s["id"]: s["status"] for s in report["subtasks"]}
    assert rows["patents"] == "complete"
    patents = next(s for s in report["answer"]["sections"] if s["subtask_id"] == "patents")
    assert any(f["tool"] == "person" for f in patents["findings"])
    assert [(g["subtask_id"], g.get("decided")) for g in report["gaps"]] == [("licences", None)]

    code, out, err = _cli(["report", run_id, "--store", str(store)], "", monkeypatch, capsys)
    assert code == 0, err
    assert "patents:1: answered it (answer) by test" in out
