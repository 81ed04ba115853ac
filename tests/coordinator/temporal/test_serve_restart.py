"""``fanout serve --executor temporal`` restarted while a run waits takes the run back
(docs/design.md §9, §17): the escalation waits on the new server as it did, a decision
made there is carried out, and the report the workers store ends the run.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.store.runs import wait_for
from coordinator.temporal.dev import DevServer
from tests.coordinator.serve.conftest import Launched, launch, read_stream
from tests.coordinator.temporal.conftest import Workers
from tests.coordinator.temporal.test_serve_person import ASK_RETRY, DECIDER, job, submit, until

pytestmark = pytest.mark.process

QUEUE = "serverestart"


@pytest.fixture
def servers() -> Iterator[list[Launched]]:
    """The servers a test launches, each killed at the end if still running."""
    launched: list[Launched] = []
    yield launched
    for one in launched:
        if one.proc.poll() is None:
            one.proc.kill()
        one.proc.wait(timeout=30)


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGTERM, id="stopped"),
                                 pytest.param(signal.SIGKILL, id="killed")])
def test_a_restarted_server_takes_back_a_waiting_temporal_run(
    dev_server: DevServer, workers: Workers, servers: list[Launched], tmp_path: Path,
    sig: signal.Signals,
) -> None:
    """patents' escalation waits in the workflow; the server is stopped (or killed) and
    another starts on the same store: the run is running again, pending lists the same
    escalation, a retry decided there is carried out and the stored report says so."""
    workers.start(QUEUE, concurrency=8)
    args = ("--executor", "temporal", "--address", dev_server.address, "--task-queue", QUEUE,
            "--token-name", DECIDER, "--ping-interval", "0.2")
    servers.append(launch(tmp_path, *args, name="first"))
    first = servers[-1].ready()
    # At speed 1 the escalation's 600 s wait outlasts any restart: only a person decides.
    run_id = submit(first, job(ASK_RETRY, escalations={"wait_s": 600}), speed=1)
    c = first.client()
    before = until(c, run_id, "escalations")
    [esc] = before
    assert (esc["id"], esc["trigger"]) == ("patents:1", "permission_denied")
    messages, _ = read_stream(c, f"/runs/{run_id}/events", timeout=60, until=lambda seen: any(
        m["event"] == "decision.needed" for m in seen))
    assert messages[-1]["data"]["escalation"]["id"] == esc["id"]
    assert first.stop(sig) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)

    servers.append(launch(tmp_path, *args, store=first.store, name="second"))
    second = servers[-1].ready()
    c = second.client()
    second.wait_status(run_id, "running")
    assert until(c, run_id, "escalations") == before  # the same id, options and since_s
    seen: list[dict[str, Any]] = []
    reader = threading.Thread(
        target=read_stream, args=(second.client(), f"/runs/{run_id}/events"),
        kwargs={"into": seen, "timeout": 120}, daemon=True)
    reader.start()
    r = c.post(f"/runs/{run_id}/decisions", json={"escalation": esc["id"], "do": "retry"})
    assert r.status_code == 200, r.text
    assert (r.json()["do"], r.json()["by"]) == ("retry", DECIDER)
    reader.join(timeout=120)
    assert not reader.is_alive()
    # The new server streams the run to its end: the decision, then the run finished.
    assert [m["data"]["decision"]["escalation"] for m in seen
            if m["event"] == "decision.made"] == [esc["id"]]
    assert (seen[-1]["event"], seen[-1]["data"]["status"]) == ("end", "finished")

    report = c.get(f"/runs/{run_id}/report").json()
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "patents": "complete", "licence_prices": "complete"}
    [decision] = report["decisions"]
    assert (decision["escalation"], decision["do"], decision["by"]) == (
        esc["id"], "retry", DECIDER)
    # Job time went on across the restart: decided after it began to wait.
    assert decision["at_s"] >= esc["since_s"]
    assert decision["change"]["status_after"] == "complete"
    assert wait_for(lambda: c.get(f"/runs/{run_id}").json()["waiting"] == 0, timeout=30)
    assert second.stop() == 0, second.log.read_text()
