"""A `fanout serve` SIGKILLed during 50 concurrent runs restarts and finishes all 50."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from coordinator.store.runs import RunStore, wait_for
from tests.reliability.counts import count
from tests.reliability.served import DATA, Served, serve, stop, submit

# A real fanout serve, as a subprocess.
pytestmark = pytest.mark.process


def _report(served: Served, run_id: str) -> dict[str, Any]:
    """A run's report as the service serves it (JSON)."""
    count("requests")
    with served.client() as c:
        r = c.get(f"/runs/{run_id}/report", params={"format": "json"})
    assert r.status_code == 200, r.text
    report: dict[str, Any] = r.json()
    return report


VOLATILE = {"trace_id", "trace_ids", "started_s", "ended_s", "elapsed_s"}
SPEED = 5  # a run takes 8.5 virtual seconds: 1.7 s here, so the kill lands mid-flight


def _normalized(value: Any) -> Any:
    """A report without trace ids and times (they differ between runs of one job)."""
    if isinstance(value, dict):
        return {k: _normalized(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def test_a_server_killed_during_50_runs_restarts_and_finishes_them(tmp_path: Path) -> None:
    """SIGKILL while 50 runs are running or queued; the restarted server resumes every one,
    and each ends with the report an uninterrupted run gives."""
    job = (DATA / "serve_job.yaml").read_bytes()
    first = serve(tmp_path, "--max-runs", "8", name="first")
    try:
        reference = submit(first, job, speed=SPEED)
        assert reference.status_code == 201
        ref_id = reference.json()["run_id"]
        assert wait_for(lambda: RunStore(first.store).get(ref_id).status == "finished", 60)
        clean = _normalized(_report(first, ref_id))
        with ThreadPoolExecutor(max_workers=10) as pool:
            created = list(pool.map(lambda _: submit(first, job, speed=SPEED), range(50)))
        assert all(r.status_code == 201 for r in created), [r.text for r in created][:2]
        ids = [r.json()["run_id"] for r in created]
        # Kill once the runs are under way (some subagent of them has recorded a result),
        # whatever the machine's load: waiting for that event, not a second.
        store = RunStore(first.store)
        assert wait_for(lambda: any(store.results(i) for i in ids), 60), "nothing got going"
        statuses = {store.get(i).status for i in ids}
        assert "running" in statuses, statuses
    finally:
        stop(first, signal.SIGKILL)
    count("kills:serve")
    interrupted = [i for i in ids if RunStore(first.store).get(i).status != "finished"]
    assert interrupted, "the kill landed before the runs finished"
    second = serve(tmp_path, "--max-runs", "8", store=first.store, name="second")
    try:
        def all_finished() -> bool:
            return all(RunStore(second.store).get(i).status == "finished" for i in ids)

        assert wait_for(all_finished, 120, interval=0.2), {
            i: RunStore(second.store).get(i).status for i in ids
        }
        for run_id in ids:
            assert _normalized(_report(second, run_id)) == clean, run_id
        assert max(RunStore(second.store).get(i).sessions for i in interrupted) >= 2
        second.answering()
    finally:
        stop(second)
