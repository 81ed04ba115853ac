"""The run store: crash-resume of a real killed process, refusals, damaged store files."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.store.runs import SCHEMA_VERSIONS, RunStore, connect, wait_for

# The CLI, as a subprocess.
pytestmark = pytest.mark.process

DATA = Path(__file__).resolve().parents[1] / "data"
RESUMABLE = DATA / "resumable.yaml"
VOLATILE = {"trace_id", "trace_ids", "started_s", "ended_s", "elapsed_s"}


def fanout(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "coordinator.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def normalized(value: Any) -> Any:
    """The report without what legitimately differs between two runs: ids and times."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def committed(store: Path | str) -> int:
    """How many subagent results the store holds (read while another process writes)."""
    store = Path(store)
    if not store.exists():
        return 0
    try:
        conn = sqlite3.connect(store, timeout=5)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def test_killed_run_resumes_to_the_uninterrupted_report(tmp_path: Path) -> None:
    """SIGKILL mid-job, then resume: same report as a clean run, no finished subtask rerun."""
    store = tmp_path / "runs.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator.cli", "run", str(RESUMABLE), "--speed", "4",
         "--store", str(store), "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: committed(store) >= 3, timeout=60), "the run never got going"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    runs = RunStore(store)
    run = runs.get("latest")
    assert run.status == "interrupted"
    finished_before = set(runs.results(run.id))
    assert 3 <= len(finished_before) < 8
    checkpoints_before = runs.checkpoints(run.id)

    interrupted = fanout("report", run.id, "--format", "json", "--store", store)
    assert interrupted.returncode == 0, interrupted.stderr
    gaps = {g["subtask_id"]: g for g in json.loads(interrupted.stdout)["gaps"]}
    for sid in {"market", "costs", "cathodes", "grid", "vehicles", "policy"} - finished_before:
        assert gaps[sid]["trigger"] == "interrupted"

    for fmt, marker in (("md", "interrupted"), ("html", "fanout resume"), ("table", "interrupted")):
        shown = fanout("report", run.id, "--format", fmt, "--store", store)
        assert shown.returncode == 0, (fmt, shown.stderr)
        assert marker in shown.stdout, fmt

    resumed = fanout("resume", run.id, "--store", store, "--json")
    assert resumed.returncode == 0, resumed.stderr
    clean = replay(load_scenario(RESUMABLE)).report
    assert normalized(json.loads(resumed.stdout)) == normalized(clean)

    events = runs.events(run.id)
    second = [e for e in events if e["session"] == 2]
    rerun = {e["subtask_id"] for e in second if e["kind"] == "start"} & finished_before
    assert rerun == set(), f"finished subtasks executed again: {rerun}"
    # In-flight subtasks continue after their last recorded result, not from the start.
    for sid, saved in checkpoints_before.items():
        if sid in finished_before:
            continue
        done_steps = saved["run"]["steps"]
        calls = [e for e in second if e["subtask_id"] == sid and e["kind"] == "call"]
        assert all(e["step"] >= saved["run"]["planner"]["position"] for e in calls), sid
        assert done_steps >= 1
    assert runs.get(run.id).status == "finished"
    assert runs.get(run.id).sessions == 2
    # Its recording could not replay to this report (the cut attempts were made twice):
    # `fanout record` refuses, saying why, instead of writing one that fails its expect.
    recorded = fanout("record", run.id, "-o", tmp_path / "rec.yaml", "--store", store)
    assert recorded.returncode == 2 and "resumed" in recorded.stderr, recorded.stderr
    assert not (tmp_path / "rec.yaml").exists()
    html = fanout("report", run.id, "--format", "html", "-o", tmp_path / "r.html", "--store", store)
    assert html.returncode == 0
    page = (tmp_path / "r.html").read_text()
    assert "<svg" in page and "patents" in page and 'class="banner interrupted"' not in page
    md = fanout("report", run.id, "--format", "md", "--store", store).stdout
    assert "permission_denied" in md and "| patents |" in md


def test_resuming_a_finished_run_is_refused(tmp_path: Path) -> None:
    """A run resumed twice (or never interrupted) is refused with exit code 3."""
    store = tmp_path / "runs.sqlite"
    done = fanout("run", RESUMABLE, "--speed", "200", "--store", store, "--json")
    assert done.returncode == 0, done.stderr
    run_id = RunStore(store).get("latest").id
    again = fanout("resume", run_id, "--store", store)
    assert again.returncode == 3
    assert "already finished" in again.stderr
    assert "Traceback" not in again.stderr


def test_resuming_a_run_that_is_running_is_refused(tmp_path: Path) -> None:
    """While a live process owns the run, another process cannot resume it."""
    store = tmp_path / "runs.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator.cli", "run", str(RESUMABLE), "--speed", "0.5",
         "--store", str(store), "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: store.exists() and len(RunStore(store).runs()) == 1, 60)
        run = RunStore(store).get("latest")
        assert run.status == "running"
        refused = fanout("resume", run.id, "--store", store)
        assert refused.returncode == 3
        assert f"process {proc.pid}" in refused.stderr
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert RunStore(store).get("latest").status == "interrupted"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"this is not sqlite at all" * 100, "not a fanout run store", id="garbage"),
        pytest.param(None, "something else", id="foreign-sqlite"),
    ],
)
def test_a_corrupt_or_foreign_store_is_a_clear_error(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    """Pointing --store at a file that is not ours exits 2 with a message, no traceback."""
    path = tmp_path / "store.sqlite"
    if content is None:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.commit()
        conn.close()
    else:
        path.write_bytes(content)
    for command in (("runs",), ("report", "latest"), ("run", str(RESUMABLE))):
        proc = fanout(*command, "--store", path)
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert message in proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_store_from_a_newer_fanout_is_refused(tmp_path: Path) -> None:
    """A schema version above ours is reported, not misread."""
    path = tmp_path / "store.sqlite"
    connect(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE fanout_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    proc = fanout("runs", "--store", path)
    assert proc.returncode == 2
    assert "newer fanout" in proc.stderr


def test_a_new_store_is_created_at_the_current_schema(tmp_path: Path) -> None:
    """Opening a missing path creates the store in WAL mode at the current version."""
    path = tmp_path / "nested" / "runs.sqlite"
    conn = connect(path)
    try:
        version = conn.execute(
            "SELECT value FROM fanout_meta WHERE key='schema_version'"
        ).fetchone()[0]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()
    assert int(version) == SCHEMA_VERSIONS["sqlite"]
    assert mode == "wal"


def test_reading_commands_on_a_finished_run(target: str, tmp_path: Path) -> None:
    """runs, report (table, json), gaps, trace and record read a finished run, on SQLite
    and on Postgres alike."""
    store = target
    ran = fanout("run", RESUMABLE, "--speed", "200", "--store", store, "--json")
    assert ran.returncode == 0, ran.stderr
    listed = json.loads(fanout("runs", "--json", "--store", store).stdout)
    assert listed[0]["status"] == "finished" and listed[0]["outcome"] == "partial"
    table = fanout("report", "latest", "--store", store)
    assert table.returncode == 0 and "patents" in table.stdout
    report = json.loads(fanout("report", "--format", "json", "--store", store).stdout)
    assert report["coverage"] == pytest.approx(0.875)
    gaps = fanout("gaps", "--store", store)
    assert "access denied" in gaps.stdout and "patents:read" in gaps.stdout  # plain words
    lines = fanout("trace", "--json", "--store", store).stdout.splitlines()
    entries = [json.loads(line) for line in lines]
    assert {"trace_id", "subtask_id", "attempt", "at", "envelope"} <= set(entries[0])
    attempts = sum(s["attempts"] for s in report["subtasks"])
    assert len(entries) == attempts
    recorded = fanout("record", "latest", "-o", tmp_path / "again.yaml", "--store", store)
    assert recorded.returncode == 0, recorded.stderr
    assert "resumable-recorded" in (tmp_path / "again.yaml").read_text()


def test_no_runs_and_unknown_run(tmp_path: Path) -> None:
    """An empty store lists nothing; an unknown run id is a clear error."""
    store = tmp_path / "runs.sqlite"
    assert json.loads(fanout("runs", "--json", "--store", store).stdout) == []
    connect(store).close()
    missing = fanout("report", "nope", "--store", store)
    assert missing.returncode == 2 and "no run 'nope'" in missing.stderr


@pytest.mark.parametrize(
    ("store", "says"),
    [
        pytest.param("postgresql://fanout:s3cret@127.0.0.1:1/runs", "cannot connect",
                     id="postgres-unreachable"),
        pytest.param("mysql://me:s3cret@db.example/runs", "cannot open a 'mysql' store",
                     id="unknown-scheme"),
        pytest.param("sqlite://", "needs a path", id="sqlite-url-without-path"),
        pytest.param("sqlite:://bad", "not a sqlite: URL", id="sqlite-colon-slash-slash"),
        pytest.param("sqlite::memory:", "not a sqlite: URL", id="sqlite-memory"),
        pytest.param("sqlite://db.example/runs.db", "not a host", id="sqlite-url-with-host"),
        pytest.param("://runs.db", "not a path nor a URL", id="url-without-scheme"),
    ],
)
def test_a_store_argument_fanout_cannot_open_is_exit_2(
    tmp_path: Path, store: str, says: str
) -> None:
    """Exit 2 with a message naming the store (never its password); no file or folder is
    made, by a command that only reads, one that serves, or one that runs a job."""
    job = Path(__file__).resolve().parents[1] / "data" / "design_example.yaml"
    for command in (["runs"], ["serve", "--port", "0"], ["run", str(job), "--speed", "1000"]):
        done = subprocess.run(
            [sys.executable, "-m", "coordinator.cli", *command, "--store", store],
            capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
        )
        assert done.returncode == 2, done.stderr
        assert says in done.stderr and "Traceback" not in done.stderr
        assert "s3cret" not in done.stderr + done.stdout
    assert list(tmp_path.rglob("*")) == []
