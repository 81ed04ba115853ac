"""A person decides through ``fanout serve --executor temporal`` (docs/design.md §17): the
people routes act on what waits in the workflow, and give what the local engine gives.

Each case runs the same job through HTTP on two real servers, one whose runs go to
Temporal workers and one that runs them itself, and compares what each reports.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from coordinator.store.runs import wait_for
from coordinator.temporal.dev import DevServer
from tests.coordinator.serve.conftest import Server, launch, read_stream
from tests.coordinator.temporal.conftest import ROOT, Workers, normalized

pytestmark = pytest.mark.process

QUEUE = "serveperson"
DECIDER = "alice"
DATA = ROOT / "tests" / "coordinator" / "data"
ASK_RETRY = DATA / "ask_retry.yaml"  # patent_db denies once, then answers
REVIEW_PLAN = DATA / "review_plan.yaml"  # a scripted lead plans market and patents
REQUESTS = Path(__file__).parent / "data" / "person_requests.yaml"


@pytest.fixture(scope="module")
def servers(
    dev_server: DevServer, workers: Workers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Server]]:
    """``fanout serve --executor temporal`` (a worker on its task queue) and a local
    ``fanout serve``, both deciding as alice, started side by side."""
    workers.start(QUEUE, concurrency=8)
    launched = {
        "temporal": launch(tmp_path_factory.mktemp("temporal-serve"), "--executor", "temporal",
                           "--address", dev_server.address, "--task-queue", QUEUE,
                           "--token-name", DECIDER, "--ping-interval", "0.2"),
        "local": launch(tmp_path_factory.mktemp("local-serve"), "--token-name", DECIDER,
                        "--ping-interval", "0.2"),
    }
    ready: dict[str, Server] = {}
    try:
        ready = {name: one.ready() for name, one in launched.items()}
    finally:
        if len(ready) < len(launched):  # one did not start: the other is stopped too
            for one in launched.values():
                if one.proc.poll() is None:
                    one.proc.kill()
                one.proc.wait(timeout=30)
    yield ready
    for srv in ready.values():
        assert srv.stop() == 0, srv.log.read_text()


def job(path: Path, **fields: Any) -> dict[str, Any]:
    """The job file at ``path`` with ``fields`` set on its job (and no scripted people)."""
    doc: dict[str, Any] = copy.deepcopy(yaml.safe_load(path.read_text()))
    doc["job"].update(fields)
    doc.pop("people", None)
    return doc


def submit(srv: Server, doc: dict[str, Any], speed: float) -> str:
    """POST the job (JSON); its run id."""
    r = srv.client().post("/runs", params={"speed": speed}, json=doc)
    assert r.status_code == 201, r.text
    run_id: str = r.json()["run_id"]
    return run_id


def until(c: httpx.Client, run_id: str, what: str, timeout: float = 60) -> Any:
    """Poll ``GET /runs/{id}/pending`` until its ``what`` (escalations, plan) is there."""
    end = time.monotonic() + timeout
    while True:
        waiting = c.get(f"/runs/{run_id}/pending").json()[what]
        if waiting:
            return waiting
        status = c.get(f"/runs/{run_id}").json()["status"]
        assert status in ("queued", "running"), f"run {run_id} {status}: nothing waited"
        assert time.monotonic() < end, f"nothing waited in {what} of {run_id}"
        time.sleep(0.05)


def report_of(srv: Server, run_id: str) -> dict[str, Any]:
    """The run's report, once it has finished."""
    srv.wait_status(run_id, "finished", timeout=120)
    r = srv.client().get(f"/runs/{run_id}/report")
    assert r.status_code == 200, r.text
    report: dict[str, Any] = r.json()
    return report


def decide_retry(srv: Server) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Run ASK_RETRY with escalations waiting, decide retry for patents through HTTP
    (checking pending, the stream and a second decision on the way); the report, the
    escalation as pending listed it and the stream's desk events."""
    c = srv.client()
    run_id = submit(srv, job(ASK_RETRY, escalations={"wait_s": 600}), speed=10)
    seen: list[dict[str, Any]] = []

    def made(messages: list[dict[str, Any]]) -> bool:
        return any(m["event"] == "decision.made" for m in messages)

    reader = threading.Thread(target=read_stream, args=(srv.client(), f"/runs/{run_id}/events"),
                              kwargs={"into": seen, "until": made, "timeout": 120},
                              daemon=True)
    reader.start()
    [esc] = until(c, run_id, "escalations")
    assert (esc["id"], esc["subtask_id"], esc["trigger"]) == (
        "patents:1", "patents", "permission_denied")
    assert "retry" in [o["do"] for o in esc["options"]]
    # The listing counts it from the store's decision.needed (the workers record it).
    assert wait_for(lambda: c.get(f"/runs/{run_id}").json()["waiting"] == 1, timeout=30)
    # The decision's coverage_before counts licence_prices on both engines once it is done.
    assert wait_for(lambda: any(
        m["event"] == "state" and m["data"]["subtask_id"] == "licence_prices"
        and m["data"]["state"] == "done" for m in list(seen)), timeout=60)
    r = c.post(f"/runs/{run_id}/decisions", json={"escalation": esc["id"], "do": "retry"})
    assert r.status_code == 200, r.text
    assert (r.json()["do"], r.json()["by"]) == ("retry", DECIDER)
    again = c.post(f"/runs/{run_id}/decisions", json={"escalation": esc["id"], "do": "accept"})
    assert again.status_code == 409, again.text
    assert esc["id"] in again.json()["detail"]
    reader.join(timeout=120)
    assert not reader.is_alive()
    desk = [m for m in seen if m["event"] in ("decision.needed", "decision.made")]
    report = report_of(srv, run_id)
    assert c.get(f"/runs/{run_id}").json()["waiting"] == 0
    return report, esc, desk


def test_a_decision_through_the_service_on_temporal_is_carried_out_as_locally(
    servers: dict[str, Server],
) -> None:
    """patents' escalation waits in the workflow: pending lists it with its options, the
    stream sends decision.needed, a retry decided through HTTP is carried out (patents
    completes) and a second decision is 409; the report's decision (by, at, status and
    coverage before and after) is the local engine's for the same job."""
    report, esc, desk = decide_retry(servers["temporal"])
    assert [m["event"] for m in desk] == ["decision.needed", "decision.made"]
    assert desk[0]["data"]["escalation"]["id"] == "patents:1"
    assert desk[1]["data"]["decision"]["by"] == DECIDER
    assert {s["id"]: s["status"] for s in report["subtasks"]} == {
        "patents": "complete", "licence_prices": "complete"}
    [decision] = report["decisions"]
    assert (decision["escalation"], decision["do"], decision["by"]) == (
        "patents:1", "retry", DECIDER)
    assert decision["at"].endswith("+00:00")
    assert (decision["change"]["status_before"], decision["change"]["status_after"]) == (
        "partial", "complete")
    assert (decision["change"]["coverage_before"], decision["change"]["coverage_after"]) == (
        0.5, 1.0)

    local, local_esc, local_desk = decide_retry(servers["local"])
    assert {**esc, "since_s": 0} == {**local_esc, "since_s": 0}
    assert [m["event"] for m in local_desk] == [m["event"] for m in desk]
    assert normalized(report) == normalized(local)


def review(srv: Server) -> dict[str, Any]:
    """Run REVIEW_PLAN with its plan waiting for review, refuse two bad edits (422
    naming their field) and make a good one (patents removed); the report."""
    c = srv.client()
    run_id = submit(srv, job(REVIEW_PLAN, review_plan=True), speed=10)
    plan = until(c, run_id, "plan")
    assert [s["id"] for s in plan["subtasks"]] == ["market", "patents"]
    for body, field in (
        ({"edit": {"change": {"market": {"weight": -1}}}}, "edit.change.market.weight"),
        ({"edit": {"add": [{"id": "prices", "query": "cell prices",
                            "tools": ["no_such_tool"]}]}}, "edit.add[0].tools[0]"),
    ):
        r = c.post(f"/runs/{run_id}/plan", json=body)
        assert r.status_code == 422, (body, r.text)
        assert [p["field"] for p in r.json()["errors"]] == [field], body
    assert c.get(f"/runs/{run_id}/pending").json()["plan"] is not None  # it still waits
    r = c.post(f"/runs/{run_id}/plan", json={"edit": {"remove": ["patents"]}})
    assert r.status_code == 200, r.text
    assert (r.json()["verdict"], r.json()["by"]) == ("edit", DECIDER)
    return report_of(srv, run_id)


def test_a_plan_is_reviewed_through_the_service_on_temporal(
    servers: dict[str, Server],
) -> None:
    """The lead's plan waits in the workflow and shows in pending; a bad edit is 422
    naming its field; an edit is carried out (only market runs), as locally."""
    report = review(servers["temporal"])
    assert [s["id"] for s in report["subtasks"]] == ["market"]
    assert report["outcome"] == "complete"
    assert normalized(report) == normalized(review(servers["local"]))


def stop_survey(srv: Server) -> dict[str, Any]:
    """Run REQUESTS (survey's deal terminal held for an hour) and ask survey to stop
    through HTTP once it runs; accept its human_request escalation; the report."""
    doc = job(REQUESTS, escalations={"wait_s": 600})
    doc["tools"]["deal_terminal"]["latency_s"] = 3600
    c = srv.client()
    run_id = submit(srv, doc, speed=1)
    end = time.monotonic() + 60
    while True:  # 409 until the run has started, and then until survey runs
        r = c.post(f"/runs/{run_id}/subtasks/survey/request", json={"stop": True})
        if r.status_code == 200:
            break
        assert r.status_code == 409, r.text
        assert ("has not started yet" in r.json()["detail"]
                or "'survey' is not running" in r.json()["detail"]), r.text
        assert time.monotonic() < end, "survey never ran"
        time.sleep(0.05)
    assert (r.json()["stop"], r.json()["by"]) == (True, DECIDER)
    [esc] = until(c, run_id, "escalations")
    assert (esc["subtask_id"], esc["trigger"]) == ("survey", "human_request")
    # The decision's coverage_before counts pricing on both engines once it is done.
    read_stream(c, f"/runs/{run_id}/events", timeout=60, until=lambda seen: any(
        m["event"] == "state" and m["data"]["subtask_id"] == "pricing"
        and m["data"]["state"] == "done" for m in seen))
    r = c.post(f"/runs/{run_id}/decisions", json={"escalation": esc["id"], "do": "accept"})
    assert r.status_code == 200, r.text
    return report_of(srv, run_id)


def test_a_stop_through_the_service_reaches_a_running_round_on_temporal(
    servers: dict[str, Server],
) -> None:
    """A stop posted to survey while its round runs on a worker hands it up with trigger
    human_request; the accepted gap is in the report, as locally."""
    report = stop_survey(servers["temporal"])
    [gap] = report["gaps"]
    assert (gap["subtask_id"], gap["trigger"]) == ("survey", "human_request")
    [decision] = report["decisions"]
    assert (decision["do"], decision["by"]) == ("accept", DECIDER)
    assert decision["change"]["coverage_before"] == report["coverage"]
    assert normalized(report) == normalized(stop_survey(servers["local"]))


def cancel_waiting(srv: Server) -> dict[str, Any]:
    """Run ASK_RETRY with escalations waiting (licence_prices's call held for an hour)
    and cancel it while patents waits; the report."""
    doc = job(ASK_RETRY, escalations={"wait_s": 600})
    doc["tools"]["deal_terminal"]["latency_s"] = 3600
    c = srv.client()
    run_id = submit(srv, doc, speed=10)
    until(c, run_id, "escalations")
    assert c.post(f"/runs/{run_id}/cancel").status_code in (200, 202)
    return report_of(srv, run_id)


def test_a_cancel_through_the_service_ends_a_waiting_run_on_temporal(
    servers: dict[str, Server],
) -> None:
    """POST cancel while an escalation waits in the workflow (and another subtask's call
    runs) ends the run with its partial report, as locally: not after the wait's timer,
    nor once every call has returned. (The running round's call is lost on Temporal, a
    cancelled activity returning nothing: docs/architecture.md says so.)"""
    report = cancel_waiting(servers["temporal"])
    local = cancel_waiting(servers["local"])
    for one in (report, local):
        assert one["decisions"] == []
        assert {s["id"]: s["status"] for s in one["subtasks"]} == {
            "patents": "partial", "licence_prices": "gap"}
        assert [(g["subtask_id"], g["trigger"]) for g in one["gaps"]] == [
            ("patents", "permission_denied"), ("licence_prices", "cancelled")]
    assert (report["outcome"], report["coverage"]) == (local["outcome"], local["coverage"])
