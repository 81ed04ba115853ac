"""``GET /runs/{id}/events``: history then live, in order, resumable, pinged, limited."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.store.runs import RunStore
from tests.coordinator.serve.conftest import HELD, SLOW, Server, read_stream

# A real fanout serve, as a subprocess.
pytestmark = pytest.mark.process


def ids_of(messages: list[dict[str, Any]]) -> list[int]:
    return [int(m["id"]) for m in messages if "id" in m]


def test_a_stream_gives_every_event_in_order_then_end(server: Server) -> None:
    """Connected from the start: ids 1..n with no gap, the store's events, then end."""
    run_id = server.submit(SLOW, speed=40)["run_id"]
    with server.client() as c:
        messages, _ = read_stream(c, f"/runs/{run_id}/events")
    assert messages[-1]["event"] == "end"
    assert messages[-1]["data"]["status"] == "finished"
    assert messages[-1]["data"]["outcome"] == "complete"
    events = messages[:-1]
    assert ids_of(events) == list(range(1, len(events) + 1))
    stored = RunStore(server.store).events(run_id)
    assert [m["data"] for m in events] == stored
    assert [m["event"] for m in events] == [e["kind"] for e in stored]
    assert {"state", "call", "start", "attempt"} <= {m["event"] for m in events}


def test_last_event_id_resumes_after_that_event(server: Server) -> None:
    """A client cut off mid-run reconnects with Last-Event-ID and misses nothing."""
    run_id = server.submit(SLOW, speed=40)["run_id"]
    with server.client() as c:
        head, _ = read_stream(c, f"/runs/{run_id}/events", stop_after=5)
        last = head[-1]["id"]
        tail, _ = read_stream(c, f"/runs/{run_id}/events", headers={"Last-Event-ID": last})
        # ?after= does the same for a client that cannot set the header.
        after, _ = read_stream(c, f"/runs/{run_id}/events?after={last}")
    assert ids_of(head) == [1, 2, 3, 4, 5]
    assert tail[-1]["event"] == "end" and ids_of(tail)[0] == int(last) + 1
    every = ids_of(head) + ids_of(tail)
    assert every == list(range(1, len(every) + 1))
    assert [m["data"] for m in head + tail[:-1]] == RunStore(server.store).events(run_id)
    assert ids_of(after) == ids_of(tail)


def test_a_quiet_stream_gets_pings(server: Server) -> None:
    """While nothing happens (a tool call that lasts until the run is cancelled), comment
    pings keep the connection alive; the run's end still ends the stream."""
    run_id = server.submit(SLOW, speed=HELD)["run_id"]
    with server.client() as c:
        # Three pings, or the stream is not quiet-proof: wait for them, not for a time
        # (at speed 20 the run could end before a loaded machine had read three).
        _, comments = read_stream(c, f"/runs/{run_id}/events", pings=3)
        c.post(f"/runs/{run_id}/cancel")
        messages, _ = read_stream(c, f"/runs/{run_id}/events")
    assert comments.count(": ping") >= 3
    assert messages[-1]["event"] == "end"


def test_many_streams_of_one_run_see_the_same_events(server: Server) -> None:
    """Eight clients joining at different times all get the full, identical sequence."""
    run_id = server.submit(SLOW, speed=20)["run_id"]
    seen: list[list[int]] = []
    lock = threading.Lock()

    def follow() -> None:
        with httpx.Client(base_url=server.url, timeout=30,
                          headers={"Authorization": f"Bearer {server.token}"}) as c:
            messages, _ = read_stream(c, f"/runs/{run_id}/events")
        with lock:
            seen.append(ids_of(messages))

    threads = [threading.Thread(target=follow) for _ in range(8)]
    for i, t in enumerate(threads):
        t.start()
        if i % 2:
            threading.Event().wait(0.3)
    for t in threads:
        t.join(timeout=60)
    assert len(seen) == 8
    assert all(s == seen[0] for s in seen) and seen[0] == list(range(1, len(seen[0]) + 1))


def test_a_finished_run_streams_from_the_store(server: Server) -> None:
    """After the run ended, a new stream replays the store and ends; nothing is waited for."""
    run_id = server.submit(SLOW, speed=1000)["run_id"]
    server.wait_status(run_id, "finished")
    with server.client() as c:
        messages, _ = read_stream(c, f"/runs/{run_id}/events", timeout=5)
        beyond, _ = read_stream(c, f"/runs/{run_id}/events",
                                headers={"Last-Event-ID": "999999"}, timeout=5)
    assert ids_of(messages) == list(range(1, len(messages)))
    assert [m["event"] for m in beyond] == ["end"]


def test_a_ticket_opens_one_runs_stream_only(server: Server) -> None:
    """EventSource's ticket: valid for its run, refused for another run or when forged."""
    one = server.submit(SLOW, speed=1000)["run_id"]
    two = server.submit(SLOW, speed=1000)["run_id"]
    with server.client() as c:
        ticket = c.post(f"/runs/{one}/ticket").json()
    assert ticket["expires_in"] > 0
    with server.client(token=None) as anonymous:
        ok, _ = read_stream(anonymous, f"/runs/{one}/events?ticket={ticket['ticket']}")
        other = anonymous.get(f"/runs/{two}/events?ticket={ticket['ticket']}")
        forged = anonymous.get(f"/runs/{one}/events?ticket={ticket['ticket'][:-1]}0")
        bare = anonymous.get(f"/runs/{one}/events")
        not_api = anonymous.get(f"/runs/{one}?ticket={ticket['ticket']}")
    assert ok[-1]["event"] == "end"
    assert {other.status_code, forged.status_code, bare.status_code,
            not_api.status_code} == {401}


def test_streams_past_the_limit_are_503(open_server: Server) -> None:
    """With --max-streams 2 a third concurrent stream is refused with 503 and Retry-After."""
    run_id = open_server.submit(SLOW, speed=5)["run_id"]
    with open_server.client() as c, c.stream("GET", f"/runs/{run_id}/events") as one, \
            c.stream("GET", f"/runs/{run_id}/events") as two:
        assert one.status_code == 200 and two.status_code == 200
        third = c.get(f"/runs/{run_id}/events")
        assert third.status_code == 503 and third.headers["retry-after"]
    with open_server.client() as c:
        assert c.post(f"/runs/{run_id}/cancel").status_code in (200, 202)
        messages, _ = read_stream(c, f"/runs/{run_id}/events")  # slots were given back
    assert messages[-1]["event"] == "end"


def test_the_answer_streams_as_answer_delta_events_then_the_answer(server: Server) -> None:
    """A run with a lead: `answer.delta` messages in order, then one `answer`, then `end`;
    the deltas add up to the text the checked answer carries, but for its citations (the
    model's numbers as it wrote them; the answer's renumbered as it cites them)."""
    research_lead = Path(__file__).resolve().parents[3] / "scenarios" / "research_lead.yaml"
    run_id = server.submit(research_lead, speed=1000)["run_id"]
    with server.client() as c:
        messages, _ = read_stream(c, f"/runs/{run_id}/events")
    kinds = [m["event"] for m in messages]
    assert kinds[-1] == "end" and kinds.count("answer") == 1
    deltas = [m["data"] for m in messages if m["event"] == "answer.delta"]
    answer = next(m["data"] for m in messages if m["event"] == "answer")
    assert len(deltas) >= 2 and kinds.index("answer") > kinds.index("answer.delta")
    def words(text: str) -> str:
        return re.sub(r"\s*\[[^\[\]]*\]", "", text)

    assert words("".join(d["text"] for d in deltas)) == words(answer["text"])
    assert answer["answer_kind"] == "model" and answer["subtask_id"] == "lead"
