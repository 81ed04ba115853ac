"""Cancelling a run, and a server killed (SIGKILL) or stopped (SIGTERM) losing nothing."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import replay
from coordinator.store.runs import RunStore, wait_for
from tests.coordinator.serve.conftest import (
    HELD,
    ROOT,
    SLOW,
    Server,
    read_stream,
    start_server,
)
from tests.coordinator.store.test_store import committed, normalized

# A real fanout serve, as a subprocess.
pytestmark = pytest.mark.process

RESUMABLE = ROOT / "tests" / "coordinator" / "data" / "resumable.yaml"


def _attempts_begun(*subtasks: str) -> Callable[[list[dict[str, Any]]], bool]:
    """True once the stream has shown an attempt start for each of ``subtasks``."""

    def begun(messages: list[dict[str, Any]]) -> bool:
        started = {m["data"].get("subtask_id") for m in messages if m["event"] == "start"}
        return set(subtasks) <= started

    return begun


def _attempts_begun_in(
    session: int, *subtasks: str
) -> Callable[[list[dict[str, Any]]], bool]:
    """True once the stream has shown an attempt start of ``session`` for each of
    ``subtasks``."""

    def begun(messages: list[dict[str, Any]]) -> bool:
        started = {m["data"].get("subtask_id") for m in messages
                   if m["event"] == "start" and m["data"].get("session") == session}
        return set(subtasks) <= started

    return begun


def test_cancel_cuts_running_subagents_and_gaps_the_queued(server: Server) -> None:
    """Cancel: running subagents hand up with trigger cancelled, queued ones 0 attempts."""
    run_id = server.submit(SLOW, speed=HELD)["run_id"]  # at work until the cancel
    with server.client() as c:
        # Wait for the events, not a time: both running subagents have begun an attempt.
        read_stream(c, f"/runs/{run_id}/events", until=_attempts_begun("first", "second"))
        r = c.post(f"/runs/{run_id}/cancel")
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "finished" and r.json()["outcome"] == "failed"
        report = c.get(f"/runs/{run_id}/report").json()
        detail = c.get(f"/runs/{run_id}").json()
        again = c.post(f"/runs/{run_id}/cancel")
    subtasks = {s["id"]: s for s in report["subtasks"]}
    gaps = {g["subtask_id"]: g for g in report["gaps"]}
    assert set(gaps) == {"first", "second", "third", "fourth"}
    assert {g["trigger"] for g in gaps.values()} == {"cancelled"}
    assert {g["route"] for g in gaps.values()} == {"gap"}
    assert subtasks["first"]["attempts"] == 1 and subtasks["second"]["attempts"] == 1
    assert subtasks["third"]["attempts"] == 0 and subtasks["fourth"]["attempts"] == 0
    assert report["escalations"] == []
    assert detail["cancel_requested"] is True
    assert detail["progress"] == {"queued": 0, "running": 0, "done": 0, "escalated": 4}
    assert again.status_code == 409 and again.json()["status"] == "finished"


def test_cancelling_a_queued_run_ends_it_at_once(open_server: Server) -> None:
    """A run waiting for a slot, cancelled, ends now with every subtask a cancelled gap."""
    busy = open_server.submit(SLOW, speed=HELD)["run_id"]  # at work until cancelled below
    waiting = open_server.submit(SLOW, speed=10)
    assert waiting["status"] == "queued"
    with open_server.client() as c:
        r = c.post(f"/runs/{waiting['run_id']}/cancel")
        assert r.status_code == 200 and r.json()["status"] == "finished"
        report = c.get(f"/runs/{waiting['run_id']}/report").json()
        assert c.get(f"/runs/{busy}").json()["status"] == "running"  # untouched
        c.post(f"/runs/{busy}/cancel")
    assert [s["attempts"] for s in report["subtasks"]] == [0, 0, 0, 0]
    assert {g["trigger"] for g in report["gaps"]} == {"cancelled"}
    assert report["outcome"] == "failed"


def test_a_killed_then_a_stopped_server_lose_nothing(tmp_path: Path) -> None:
    """SIGKILL mid-run: the next server resumes it to replay's report, nothing run twice;
    SIGTERM: streams end without `end`, exit 0, and the server after resumes the run."""
    # The first server stops itself (SIGSTOP) at its 60th event, before the job's 8th
    # result (its 84th event): it cannot finish the run however late the kill comes.
    first = start_server(tmp_path, name="first",
                         env_extra={"FANOUT_TEST_STOP_AFTER_EVENTS": "60"})
    killed = first.submit(RESUMABLE, speed=6)["run_id"]
    assert wait_for(lambda: committed(first.store) >= 3, timeout=60), "the run never got going"
    first.stop(signal.SIGKILL)
    runs = RunStore(first.store)
    assert runs.get(killed).status == "interrupted"
    finished_before = set(runs.results(killed))
    assert 3 <= len(finished_before) < 8

    second = start_server(tmp_path, name="second", store=first.store)
    with second.client() as c:
        # A stream opened right away follows the resumed session to its end.
        messages, _ = read_stream(c, f"/runs/{killed}/events")
        report = c.get(f"/runs/{killed}/report").json()
        detail = c.get(f"/runs/{killed}").json()
    assert messages[-1]["event"] == "end" and messages[-1]["data"]["status"] == "finished"
    ids = [int(m["id"]) for m in messages[:-1]]
    assert ids == list(range(1, len(ids) + 1))
    assert detail["sessions"] == 2 and detail["status"] == "finished"
    assert normalized(report) == normalized(replay(load_scenario(RESUMABLE)).report)
    second_session = [e for e in runs.events(killed) if e["session"] == 2]
    rerun = {e["subtask_id"] for e in second_session if e["kind"] == "start"} & finished_before
    assert rerun == set(), f"finished subtasks executed again: {rerun}"

    stopped = second.submit(SLOW, speed=HELD)["run_id"]  # at work until the SIGTERM
    streamed: dict[str, Any] = {"messages": []}

    def follow() -> None:
        # A stream the stopping server closes may end mid-chunk: that is the point.
        with httpx.Client(base_url=second.url, timeout=30,
                          headers={"Authorization": f"Bearer {second.token}"}) as c:
            read_stream(c, f"/runs/{stopped}/events", into=streamed["messages"],
                        tolerate_disconnect=True)

    reader = threading.Thread(target=follow)
    reader.start()
    with second.client() as c:
        assert wait_for(lambda: c.get(f"/runs/{stopped}").json()["progress"]["running"] == 2,
                        10)
    # The stream is open and has delivered before the server is stopped (a loaded
    # machine may start the reader late).
    assert wait_for(lambda: len(streamed["messages"]) > 0, 10)
    began = time.monotonic()
    assert second.stop(signal.SIGTERM) == 0
    assert time.monotonic() - began < 10
    reader.join(timeout=10)
    assert streamed["messages"] and streamed["messages"][-1]["event"] != "end"
    row = runs.get(stopped)
    assert row.status == "interrupted" and row.pid is None
    log = second.log.read_text()
    assert "Traceback" not in log and "Application shutdown complete" in log

    third = start_server(tmp_path, name="third", store=first.store)
    try:
        with third.client() as c:
            # The resumed session starts the two cut calls again, as their first attempts
            # (never checkpointed, they are not counted twice); then it is cancelled.
            read_stream(c, f"/runs/{stopped}/events", until=_attempts_begun_in(
                2, "first", "second"))
            c.post(f"/runs/{stopped}/cancel")
        done = third.wait_status(stopped, "finished", timeout=60)
    finally:
        assert third.stop() == 0
    assert done["sessions"] == 2
    again = [e for e in runs.events(stopped) if e["session"] == 2 and e["kind"] == "start"]
    assert sorted((e["subtask_id"], e["attempt"]) for e in again) == [("first", 1),
                                                                    ("second", 1)]


PERSON_WAITS = ROOT / "tests" / "coordinator" / "data" / "person_waits.yaml"


def test_a_server_killed_while_an_escalation_waits_waits_again_after_restart(
    tmp_path: Path,
) -> None:
    """SIGKILL while patents waits for a person (docs/design.md §17): the next server
    resumes the run, the same escalation waits again (id, options, since_s), and a retry
    decided then runs patents again to complete."""
    first = start_server(tmp_path, name="first")
    run_id = first.submit(PERSON_WAITS, speed=4)["run_id"]
    runs = RunStore(first.store)

    def needed() -> bool:
        return any(e["kind"] == "decision.needed" for e in runs.events(run_id))

    assert wait_for(needed, timeout=60), "patents never waited"
    with first.client() as c:
        [before] = c.get(f"/runs/{run_id}/pending").json()["escalations"]
    first.stop(signal.SIGKILL)
    assert runs.get(run_id).status == "interrupted"
    assert "patents" in runs.results(run_id)  # its result was committed before it waited

    second = start_server(tmp_path, name="second", store=first.store)
    try:
        with second.client() as c:

            def pending() -> list[dict[str, Any]]:
                found: list[dict[str, Any]] = c.get(f"/runs/{run_id}/pending").json()[
                    "escalations"]
                return found

            assert wait_for(lambda: bool(pending()), timeout=60), "nothing waits again"
            [after] = pending()
            assert after == before
            r = c.post(f"/runs/{run_id}/decisions",
                       json={"escalation": before["id"], "do": "retry"})
            assert r.status_code == 200, r.text
        done = second.wait_status(run_id, "finished", timeout=60)
        with second.client() as c:
            report = c.get(f"/runs/{run_id}/report").json()
    finally:
        assert second.stop() == 0
    assert done["sessions"] == 2
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "patents": "complete", "overview": "complete"}
    [decision] = report["decisions"]
    assert (decision["escalation"], decision["do"], decision["by"]) == (
        "patents:1", "retry", "token")
