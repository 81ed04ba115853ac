"""Servers that share nothing but a Postgres store: runs read, streamed, cancelled and
resumed across them (docs/design.md §12)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.store.runs import RunStore, wait_for
from tests.coordinator.serve.conftest import SLOW, Server, read_stream, start_server
from tests.coordinator.serve.test_lifecycle import RESUMABLE
from tests.coordinator.store.test_store import normalized

# Real fanout serve processes over one store.
pytestmark = pytest.mark.process


def servers(tmp_path: Path, url: str, *names: str) -> list[Server]:
    """A server per name, each in a folder of its own (cwd, log), all on one database."""
    out = []
    for name in names:
        home = tmp_path / name
        home.mkdir()
        out.append(start_server(home, "--max-runs", "2", store=url, name=name, cwd=home))
    return out


def stop_all(*running: Server) -> None:
    """Stop every server still running; each exits 0 without a traceback."""
    for srv in running:
        if srv.proc.poll() is None:
            assert srv.stop() == 0, srv.log.read_text()
        assert "Traceback" not in srv.log.read_text(), srv.log.read_text()


def test_a_run_submitted_to_one_server_is_read_streamed_and_cancelled_on_another(
    tmp_path: Path, postgres_cluster: Any
) -> None:
    """Submit on A; B lists it, streams it live to `end`, and cancels A's next run."""
    url = postgres_cluster.new_database()
    a, b = servers(tmp_path, url, "a", "b")
    try:
        run_id = a.submit(SLOW, speed=10)["run_id"]
        live: list[dict[str, Any]] = []
        seen_running: list[bool] = []

        def follow() -> None:
            with b.client() as c:
                read_stream(c, f"/runs/{run_id}/events", into=live, timeout=60)

        reader = threading.Thread(target=follow)
        reader.start()
        with b.client() as c:
            assert run_id in [r["id"] for r in c.get("/runs").json()["runs"]]
            assert wait_for(lambda: len(live) > 0, 20), "B streamed nothing"
            # Events reached B's stream while A still ran the run: live, not after.
            seen_running.append(c.get(f"/runs/{run_id}").json()["status"] == "running")
        reader.join(timeout=60)
        assert seen_running == [True]
        assert live[-1]["event"] == "end" and live[-1]["data"]["status"] == "finished"
        reading = RunStore(url)
        stored = reading.events(run_id)
        reading.close()
        assert [m["data"] for m in live[:-1]] == stored

        cancelled = a.submit(SLOW, speed=2)["run_id"]
        with b.client() as c:
            assert wait_for(
                lambda: c.get(f"/runs/{cancelled}").json()["progress"]["running"] == 2, 20)
            r = c.post(f"/runs/{cancelled}/cancel")
            assert r.status_code == 202 and r.json()["status"] == "running", r.text
        done = b.wait_status(cancelled, "finished", timeout=30)
        assert done["cancel_requested"] is True
        with b.client() as c:
            report = c.get(f"/runs/{cancelled}/report").json()
        assert {g["trigger"] for g in report["gaps"]} == {"cancelled"}
    finally:
        stop_all(a, b)


def test_a_killed_servers_run_is_resumed_once_by_one_of_the_live_ones(
    tmp_path: Path, postgres_cluster: Any
) -> None:
    """SIGKILL A mid-run: exactly one of B and C claims the run and finishes it to
    replay's report; no finished subtask runs again, no event is written twice."""
    url = postgres_cluster.new_database()
    a, b, c = servers(tmp_path, url, "a", "b", "c")
    store = RunStore(url)
    try:
        killed = a.submit(RESUMABLE, speed=6)["run_id"]
        assert wait_for(lambda: len(store.results(killed)) >= 3, 60), "the run never got going"
        a.stop(signal.SIGKILL)
        finished_before = set(store.results(killed))
        assert len(finished_before) < 8
        done = b.wait_status(killed, "finished", timeout=60)
        with c.client() as client:
            report = client.get(f"/runs/{killed}/report").json()
    finally:
        stop_all(b, c)
    assert done["sessions"] == 2  # one claim won; no third session
    events = store.events(killed)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert {e["session"] for e in events} == {1, 2}
    rerun = {e["subtask_id"] for e in events if e["session"] == 2 and e["kind"] == "start"}
    assert rerun & finished_before == set(), f"finished subtasks executed again: {rerun}"
    assert normalized(report) == normalized(replay(load_scenario(RESUMABLE)).report)
    resumers = [s for s in (b, c) if f"resuming run {killed}" in s.log.read_text()]
    assert len(resumers) == 1
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_api_and_the_store_say_the_same_status(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """A run waiting for a slot is `queued` in the API and in the store alike."""
    url: Path | str = tmp_path / "runs.sqlite"
    if backend == "postgres":
        url = request.getfixturevalue("postgres_cluster").new_database()
    srv = start_server(tmp_path, "--max-runs", "1", store=url)
    try:
        busy = srv.submit(SLOW, speed=5)["run_id"]
        waiting = srv.submit(SLOW, speed=5)
        assert waiting["status"] == "queued"
        store = RunStore(url)
        assert store.get(waiting["run_id"]).status == "queued"
        assert store.get(busy).status == "running"
        with srv.client() as c:
            assert c.get(f"/runs/{waiting['run_id']}").json()["status"] == "queued"
            c.post(f"/runs/{waiting['run_id']}/cancel")
            c.post(f"/runs/{busy}/cancel")
        store.close()
    finally:
        stop_all(srv)
