"""One engine (docs/design.md §15): the same scripted job gives the same report through every door
(``fanout run``, ``fanout ask``, ``POST /runs``, ``POST /ask``, ``coordinator.ask``,
``coordinator.run_file``) on either engine (in this process, on Temporal workers) and
either store (SQLite, Postgres), times and ids aside.

The job is one question a scripted lead splits in two, each half answered by its own
scripted turn: no key, no network, a second or so per run. Every door runs in a process
of its own (the CLI, ``fanout serve``, a Python helper), so no Temporal client lives in
pytest's process; one worker serves the module's task queue, one server per engine and
store serves both of the service's doors.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.jobfile.ask import ask_slug
from coordinator.store.runs import RunStore
from coordinator.temporal.dev import DevServer
from tests.coordinator.serve.conftest import Server, start_server
from tests.coordinator.temporal.conftest import ROOT, Workers, fanout, normalized
from tests.coordinator.temporal.test_parity import outcome

QUEUE = "matrix"
QUESTION = "How do the two halves compare?"
MODEL = {
    "provider": "scripted", "latency_s": 0.01,
    "turns": {
        "lead": [
            {"subtasks": [{"id": "left", "query": "the left half", "tools": []},
                          {"id": "right", "query": "the right half", "tools": []}]},
            {"text": "Both halves were measured, one after the other."},
        ],
        "left": [{"text": "The left half measures 3."}],
        "right": [{"text": "The right half measures 4."}],
    },
}
# The job file is the job `fanout ask` composes from the question and the tools file
# (whose simulated tool is never called: an ask needs a tool to be given one).
JOB = {"scenario": ask_slug(QUESTION), "seed": 0,
       "job": {"query": QUESTION, "max_subtasks": 6, "concurrency": 4}, "model": MODEL}
TOOLS = {"tools": {"lookup": {"description": "never called", "responses": [{"ok": "x"}]}},
         "model": MODEL}
DOORS = ["cli-run", "cli-ask", "post-runs", "post-ask", "py-ask", "py-run-file"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The job file and the tools file the doors are given."""
    tmp = tmp_path_factory.mktemp("matrix")
    (tmp / "job.yaml").write_text(yaml.safe_dump(JOB, sort_keys=False))
    (tmp / "tools.yaml").write_text(yaml.safe_dump(TOOLS, sort_keys=False))
    return {"job": tmp / "job.yaml", "tools": tmp / "tools.yaml", "tmp": tmp}


@pytest.fixture(scope="module")
def stores(files: dict[str, Path], postgres_cluster: Any) -> dict[str, str]:
    """One SQLite file and one Postgres database, shared by every door and engine."""
    sqlite = str(files["tmp"] / "runs.sqlite")
    return {"sqlite": sqlite, "postgres": postgres_cluster.new_database()}


@pytest.fixture(scope="module")
def temporal(dev_server: DevServer, workers: Workers) -> str:
    """The dev server's address, with one worker polling the module's task queue."""
    workers.start(QUEUE, concurrency=8)
    return dev_server.address


@pytest.fixture(scope="module")
def servers(
    files: dict[str, Path], stores: dict[str, str], temporal: str
) -> Iterator[dict[tuple[str, str], Server]]:
    """``fanout serve`` per engine and store, started when a test first needs it."""
    started: dict[tuple[str, str], Server] = {}

    class Lazy(dict[tuple[str, str], Server]):
        def __missing__(self, key: tuple[str, str]) -> Server:
            engine, store = key
            args = ["--executor", "temporal", "--address", temporal, "--task-queue", QUEUE]
            srv = start_server(files["tmp"], *(args if engine == "temporal" else []),
                               store=stores[store], name=f"serve-{engine}-{store}")
            started[key] = self[key] = srv
            return srv

    yield Lazy()
    for srv in started.values():
        assert srv.stop() == 0, srv.log.read_text()


@pytest.fixture(scope="module")
def reference(files: dict[str, Path], stores: dict[str, str]) -> dict[str, Any]:
    """The report of ``fanout run`` in this process's engine, on SQLite: the one to match."""
    done = fanout("run", files["job"], "--json", "--store", stores["sqlite"])
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = normalized(json.loads(done.stdout))
    return report


def _served(srv: Server, door: str, files: dict[str, Path]) -> dict[str, Any]:
    with srv.client() as c:
        if door == "post-runs":
            r = c.post("/runs", content=files["job"].read_bytes(),
                       headers={"Content-Type": "application/yaml"})
        else:
            r = c.post("/ask", json={"question": QUESTION, "tools": files["tools"].read_text()})
        assert r.status_code == 201, r.text
        run_id = r.json()["run_id"]
        end = time.monotonic() + 60
        while (status := c.get(f"/runs/{run_id}").json()["status"]) != "finished":
            assert status in ("queued", "running") and time.monotonic() < end, status
            time.sleep(0.1)
        report: dict[str, Any] = c.get(f"/runs/{run_id}/report").json()
        return report


def _python(door: str, store: str, engine: str, address: str, files: dict[str, Path]) -> Any:
    arg = QUESTION if door == "py-ask" else str(files["job"])
    on = ["--executor", "temporal", "--address", address, "--task-queue", QUEUE]
    done = subprocess.run(
        [sys.executable, "-m", "tests.coordinator.temporal.pydoor",
         "ask" if door == "py-ask" else "run_file", arg, "--store", store,
         "--model-file", str(files["tools"]), *(on if engine == "temporal" else [])],
        capture_output=True, text=True, timeout=90, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
@pytest.mark.parametrize("engine", ["local", "temporal"])
@pytest.mark.parametrize("door", DOORS)
def test_every_door_on_every_engine_and_store_gives_the_same_report(
    door: str,
    engine: str,
    store: str,
    files: dict[str, Path],
    stores: dict[str, str],
    temporal: str,
    servers: dict[tuple[str, str], Server],
    reference: dict[str, Any],
) -> None:
    """The scripted job's report, through this door on this engine and store, is the
    reference report (``fanout run`` locally on SQLite), times and ids aside."""
    on = ["--executor", "temporal", "--address", temporal, "--task-queue", QUEUE]
    executor = on if engine == "temporal" else []
    before = _workflows(stores[store])
    if door == "cli-run":
        done = fanout("run", files["job"], "--json", "--store", stores[store], *executor)
    elif door == "cli-ask":
        done = fanout("ask", QUESTION, "--tools", files["tools"], "--json",
                      "--store", stores[store], *executor)
    if door in ("cli-run", "cli-ask"):
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
    elif door in ("post-runs", "post-ask"):
        report = _served(servers[(engine, store)], door, files)
    else:
        report = _python(door, stores[store], engine, temporal, files)
    assert normalized(report) == reference
    # On Temporal the run is a workflow's (the store says which); locally it is not.
    assert _workflows(stores[store]) == before + (engine == "temporal")


def _workflows(store: str) -> int:
    """How many runs of ``store`` were started as Temporal workflows."""
    runs = RunStore(store)
    try:
        with runs.backend.connection() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM temporal_runs").fetchone()[0])
    finally:
        runs.close()


# The waiting cell (docs/design.md §17): a run whose escalation waits for a person, who
# decides it through the Python door; on either engine the run waits (on Temporal in the
# workflow), the decision is carried out, and the report and its decision are the same.
WAITING = ROOT / "tests" / "coordinator" / "data" / "ask_retry.yaml"


@pytest.fixture(scope="module")
def waiting_reference(files: dict[str, Path]) -> dict[str, Any]:
    """The waiting job's report in this process's engine, on SQLite: the one to match
    (the decision's coverage before and after aside: licence_prices may or may not be
    done when the decision lands, in real time)."""
    report: dict[str, Any] = outcome(
        _python_decides("local", str(files["tmp"] / "waiting.sqlite"), ""))
    return report


def _python_decides(engine: str, store: str, address: str) -> Any:
    on = ["--executor", "temporal", "--address", address, "--task-queue", QUEUE]
    done = subprocess.run(
        [sys.executable, "-m", "tests.coordinator.temporal.pydoor", "run_file", str(WAITING),
         "--store", store, "--decide", "patents=retry", "--speed", "10",
         *(on if engine == "temporal" else [])],
        capture_output=True, text=True, timeout=90, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
@pytest.mark.parametrize("engine", ["local", "temporal"])
def test_a_run_waiting_for_a_person_on_every_engine_and_store(
    engine: str, store: str, stores: dict[str, str], temporal: str,
    waiting_reference: dict[str, Any],
) -> None:
    """patents waits for a person, who decides retry: it completes, the decision is in
    the report with what it changed, and the report is the reference, on this engine
    and store."""
    report = _python_decides(engine, stores[store], temporal)
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "patents": "complete", "licence_prices": "complete"}
    [decision] = report["decisions"]
    assert (decision["escalation"], decision["do"]) == ("patents:1", "retry")
    assert decision["change"]["status_after"] == "complete"
    assert outcome(report) == waiting_reference
