"""The service holds load: a bounded queue, a connection cap, head and body deadlines."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from coordinator.store.runs import RunStore
from tests.coordinator.serve.conftest import SLOW, Server, launch

# A real fanout serve, as a subprocess.
pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    """Two servers: one with a queue of 1 and 1 s deadlines, one with 3 connections."""
    started = {
        "queue": launch(tmp_path_factory.mktemp("queue"), "--max-runs", "1", "--max-queued",
                        "1", "--header-timeout", "1", "--body-timeout", "1"),
        "cap": launch(tmp_path_factory.mktemp("cap"), "--max-connections", "3"),
    }
    servers = {name: one.ready() for name, one in started.items()}
    yield servers
    for srv in servers.values():
        assert srv.stop() == 0, srv.log.read_text()


def _address(server: Server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _answer(sock: socket.socket, timeout: float = 10) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_a_full_queue_is_503_with_retry_after_and_records_nothing(
    limited: dict[str, Server],
) -> None:
    """One run at work, one waiting: the third submission is refused, nothing recorded."""
    server = limited["queue"]
    running = server.submit(SLOW, speed=1)["run_id"]
    waiting = server.submit(SLOW, speed=1)
    assert waiting["status"] == "queued"
    before = len(RunStore(Path(server.store)).runs())
    with server.client() as c:
        refused = c.post("/runs", content=SLOW.read_bytes(),
                         headers={"Content-Type": "application/yaml"})
        after = len(RunStore(Path(server.store)).runs())
        for run_id in (waiting["run_id"], running):
            c.post(f"/runs/{run_id}/cancel")
    assert refused.status_code == 503, refused.text
    assert refused.headers["Retry-After"] == "5"
    assert "waiting for a slot" in refused.json()["detail"]
    assert after == before


def test_a_head_that_never_ends_gets_408_and_the_connection_closes(
    limited: dict[str, Server],
) -> None:
    """A client that sends half a request head is cut after the header deadline."""
    began = time.monotonic()
    with socket.create_connection(_address(limited["queue"])) as sock:
        sock.sendall(b"GET /runs HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert 0.9 <= time.monotonic() - began < 8


def test_a_silent_connection_is_closed_after_the_header_deadline(
    limited: dict[str, Server],
) -> None:
    """A connection that sends nothing at all does not hold a slot for ever."""
    with socket.create_connection(_address(limited["queue"])) as sock:
        assert _answer(sock).startswith(b"HTTP/1.1 408")


def test_a_keep_alive_request_whose_head_never_ends_gets_408(
    limited: dict[str, Server],
) -> None:
    """After one answered request, the next head on the connection has its deadline too."""
    server = limited["queue"]
    with socket.create_connection(_address(server)) as sock:
        sock.sendall(b"GET /runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     + str(server.token).encode() + b"\r\n\r\n")
        first = b""
        sock.settimeout(10)
        while b"\r\n\r\n" not in first:  # the first answer's head, at least
            first += sock.recv(4096)
        assert first.startswith(b"HTTP/1.1 200"), first
        sock.sendall(b"GET /runs HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        rest = _answer(sock)
    assert b"HTTP/1.1 408" in first + rest


@pytest.mark.parametrize(("path", "media", "start"), [
    pytest.param("/runs", b"application/yaml", b"scenario: x\n", id="runs"),
    pytest.param("/ask", b"application/json", b'{"question": ', id="ask"),
])
def test_a_body_that_trickles_gets_408(
    limited: dict[str, Server], path: str, media: bytes, start: bytes
) -> None:
    """A body promised and not sent within the body deadline is refused with 408, on
    POST /ask as on POST /runs (FastAPI read an ask's body for as long as it took)."""
    server = limited["queue"]
    with socket.create_connection(_address(server)) as sock:
        sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: "
                     b"Bearer " + str(server.token).encode() + b"\r\nContent-Type: " + media
                     + b"\r\nContent-Length: 1000\r\n\r\n" + start)
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"POST " + path.encode() + b": the body did not arrive within 1 s" in answer


def test_past_the_connection_cap_requests_get_503(limited: dict[str, Server]) -> None:
    """With the cap's connections open, one more request is answered 503, not queued."""
    server = limited["cap"]
    idle = [socket.create_connection(_address(server)) for _ in range(3)]
    try:
        # Until the server has accepted all three a request may still get through.
        refused = httpx.get(f"{server.url}/runs", timeout=10,
                            headers={"Authorization": f"Bearer {server.token}"})
        deadline = time.monotonic() + 10
        while refused.status_code != 503 and time.monotonic() < deadline:
            refused = httpx.get(f"{server.url}/runs", timeout=10,
                                headers={"Authorization": f"Bearer {server.token}"})
    finally:
        for sock in idle:
            sock.close()
    assert refused.status_code == 503
    with server.client() as c:  # and once they are gone, it serves again
        deadline = time.monotonic() + 10
        while (status := c.get("/runs").status_code) == 503 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert status == 200
