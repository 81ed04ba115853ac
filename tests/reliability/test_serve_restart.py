"""A `fanout serve` SIGKILLed during 50 concurrent runs restarts and finishes all 50."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from coordinator.store.runs import RunStore
from tests.reliability.counts import count
from tests.reliability.served import DATA, Served, serve, stop, submit


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
        end = time.monotonic() + 60
        while RunStore(first.store).get(ref_id).status != "finished":
            assert time.monotonic() < end
            time.sleep(0.1)
        clean = _normalized(_report(first, ref_id))
        with ThreadPoolExecutor(max_workers=10) as pool:
            created = list(pool.map(lambda _: submit(first, job, speed=SPEED), range(50)))
        assert all(r.status_code == 201 for r in created), [r.text for r in created][:2]
        ids = [r.json()["run_id"] for r in created]
        time.sleep(1.0)
        statuses = {RunStore(first.store).get(i).status for i in ids}
        assert "running" in statuses, statuses
    finally:
        stop(first, signal.SIGKILL)
    count("kills:serve")
    interrupted = [i for i in ids if RunStore(first.store).get(i).status != "finished"]
    assert interrupted, "the kill landed before the runs finished"
    second = serve(tmp_path, "--max-runs", "8", store=first.store, name="second")
    try:
        end = time.monotonic() + 120
        while True:
            rows = {i: RunStore(second.store).get(i) for i in ids}
            if all(row.status == "finished" for row in rows.values()):
                break
            assert time.monotonic() < end, {i: r.status for i, r in rows.items()}
            time.sleep(0.2)
        for run_id in ids:
            assert _normalized(_report(second, run_id)) == clean, run_id
        assert max(RunStore(second.store).get(i).sessions for i in interrupted) >= 2
        second.answering()
    finally:
        stop(second)
