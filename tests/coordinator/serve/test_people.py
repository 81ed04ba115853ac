"""A person decides through the service (docs/design.md §17): what waits, decisions, plan
reviews and requests, their refusals, their events on the run's stream.

The service runs in this process (tests/coordinator/serve/local.py); a test offers an
escalation on a run's desk and waits for it there, as the flow does when a subagent
escalates.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.people import Desk
from coordinator.store.runs import wait_for
from subagents.spec import SubtaskSpec
from tests.coordinator.serve.conftest import HOSTILE, read_stream
from tests.coordinator.serve.local import DECIDER, Local, denied, held_job, local_service

WAITS = {"escalations": {"wait_s": 600}}
ALLOW = ["slow", "patents"]
NOTHING: dict[str, Any] = {"escalations": [], "plan": None}


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    """One service in this process for the module's tests: token, token name alice."""
    with local_service(tmp_path_factory.mktemp("people"), max_runs=8) as local:
        yield local


@pytest.fixture
def held(svc: Local) -> Iterator[str]:
    """A run whose job sets escalations, at work until the test ends (then cancelled)."""
    run_id = svc.submit(held_job(**WAITS))
    svc.desk(run_id)
    yield run_id
    svc.cancel(run_id)


def test_pending_lists_a_waiting_escalation_and_a_decision_ends_the_wait(
    svc: Local, held: str
) -> None:
    """GET pending shows the escalation with its id, options and since_s; POST decisions
    answers the decision by the token's name, and the waiting subtask has it."""
    c = svc.client()
    assert c.get(f"/runs/{held}/pending").json() == NOTHING
    offered, decision = svc.escalate(held, denied(), ALLOW)
    pending = c.get(f"/runs/{held}/pending").json()
    assert pending["plan"] is None
    [esc] = pending["escalations"]
    assert esc["id"] == offered.id == "first:1"
    assert (esc["subtask_id"], esc["errorCategory"], esc["trigger"]) == (
        "first", "permission", "permission_denied")
    assert esc["attempted_query"] == "sodium-ion patents 2025"
    assert [o["do"] for o in esc["options"]] == [
        "retry", "use_tool", "requery", "answer", "accept", "stop"]
    assert esc["since_s"] >= 0

    r = c.post(f"/runs/{held}/decisions", json={"escalation": "first:1", "option": "o2"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["escalation"], body["option"], body["do"], body["tool"], body["by"]) == (
        "first:1", "o2", "use_tool", "slow", DECIDER)
    assert body["at"].endswith("+00:00") and "at_s" in body
    made = decision.result(timeout=10)
    assert made.model_dump(mode="json") == body
    assert c.get(f"/runs/{held}/pending").json() == NOTHING


def test_the_run_listing_says_how_many_escalations_wait(svc: Local, held: str) -> None:
    """GET /runs and GET /runs/{id} count the run's escalations that wait for a person
    (`waiting`), from the store's decision.needed and decision.made: 1 while first:1
    waits, 0 once it is decided."""
    c = svc.client()

    def waiting() -> tuple[int, int]:
        [listed] = [r for r in c.get("/runs").json()["runs"] if r["id"] == held]
        return listed["waiting"], c.get(f"/runs/{held}").json()["waiting"]

    assert waiting() == (0, 0)
    offered, decision = svc.escalate(held, denied(), ALLOW)
    assert wait_for(lambda: waiting() == (1, 1), timeout=30), waiting()
    assert c.post(f"/runs/{held}/decisions",
                  json={"escalation": offered.id, "do": "accept"}).status_code == 200
    decision.result(timeout=10)
    assert wait_for(lambda: waiting() == (0, 0), timeout=30), waiting()


def test_an_answer_by_kind_carries_its_text_and_source(svc: Local, held: str) -> None:
    """``do: answer`` with text and a source is the answer option, text and source kept."""
    svc.escalate(held, denied("second"), ALLOW)
    r = svc.client().post(f"/runs/{held}/decisions", json={
        "escalation": "second:1", "do": "answer", "text": "Three filings in 2025.",
        "source": "https://example.org/filings"})
    assert r.status_code == 200, r.text
    assert (r.json()["do"], r.json()["text"], r.json()["source"]) == (
        "answer", "Three filings in 2025.", "https://example.org/filings")


@pytest.mark.parametrize(("body", "field"), [
    pytest.param({"option": "o1"}, "escalation", id="no-escalation"),
    pytest.param({"escalation": "first:1"}, "option", id="neither-option-nor-do"),
    pytest.param({"escalation": "first:1", "option": "o1", "do": "stop"}, "do", id="both"),
    pytest.param({"escalation": "first:1", "do": "pray"}, "do", id="unknown-kind"),
    pytest.param({"escalation": "first:1", "option": "o1", "why": "x"}, "why", id="unknown-key"),
    pytest.param({"escalation": "first:1", "option": "  "}, "option", id="blank-option"),
    pytest.param({"escalation": "first:1", "option": None}, "option", id="null"),
    pytest.param(["first:1", "o1"], "<request>", id="not-an-object"),
])
def test_a_malformed_decision_is_422_naming_the_field(
    svc: Local, held: str, body: Any, field: str
) -> None:
    """A body of the wrong shape is 422 with the field, whatever waits."""
    r = svc.client().post(f"/runs/{held}/decisions", json=body)
    assert r.status_code == 422, r.text
    [problem] = r.json()["errors"]
    assert problem["field"] == field
    assert problem["message"].startswith(f"POST /runs/{held}/decisions")


@pytest.mark.parametrize(("body", "field"), [
    pytest.param({"option": "o99"}, "option", id="an-option-not-offered"),
    pytest.param({"do": "answer"}, "text", id="answer-without-text"),
    pytest.param({"do": "accept", "text": "fine"}, "text", id="text-where-none-goes"),
    pytest.param({"do": "answer", "text": "x", "source": "ftp://x"}, "source",
                 id="source-not-http"),
])
def test_a_decision_that_does_not_fit_the_escalation_is_422(
    svc: Local, held: str, body: dict[str, Any], field: str
) -> None:
    """A well-formed decision the waiting escalation cannot take is 422 with the field,
    and the escalation still waits."""
    offered, decision = svc.escalate(held, denied(), ALLOW)
    r = svc.client().post(f"/runs/{held}/decisions", json={"escalation": offered.id, **body})
    assert r.status_code == 422, r.text
    assert [p["field"] for p in r.json()["errors"]] == [field]
    assert not decision.done()
    ids = [e["id"] for e in svc.client().get(f"/runs/{held}/pending").json()["escalations"]]
    assert ids == [offered.id]


def test_a_decision_that_no_longer_waits_is_409(svc: Local, held: str) -> None:
    """Deciding twice, an escalation that never was, and one that timed out: 409."""
    c = svc.client()
    offered, decision = svc.escalate(held, denied(), ALLOW)
    assert c.post(f"/runs/{held}/decisions",
                  json={"escalation": offered.id, "do": "accept"}).status_code == 200
    again = c.post(f"/runs/{held}/decisions", json={"escalation": offered.id, "do": "stop"})
    assert again.status_code == 409
    assert again.json()["status"] == "running" and offered.id in again.json()["detail"]
    never = c.post(f"/runs/{held}/decisions", json={"escalation": "third:7", "do": "stop"})
    assert never.status_code == 409
    assert decision.result(timeout=10).do == "accept"

    # Timed out: decided by timeout (on the run's clock, at HELD speed 1e-6 s is 1 ms).
    late, timed = svc.escalate(held, denied("fourth"), ALLOW, timeout_s=1e-6)
    assert timed.result(timeout=10).by == "timeout"
    assert c.post(f"/runs/{held}/decisions",
                  json={"escalation": late.id, "do": "stop"}).status_code == 409


def test_a_run_without_a_person_has_nothing_pending_and_refuses_decisions(svc: Local) -> None:
    """A job that sets neither escalations nor review_plan gets no desk: pending is
    empty, decisions, reviews and requests are 409 saying why."""
    run_id = svc.submit(held_job())
    try:
        svc.wait_status(run_id, "running")
        c = svc.client()
        assert c.get(f"/runs/{run_id}/pending").json() == NOTHING
        for path, body in ((f"/runs/{run_id}/decisions", {"escalation": "a:1", "do": "stop"}),
                           (f"/runs/{run_id}/plan", {"verdict": "approve"}),
                           (f"/runs/{run_id}/subtasks/first/request", {"stop": True})):
            r = c.post(path, json=body)
            assert r.status_code == 409, (path, r.text)
            assert "escalations nor review_plan" in r.json()["detail"]
    finally:
        svc.cancel(run_id)


def test_a_finished_run_has_nothing_pending_and_refuses_decisions(svc: Local) -> None:
    """Once the run has ended, what waited is gone: empty lists, 409 with its status; a
    malformed body is still 422."""
    run_id = svc.submit(held_job(**WAITS))
    offered, _ = svc.escalate(run_id, denied(), ALLOW)
    svc.cancel(run_id)
    c = svc.client()
    assert c.get(f"/runs/{run_id}/pending").json() == NOTHING
    r = c.post(f"/runs/{run_id}/decisions", json={"escalation": offered.id, "do": "stop"})
    assert r.status_code == 409 and r.json()["status"] == "finished"
    assert c.post(f"/runs/{run_id}/plan", json={"verdict": "reject"}).status_code == 409
    assert c.post(f"/runs/{run_id}/decisions", json={"do": "stop"}).status_code == 422


ROUTES = [("GET", "pending", None), ("POST", "decisions", {"escalation": "a:1", "do": "stop"}),
          ("POST", "plan", {"verdict": "approve"}),
          ("POST", "subtasks/first/request", {"stop": True})]


@pytest.mark.parametrize(("method", "tail", "body"), ROUTES)
def test_an_unknown_run_is_404(svc: Local, method: str, tail: str, body: Any) -> None:
    """No run with that id (or no run id at all): 404 before anything else."""
    c = svc.client()
    for run_id in ("20261204-000000-00000000", "..%2F..%2Fetc"):
        r = c.request(method, f"/runs/{run_id}/{tail}", json=body)
        assert r.status_code == 404, r.text


@pytest.mark.parametrize(("method", "tail", "body"), ROUTES)
def test_every_route_needs_the_token(
    svc: Local, held: str, method: str, tail: str, body: Any
) -> None:
    """Without the token, or with a wrong one, 401 and nothing is done."""
    for token in (None, "wrong"):
        r = svc.client(token).request(method, f"/runs/{held}/{tail}", json=body)
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Bearer")


def test_a_body_that_is_not_json_is_400(svc: Local, held: str) -> None:
    """Bytes that are no JSON document: 400 saying so."""
    r = svc.client().post(f"/runs/{held}/decisions", content=b"{nope",
                          headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "not a JSON document" in r.json()["detail"]


def _plan(svc: Local, run_id: str) -> tuple[Desk, Any]:
    desk = svc.desk(run_id)
    specs = [SubtaskSpec.model_validate(s) for s in held_job()["job"]["subtasks"]]

    async def review() -> Any:
        return await desk.review_plan(specs, tools=["slow"], planner="scripted")

    future = svc.start(review)
    end = time.monotonic() + 10
    while not svc.call(desk.plan_waits):
        assert time.monotonic() < end
        time.sleep(0.01)
    return desk, future


def test_a_plan_is_reviewed_edited_then_approved(svc: Local) -> None:
    """The plan shows in pending; a bad edit is 422 naming its path; an edit is applied
    and the review answered; then no plan waits and another review is 409."""
    run_id = svc.submit(held_job(review_plan=True))
    try:
        _, review = _plan(svc, run_id)
        c = svc.client()
        plan = c.get(f"/runs/{run_id}/pending").json()["plan"]
        assert [s["id"] for s in plan["subtasks"]] == ["first", "second", "third", "fourth"]
        for body, field in (
            ({"edit": {"change": {"nope": {"weight": 2}}}}, "edit.change.nope"),
            ({"edit": {"change": {"first": {"weight": -1}}}}, "edit.change.first.weight"),
            ({"edit": {"add": [{"id": "fifth", "query": "q", "tools": ["web"]}]}},
             "edit.add[0].tools[0]"),
            ({"verdict": "maybe"}, "verdict"),
            ({"verdict": "approve", "edit": {}}, "verdict"),
            ({}, "verdict"),
        ):
            r = c.post(f"/runs/{run_id}/plan", json=body)
            assert r.status_code == 422, (body, r.text)
            assert [p["field"] for p in r.json()["errors"]] == [field], body
        r = c.post(f"/runs/{run_id}/plan", json={"edit": {
            "remove": ["fourth"], "change": {"first": {"query": "the first, sharper"}}}})
        assert r.status_code == 200, r.text
        assert r.json()["verdict"] == "edit" and r.json()["by"] == DECIDER
        done = review.result(timeout=10)
        assert [s.id for s in done.subtasks] == ["first", "second", "third"]
        assert done.subtasks[0].query == "the first, sharper"
        assert c.get(f"/runs/{run_id}/pending").json() == NOTHING
        assert c.post(f"/runs/{run_id}/plan", json={"verdict": "reject"}).status_code == 409
    finally:
        svc.cancel(run_id)


def test_a_plan_is_rejected(svc: Local) -> None:
    """``verdict: reject`` ends the review rejected, by the token's name."""
    run_id = svc.submit(held_job(review_plan=True))
    try:
        _, review = _plan(svc, run_id)
        r = svc.client().post(f"/runs/{run_id}/plan", json={"verdict": "reject"})
        assert r.status_code == 200 and r.json()["verdict"] == "reject"
        assert review.result(timeout=10).verdict == "reject"
    finally:
        svc.cancel(run_id)


def test_a_running_subtask_is_asked_to_stop_or_given_a_hint(svc: Local, held: str) -> None:
    """A stop and a hint reach a running subtask's desk; a subtask that is not running
    is 409; a malformed request is 422 naming the field."""
    desk = svc.desk(held)
    svc.call(desk.started, "first")
    c = svc.client()
    r = c.post(f"/runs/{held}/subtasks/first/request", json={"hint": "filings first"})
    assert r.status_code == 200, r.text
    assert (r.json()["hint"], r.json()["by"]) == ("filings first", DECIDER)
    assert svc.call(desk.take_hints, "first") == ["filings first"]
    r = c.post(f"/runs/{held}/subtasks/first/request", json={"stop": True})
    assert r.status_code == 200 and r.json()["stop"] is True
    assert svc.call(desk.stop_requested, "first") is not None
    assert c.post(f"/runs/{held}/subtasks/nobody/request",
                  json={"stop": True}).status_code == 409
    for body, field in (({}, "stop"), ({"stop": False}, "stop"), ({"hint": " "}, "hint"),
                        ({"stop": True, "hint": "x"}, "stop"), ({"later": 1}, "later")):
        r = c.post(f"/runs/{held}/subtasks/first/request", json=body)
        assert r.status_code == 422, (body, r.text)
        assert [p["field"] for p in r.json()["errors"]] == [field], body


def test_a_hint_to_a_subtask_that_asks_no_model_is_409(svc: Local, held: str) -> None:
    """A running subtask that follows a scripted plan has no turn to read a hint at: the
    hint is 409 saying so, a stop to it is still taken."""
    desk = svc.desk(held)
    svc.call(partial(desk.started, "first", hints=False))
    c = svc.client()
    r = c.post(f"/runs/{held}/subtasks/first/request", json={"hint": "filings first"})
    assert r.status_code == 409, r.text
    assert "scripted plan" in r.json()["detail"]
    assert svc.call(desk.take_hints, "first") == []
    assert c.post(f"/runs/{held}/subtasks/first/request", json={"stop": True}).status_code == 200


def test_the_desk_events_come_on_the_run_stream(svc: Local, held: str) -> None:
    """decision.needed and decision.made of an escalation arrive on the run's event
    stream as stored events of its subtask (with an id: the store has them, a resumed run
    waits again); request.made as a live note, without one (Last-Event-ID keeps counting
    stored events)."""
    seen: list[dict[str, Any]] = []

    def made(messages: list[dict[str, Any]]) -> bool:
        return any(m["event"] == "request.made" for m in messages)

    reader = threading.Thread(target=read_stream, args=(svc.client(), f"/runs/{held}/events"),
                              kwargs={"into": seen, "until": made}, daemon=True)
    reader.start()
    end = time.monotonic() + 30
    while not seen:  # the stream is open once the run's first events came
        assert time.monotonic() < end
        time.sleep(0.01)
    offered, _ = svc.escalate(held, denied(), ALLOW)
    c = svc.client()
    assert c.post(f"/runs/{held}/decisions",
                  json={"escalation": offered.id, "do": "accept"}).status_code == 200
    desk = svc.desk(held)
    svc.call(desk.started, "first")
    assert c.post(f"/runs/{held}/subtasks/first/request", json={"hint": "h"}).status_code == 200
    reader.join(timeout=30)
    assert not reader.is_alive()
    desk_kinds = ("decision.needed", "decision.made", "request.made")
    notes = [m for m in seen if m["event"] in desk_kinds]
    assert [m["event"] for m in notes] == ["decision.needed", "decision.made", "request.made"]
    assert ["id" in m for m in notes] == [True, True, False]
    assert {notes[0]["data"]["subtask_id"], notes[1]["data"]["subtask_id"]} == {"first"}
    assert notes[0]["data"]["escalation"]["id"] == offered.id
    assert notes[1]["data"]["decision"]["do"] == "accept"
    assert notes[1]["data"]["decision"]["by"] == DECIDER
    assert notes[2]["data"]["request"] == {"subtask_id": "first", "by": DECIDER,
                                           "at_s": notes[2]["data"]["request"]["at_s"],
                                           "hint": "h",
                                           "at": notes[2]["data"]["request"]["at"]}
    # A stream opened later hears them again, in order among the stored events.
    again, _ = read_stream(c, f"/runs/{held}/events", until=made)
    assert [m["event"] for m in again if m["event"] in desk_kinds] == [
        m["event"] for m in notes]


def test_a_real_escalation_waits_for_a_decision_through_the_service(
    tmp_path: Path, svc: Local
) -> None:
    """A job that sets escalations, whose subtask is denied: its escalation waits in
    pending; deciding accept lets the run finish with the decision in its report."""
    doc = yaml.safe_load(HOSTILE.read_text())
    doc["job"]["escalations"] = {"wait_s": 600}
    run_id = svc.submit(doc, speed=50)
    c = svc.client()
    end = time.monotonic() + 30
    while True:
        pending = c.get(f"/runs/{run_id}/pending").json()["escalations"]
        if pending:
            break
        status = c.get(f"/runs/{run_id}").json()["status"]
        assert status != "finished", "the run ended without waiting for a decision"
        assert time.monotonic() < end
        time.sleep(0.05)
    [esc] = pending
    assert esc["subtask_id"] == "denied"
    r = c.post(f"/runs/{run_id}/decisions", json={"escalation": esc["id"], "do": "accept"})
    assert r.status_code == 200
    svc.wait_status(run_id, "finished")
    report = c.get(f"/runs/{run_id}/report").json()
    assert [d["escalation"] for d in report["decisions"]] == [esc["id"]]


def test_a_queued_run_has_nothing_pending_yet_and_says_so(tmp_path: Path) -> None:
    """A run whose job sets escalations, queued behind another, gets its desk when it
    starts: until then pending is empty and a decision is 409 saying it has not started
    (not that its job attaches no person)."""
    with local_service(tmp_path, max_runs=1) as local:
        first = local.submit(held_job())
        second = local.submit(held_job(**WAITS))
        local.wait_status(second, "queued")
        c = local.client()
        assert c.get(f"/runs/{second}/pending").json() == NOTHING
        r = c.post(f"/runs/{second}/decisions", json={"escalation": "first:1", "do": "stop"})
        assert r.status_code == 409, r.text
        assert r.json()["status"] == "queued"
        assert "has not started yet" in r.json()["detail"]
        local.cancel(second)
        local.cancel(first)
