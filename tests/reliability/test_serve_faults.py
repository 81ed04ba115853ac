"""The service under faults: hostile requests leave `fanout serve` answering and its store
intact.

Everything runs against a real ``fanout serve`` subprocess on a free 127.0.0.1 port, each
case bounded in time.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx
import pytest

from coordinator.store.runs import RunStore, wait_for
from tests.reliability.counts import count
from tests.reliability.mutations import laughs
from tests.reliability.served import (
    SERVER_SECRET,
    SMALL_JOB,
    TOKEN,
    Served,
    serve,
    stop,
    submit,
)

# A real fanout serve, as a subprocess.
pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the hostile requests (at most 64 event streams, so leaks show)."""
    served = serve(tmp_path_factory.mktemp("hostile"), "--max-streams", "64",
                   "--ping-interval", "0.5")
    yield served
    stop(served)


def test_malformed_bodies_are_refused_and_nothing_is_recorded(server: Served) -> None:
    """Bad JSON, bad YAML, an alias bomb, deep nesting, bad UTF-8, NUL: 422 with lines (or
    413/415), nothing recorded, the server still answering."""
    before = len(RunStore(server.store).runs())
    cases: list[tuple[bytes, str, int]] = [
        (b'{"scenario": "x", "job": {', "application/json", 422),
        (b"[1, 2,", "application/json", 422),
        (b"\xff\xfe not utf-8", "application/yaml", 422),
        (b"scenario: x\njob: {query: q\x00}", "application/yaml", 422),
        (b"scenario: x\njob:\n\t- tab", "application/yaml", 422),
        (b"scenario: x\njob: " + laughs(9), "application/yaml", 422),
        (b"scenario: x\njob: " + b"[" * 50_000 + b"]" * 50_000, "application/yaml", 422),
        (b'{"a": ' * 50_000 + b"1" + b"}" * 50_000, "application/json", 422),
        (b"", "application/yaml", 422),
        (SMALL_JOB.replace(b"latency_s: 0.5", b"latency_s: .inf"), "application/yaml", 422),
        (SMALL_JOB, "text/plain", 415),
        (SMALL_JOB, "", 415),
        (SMALL_JOB, "multipart/form-data; boundary=x", 415),
    ]
    for body, kind, status in cases:
        started = time.monotonic()
        r = submit(server, body, kind)
        assert r.status_code == status, (body[:60], r.status_code, r.text[:300])
        assert time.monotonic() - started < 20, body[:60]
        if status == 422:
            errors = r.json()["errors"]
            assert errors and all(e["field"] and e["expected"] for e in errors), r.text[:300]
    assert submit(server, SMALL_JOB, speed="nan").status_code == 422
    assert submit(server, SMALL_JOB, speed="-1").status_code == 422
    assert len(RunStore(server.store).runs()) == before
    server.answering()


def test_a_10_mib_body_is_refused_without_reading_it_all(server: Served) -> None:
    """10 MiB, declared or streamed without a length: 413 promptly, server answering."""
    big = b"#" * (10 << 20)
    started = time.monotonic()
    assert submit(server, big).status_code == 413

    def chunks() -> Iterator[bytes]:
        for _ in range(160):
            yield b"#" * (64 << 10)

    count("requests")
    with server.client() as c:
        r = c.post("/runs", content=chunks(), headers={"Content-Type": "application/yaml"})
    assert r.status_code == 413
    assert time.monotonic() - started < 30
    server.answering()



def _slow_request(
    address: tuple[str, int], body_bytes: int, seconds: float, sent: threading.Semaphore
) -> str:
    """Send a POST whose body trickles in over ``seconds`` (``sent`` is released once its
    head is sent); what the server answered."""
    sock = socket.create_connection(address, timeout=seconds + 20)
    try:
        head = (
            f"POST /runs HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/yaml\r\n"
            f"Content-Length: {body_bytes}\r\n\r\n"
        ).encode()
        sock.sendall(head)
        sent.release()
        step = seconds / max(1, body_bytes)
        for _ in range(body_bytes):
            try:
                sock.sendall(b"#")
            except OSError:
                break  # the server gave up on us: that is an answer too
            time.sleep(step)
        try:
            return sock.recv(4096).decode("latin-1")
        except OSError as exc:
            return f"closed: {exc}"
    finally:
        sock.close()


def test_slow_bodies_do_not_stall_the_server(server: Served) -> None:
    """Fifty slowloris bodies trickling in (bounded to a few seconds): meanwhile ordinary
    requests are answered at once, and each slow one ends in an answer."""
    sent = threading.Semaphore(0)
    with ThreadPoolExecutor(max_workers=50) as pool:
        slow = [pool.submit(_slow_request, server.address, 20, 4.0, sent) for _ in range(50)]
        # Wait for the event, not a second: every slow request is open and trickling.
        for _ in slow:
            assert sent.acquire(timeout=30), "a slow request never got its head sent"
        for _ in range(5):
            started = time.monotonic()
            server.answering()
            assert time.monotonic() - started < 2, "an ordinary request waited on slow ones"
        answers = [f.result(timeout=60) for f in slow]
    count("requests", len(answers))
    assert all(a.startswith("HTTP/1.1 ") or a.startswith("closed") for a in answers), answers[:3]
    # Two hundred that never finish (half-sent headers, bodies stalled at one byte): the
    # server keeps answering while they hang, and forgets them once they are dropped.
    stalled = []
    for n in range(200):
        sock = socket.create_connection(server.address, timeout=10)
        head = f"POST /runs HTTP/1.1\r\nHost: {server.address[0]}\r\n"
        if n % 2:
            head += f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/yaml\r\n"
            head += "Content-Length: 1000\r\n\r\n#"
        sock.sendall(head.encode())
        stalled.append(sock)
    count("requests", len(stalled))
    try:
        for _ in range(5):
            started = time.monotonic()
            server.answering()
            assert time.monotonic() - started < 2, "an ordinary request waited on stalled ones"
    finally:
        for sock in stalled:
            sock.close()
    server.answering()


REDOS_JOB = SMALL_JOB.replace(b"params: {q: {type: string}}",
                              b'params: {q: {type: string, pattern: "^(a+)+$"}}').replace(
    b'args: {q: "x"}', b'args: {q: "' + b"a" * 40 + b'!"}')


def test_a_job_that_backtracks_forever_does_not_stall_the_server(server: Served) -> None:
    """A submitted job whose argument check backtracks catastrophically (ReDoS) runs
    without freezing the server: other requests are answered while it runs."""
    created = submit(server, REDOS_JOB, speed=1)
    assert created.status_code == 201, created.text
    for _ in range(3):
        started = time.monotonic()
        server.answering()
        assert time.monotonic() - started < 3, "the server froze on a regular expression"
    run_id = created.json()["run_id"]
    assert wait_for(lambda: RunStore(server.store).get(run_id).status == "finished", 30)


class _Listener(BaseHTTPRequestHandler):
    """A host a submitted job points the model at: it keeps every Authorization header."""

    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        """Record the header, answer like a provider that is down."""
        type(self).seen.append(self.headers.get("authorization", ""))
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.mark.parametrize("variable", ["SERVER_SECRET", "OPENAI_API_KEY"])
def test_a_job_cannot_send_the_servers_secrets_elsewhere(server: Served, variable: str) -> None:
    """A submitted job naming one of the server's variables as its key and its own host as
    base_url is refused: the server's secrets and key never leave for another URL."""
    listener = ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        job = (
            "scenario: exfiltrate\n"
            f"model: {{provider: openai, name: m, api_key_env: {variable},\n"
            f"        base_url: 'http://127.0.0.1:{listener.server_address[1]}/v1'}}\n"
            "job:\n  query: q\n  subtasks: [{id: a, query: q, tools: [t]}]\n"
            "tools:\n  t: {responses: [{ok: 1}]}\n"
        ).encode()
        created = submit(server, job, speed=50)
        if created.status_code == 201:
            run_id = created.json()["run_id"]
            assert wait_for(lambda: RunStore(server.store).get(run_id).status == "finished", 30)
        assert not any(SERVER_SECRET in h or "operators-own-key" in h for h in _Listener.seen)
        assert created.status_code == 422, created.text
        assert "model" in created.text
    finally:
        listener.shutdown()
        listener.server_close()
    server.answering()


def _open_and_drop(address: tuple[str, int], path: str) -> None:
    """Open an event stream, read its head, and drop the connection."""
    sock = socket.create_connection(address, timeout=10)
    try:
        sock.sendall(
            (f"GET {path} HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n"
             f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n").encode()
        )
        sock.recv(1024)
    except OSError:
        pass
    finally:
        sock.close()


def test_thousands_of_dropped_event_streams_leak_nothing(server: Served) -> None:
    """2,000 event streams opened and dropped (64 may be open at once): afterwards a new
    stream still opens and reads its events, and the server answers."""
    created = submit(server, SMALL_JOB, speed=50)
    assert created.status_code == 201, created.text
    run_id = created.json()["run_id"]
    path = f"/runs/{run_id}/events"
    with ThreadPoolExecutor(max_workers=32) as pool:
        list(pool.map(lambda _: _open_and_drop(server.address, path), range(2000)))
    count("requests", 2000)
    count("requests")

    kinds: list[str] = []

    def a_stream_opens() -> bool:
        # Until the server has noticed the last disconnects their slots may still be
        # taken (503): wait for a slot to come free, which a leak would never do.
        with server.client() as c, c.stream("GET", path) as stream:
            if stream.status_code == 503:
                return False
            assert stream.status_code == 200
            kinds[:] = [line for line in stream.iter_lines() if line.startswith("event:")]
            return True

    assert wait_for(a_stream_opens, 30), "no event stream slot came free: dropped ones leaked"
    assert kinds[-1] == "event: end"
    server.answering()


@pytest.mark.parametrize(
    "path",
    [
        "/runs/../../etc/passwd", "/runs/%2e%2e/%2e%2e/etc/passwd", "/runs/..%2f..%2fetc%2fpasswd",
        "/runs/%00", "/runs/" + "a" * 5000, "/runs/latest/report", "/runs/../runs.sqlite",
        "/runs/20260101-000000-zzzz/report?format=../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
        "//etc/passwd", "/runs/*/gaps", "/runs/1;DROP TABLE runs/report", "/static/../../../etc",
    ],
)
def test_path_tricks_reach_nothing(server: Served, path: str) -> None:
    """Traversal, encoded dots, NUL, huge or SQL-ish ids: a 4xx, never a file or a 500."""
    count("requests")
    with server.client() as c:
        r = c.get(path)
    assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:200])
    assert "root:" not in r.text and "SQLite format" not in r.text
    server.answering()


@pytest.mark.parametrize(
    "authorization",
    [
        None, b"Bearer wrong", f"Bearer {TOKEN}x".encode(), f"Bearer {TOKEN[:-1]}".encode(),
        f"Basic {TOKEN}".encode(), b"Bearer", b"Bearer " + b"x" * 60_000,
        f"Bearer {TOKEN}\u00e9".encode(), f"bearer  {TOKEN.upper()}".encode(),
    ],
    ids=["none", "wrong", "longer", "shorter", "basic", "empty", "huge", "non-ascii", "case"],
)
def test_a_wrong_token_gets_nothing(server: Served, authorization: bytes | None) -> None:
    """Without the exact token: 401 (or 4xx for an absurd header) on the API, no data."""
    headers = [] if authorization is None else [(b"authorization", authorization)]
    count("requests", 3)
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as c:
        for method, path in (("GET", "/runs"), ("POST", "/runs"), ("GET", "/openapi.json")):
            try:
                r = c.request(method, path, content=SMALL_JOB,
                              headers={"Content-Type": "application/yaml"})
            except httpx.TransportError:
                # A header past the server's limit may be answered by closing the
                # connection while the request is still being sent: refused, no data.
                assert authorization is not None and len(authorization) > 16_000
                continue
            assert 400 <= r.status_code < 500, (method, path, r.status_code)
            assert '"runs"' not in r.text and "paths" not in r.text, (method, path)
    server.answering()
