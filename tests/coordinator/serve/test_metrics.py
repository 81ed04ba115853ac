"""``GET /metrics`` of a real ``fanout serve``, read with prometheus_client's own parser."""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.coordinator.serve.conftest import ROOT, SLOW, Server, read_stream

# A real fanout serve, as a subprocess.
pytestmark = pytest.mark.process

RATE_LIMITED = ROOT / "scenarios" / "rate_limit_retry_after.yaml"


def scrape(server: Server) -> dict[str, list[Sample]]:
    """Every sample of the server's /metrics, by metric family name."""
    with server.client() as c:
        r = c.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return {f.name: list(f.samples) for f in text_string_to_metric_families(r.text)}


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``."""
    return sum(s.value for s in samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def test_metrics_count_runs_attempts_429s_streams_and_delivery(server: Server) -> None:
    """A finished run that met 429s shows in every family the service exposes."""
    # Slow enough that the stream follows the run live (delivery is timed for live events).
    run_id = server.submit(RATE_LIMITED, speed=40)["run_id"]
    with server.client() as c:
        messages, _ = read_stream(c, f"/runs/{run_id}/events")
    assert messages[-1]["event"] == "end"
    server.wait_status(run_id, "finished")
    families = scrape(server)
    runs = families["fanout_runs"]
    assert value(runs, "fanout_runs", status="finished") >= 1
    attempts = families["fanout_attempts"]
    assert value(attempts, "fanout_attempts_total", category="transient") >= 1
    assert value(attempts, "fanout_attempts_total", category="none") >= 1
    assert value(families["fanout_rate_limited"], "fanout_rate_limited_total") >= 1
    finished = families["fanout_subagents_finished"]
    assert value(finished, "fanout_subagents_finished_total") >= 1
    live = families["fanout_subagents"]
    assert {s.labels["state"] for s in live} >= {"queued", "running", "retrying"}
    assert value(families["fanout_queue_depth"], "fanout_queue_depth") == 0
    delivery = families["fanout_event_delivery_seconds"]
    assert value(delivery, "fanout_event_delivery_seconds_count") >= 1
    assert "fanout_limiter_wait_seconds" in families


def test_metrics_need_the_token(server: Server) -> None:
    """/metrics is behind the API's token like every other route."""
    with server.client(token=None) as c:
        assert c.get("/metrics").status_code == 401


def _streams(server: Server) -> float:
    return value(scrape(server)["fanout_sse_clients"], "fanout_sse_clients")


def test_sse_clients_counts_the_open_event_streams(server: Server) -> None:
    """fanout_sse_clients counts a stream while it is open and lets it go once it closes
    (the test asserted `>= 0`, which no count can fail)."""
    # A run that goes on for a while (40 virtual seconds at speed 1): its stream stays
    # open until the run ends (a finished run's stream is written whole and closed).
    run_id = server.submit(SLOW, speed=1)["run_id"]
    during: list[float] = []

    def count_now(messages: list[dict[str, Any]]) -> bool:
        during.append(_streams(server))
        return True  # one look, with this stream open, is enough

    try:
        with server.client() as c:
            read_stream(c, f"/runs/{run_id}/events", until=count_now)
        assert during and during[0] >= 1
        # The server hears the close at its next write (a ping every 0.2 s): wait for it.
        end = time.monotonic() + 30
        while _streams(server) >= during[0]:
            assert time.monotonic() < end, "the closed stream is still counted"
            time.sleep(0.05)
    finally:
        with server.client() as c:
            c.post(f"/runs/{run_id}/cancel")
        server.wait_status(run_id, "finished")
