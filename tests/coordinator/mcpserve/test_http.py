"""`fanout mcp --http` through the official MCP client: the bearer token as `fanout serve`
takes it, ask with progress over streamable HTTP, cancellation, the loopback rule."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.coordinator.mcpserve.conftest import (
    HALF_DONE_JOB,
    TOKEN,
    HttpServer,
    environ,
    make_papers,
    mcp_command,
    over_http,
    over_stdio,
    start_http,
    text_of,
)

# Each test starts `fanout mcp` (stdio or HTTP) as a process of its own (tests/tiers.py).
pytestmark = [pytest.mark.anyio, pytest.mark.process]
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """``fanout mcp --http`` with a token and a served folder, for the module."""
    tmp = tmp_path_factory.mktemp("mcp-http")
    server = start_http(tmp, "--docs", str(make_papers(tmp)))
    yield server
    assert server.stop() == 0, "".join(server.log)


def test_a_request_without_the_token_is_401(guarded: HttpServer) -> None:
    """No token, another token, another scheme: 401 with WWW-Authenticate, as serve says."""
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        r = httpx.post(guarded.url, json=INITIALIZE, headers={**ACCEPT, **headers}, timeout=30)
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"] == 'Bearer realm="fanout"'
        assert "bearer token" in r.json()["detail"].lower()


async def test_ask_over_http_with_the_token_answers_and_reports_progress(
    guarded: HttpServer,
) -> None:
    """With the token: the tools are listed, and ask answers with its sources while a
    progress notification names the run and another marks its subtask's end."""
    heard: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    with anyio.fail_after(90):
        async with over_http(guarded.url) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            result = await session.call_tool("ask", {"question": "tandem cells efficiency"},
                                             progress_callback=progress)
            bad = await session.call_tool("ask", {"question": "q", "max_subtasks": 0})
    assert names == {"ask", "run_job", "get_report", "list_runs", "cancel_run",
                     "decide", "review_plan"}
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert data is not None and data["status"] == "finished"
    assert "perovskite.md" in {s["path"] for s in data["sources"]}
    assert heard == [f"run {data['run_id']} started", "1/1 subtasks, coverage 1"]
    assert bad.is_error and "max_subtasks" in text_of(bad)


async def test_a_cancelled_call_over_http_keeps_the_partial_report(guarded: HttpServer) -> None:
    """A client that gives up mid-run over HTTP cancels the run; the stored report keeps
    the finished subtask and a cancelled gap for the other."""
    run_ids: list[str] = []
    with anyio.fail_after(90):
        async with over_http(guarded.url) as session:
            with anyio.CancelScope() as scope:

                async def progress(progress: float, total: float | None,
                                   message: str | None) -> None:
                    if message and message.startswith("run "):
                        run_ids.append(message.split()[1])
                    elif message and message.startswith("1/2 subtasks"):
                        scope.cancel()

                await session.call_tool("run_job", {"job": HALF_DONE_JOB},
                                        progress_callback=progress)
            assert scope.cancelled_caught and run_ids
            report: dict[str, Any] = {}
            for _ in range(10_000):  # bounded by fail_after: the run winds down on its own
                got = await session.call_tool("get_report", {"run_id": run_ids[0],
                                                             "format": "json"})
                report = json.loads(text_of(got))
                if report["status"] == "finished":
                    break
                await anyio.sleep(0.1)
    assert report["status"] == "finished"
    assert [(g["subtask_id"], g["trigger"]) for g in report["gaps"]] == [("stuck", "cancelled")]


async def test_without_a_token_it_serves_loopback_names_only(tmp_path: Path) -> None:
    """Token-less on 127.0.0.1: the client needs no token, and a request naming another
    host (DNS rebinding) is refused."""
    server = start_http(tmp_path, token=None)
    try:
        with anyio.fail_after(60):
            async with over_http(server.url, token=None) as session:
                runs = await session.call_tool("list_runs", {})
        assert not runs.is_error and (runs.structured_content or {})["runs"] == []
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(server.url, json=INITIALIZE,
                                headers={**ACCEPT, "Host": "evil.example:80"})
        assert r.status_code in (400, 403, 421), r.text
    finally:
        assert server.stop() == 0, "".join(server.log)


def test_listening_beyond_loopback_without_a_token_is_refused(tmp_path: Path) -> None:
    """--http 0.0.0.0:PORT without a token exits 2 saying why, as serve does."""
    done = subprocess.run(mcp_command(tmp_path, "--http", "0.0.0.0:0"), env=environ(tmp_path),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "without a token" in done.stderr and "Traceback" not in done.stderr


def _raw(url: str, request: bytes) -> bytes:
    """Send ``request`` as is and read the answer until the server closes (≤ 30 s)."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_body_too_large_or_too_slow_and_a_head_too_slow_are_refused(tmp_path: Path) -> None:
    """The limits of serve: a body declared over the limit is 413, a body that stalls is 408 after
    --body-timeout, a head that stalls is 408 after --header-timeout."""
    server = start_http(tmp_path, "--body-timeout", "0.5", "--header-timeout", "0.5")
    try:
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, "
                "text/event-stream\r\n")
        too_large = _raw(server.url, (head + f"Content-Length: {5 << 20}\r\n\r\n").encode()
                         + b"x" * 1000)
        stalled = _raw(server.url, (head + "Content-Length: 100\r\n\r\n").encode() + b"{")
        no_head = _raw(server.url, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    finally:
        assert server.stop() == 0, "".join(server.log)
    assert too_large.startswith(b"HTTP/1.1 413"), too_large[:200]
    assert stalled.startswith(b"HTTP/1.1 408"), stalled[:200]
    assert no_head.startswith(b"HTTP/1.1 408"), no_head[:200]


async def test_sigterm_exits_0_and_keeps_the_partial_reports_of_its_runs(tmp_path: Path) -> None:
    """An operator's SIGTERM: the server exits 0, and a run it was executing is cancelled
    with its partial report recorded in the store."""
    server = start_http(tmp_path)
    try:
        with anyio.fail_after(60):
            async with over_http(server.url) as session:
                started = await session.call_tool("run_job", {"job": HALF_DONE_JOB,
                                                              "wait_s": 0})
    finally:
        assert server.stop() == 0, "".join(server.log)
    run_id = (started.structured_content or {})["run_id"]
    with anyio.fail_after(60):
        async with over_stdio(tmp_path) as session:
            got = await session.call_tool("get_report", {"run_id": run_id, "format": "json"})
    report = json.loads(text_of(got))
    assert report["status"] == "finished"
    # The quick subtask may or may not have ended before the cut: the stuck one had not.
    cut = {g["subtask_id"]: g["trigger"] for g in report["gaps"]}
    assert cut["stuck"] == "cancelled" and set(cut.values()) == {"cancelled"}
