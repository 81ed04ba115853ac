"""Workers and a server that share nothing but a Postgres store (docs/design.md §12)."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.store.runs import RunStore, wait_for
from coordinator.temporal.dev import DevServer
from tests.coordinator.serve.conftest import read_stream, start_server
from tests.coordinator.temporal.conftest import Workers, fanout, normalized
from tests.coordinator.temporal.test_workers import RESUMABLE, KillMoment


def test_two_workers_record_to_postgres_and_one_is_killed_mid_run(
    dev_server: DevServer, workers: Workers, tmp_path: Path, postgres_cluster: Any
) -> None:
    """Two workers, each in a folder of its own with its own --store URL: one is SIGKILLed
    mid-run, the other finishes it to the uninterrupted report, nothing runs twice; a
    server in a third folder streams the run live from the store to its end."""
    url = postgres_cluster.new_database()
    homes = {name: tmp_path / name for name in ("w1", "w2", "server")}
    for home in homes.values():
        home.mkdir()
    first = workers.start("pg", concurrency=2, store=url, cwd=homes["w1"])
    workers.start("pg", concurrency=2, store=url, cwd=homes["w2"])
    submitted = fanout(
        "run", RESUMABLE, "--executor", "temporal", "--address", dev_server.address,
        "--task-queue", "pg", "--speed", "2", "--heartbeat-timeout", "2", "--detach",
        "--json", "--store", url,
    )
    assert submitted.returncode == 0, submitted.stderr
    run_id = json.loads(submitted.stdout)["run_id"]
    server = start_server(homes["server"], store=url, name="server", cwd=homes["server"])
    streamed: list[dict[str, Any]] = []

    def follow() -> None:
        with server.client() as c:
            read_stream(c, f"/runs/{run_id}/events", into=streamed, timeout=120)

    reader = threading.Thread(target=follow)
    reader.start()
    runs = RunStore(url)
    try:
        moment = KillMoment(runs, run_id, dev_server.address)
        assert wait_for(moment, timeout=60), "the run never got going"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(15)
        finished_before = set(runs.results(run_id))
        seen = max(e["seq"] for e in runs.events(run_id))
        assert wait_for(lambda: runs.get(run_id).status == "finished", timeout=90)
        reader.join(timeout=30)
    finally:
        assert server.stop() == 0
    row = runs.get(run_id)
    assert row.report is not None
    assert normalized(row.report) == normalized(replay(load_scenario(RESUMABLE)).report)
    events = runs.events(run_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    after = [e for e in events if e["seq"] > seen]
    assert {e["subtask_id"] for e in after} & finished_before == set()
    attempts = {s["id"]: s["attempts"] for s in row.report["subtasks"]}
    for sid in finished_before:
        started = [e for e in events if e["subtask_id"] == sid and e["kind"] == "start"]
        assert len(started) == attempts[sid], f"{sid} ran an attempt twice"
    assert streamed[-1]["event"] == "end" and streamed[-1]["data"]["status"] == "finished"
    assert [m["data"] for m in streamed[:-1]] == events
    for home in homes.values():  # nothing shared on disk: no store file anywhere
        assert not list(home.rglob("*.sqlite")), list(home.rglob("*"))
    runs.close()
