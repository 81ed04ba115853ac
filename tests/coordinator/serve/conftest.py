"""A real ``fanout serve`` in a subprocess on a free loopback port, and clients for it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).resolve().parent / "data"
SLOW = DATA / "slow.yaml"
HOSTILE = DATA / "hostile.yaml"
TOKEN = "test-token-0123456789abcdef"
_LISTENING = re.compile(r"listening on (http://\S+?)/ ")
# A speed at which SLOW's 20-virtual-second calls take 20,000 real seconds: a run at work
# until the test cancels it. A test waits for that cancel (an event), never on a guess at
# how long its own steps take (at speed 40 a run ended before a loaded machine looked).
HELD = 0.001


@dataclass
class Server:
    """A ``fanout serve`` process and what a test needs to talk to it."""

    proc: subprocess.Popen[bytes]
    url: str
    store: Path | str
    log: Path
    token: str | None
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, token: str | None = "default", **kw: Any) -> httpx.Client:
        """An httpx client for the server, with the server's token unless told otherwise."""
        use = self.token if token == "default" else token
        headers = {"Authorization": f"Bearer {use}"} if use else {}
        client = httpx.Client(base_url=self.url, headers=headers, timeout=30, **kw)
        self.clients.append(client)
        return client

    def submit(self, path: Path, *, speed: float, **headers: str) -> dict[str, Any]:
        """POST a job file; the 201 body."""
        with self.client() as c:
            r = c.post("/runs", params={"speed": speed}, content=path.read_bytes(),
                       headers={"Content-Type": "application/yaml", **headers})
        assert r.status_code == 201, r.text
        body: dict[str, Any] = r.json()
        return body

    @contextmanager
    def slots_held(self, slots: int) -> Iterator[list[str]]:
        """``slots`` runs at work until the block ends, then cancelled and finished: a run
        submitted inside waits, queued, for as long as the test needs it to."""
        held = [self.submit(SLOW, speed=HELD)["run_id"] for _ in range(slots)]
        try:
            yield held
        finally:
            with self.client() as c:
                for run_id in held:
                    c.post(f"/runs/{run_id}/cancel")
            for run_id in held:
                self.wait_status(run_id, "finished")

    def wait_status(self, run_id: str, status: str, timeout: float = 30) -> dict[str, Any]:
        """Poll ``GET /runs/{id}`` until the run has ``status``; its body."""
        end = time.monotonic() + timeout
        with self.client() as c:
            while True:
                body: dict[str, Any] = c.get(f"/runs/{run_id}").json()
                if body["status"] == status:
                    return body
                assert time.monotonic() < end, f"run {run_id} stayed {body['status']}"
                time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Signal the server and wait for it to exit; its exit code."""
        for c in self.clients:
            c.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


@dataclass
class Launched:
    """A ``fanout serve`` process that may still be starting."""

    proc: subprocess.Popen[bytes]
    store: Path | str
    log: Path
    token: str | None

    def ready(self, timeout: float = 60) -> Server:
        """Wait until the application has started (its lifespan ran); the server."""
        end = time.monotonic() + timeout
        url = None
        while time.monotonic() < end:
            text = self.log.read_text(errors="replace")
            if url is None and (m := _LISTENING.search(text)):
                url = m.group(1)
            if url is not None and "Application startup complete" in text.split(url, 1)[-1]:
                return Server(self.proc, url, self.store, self.log, self.token)
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.proc.kill()
        self.proc.wait()
        pytest.fail(f"fanout serve did not start:\n{self.log.read_text(errors='replace')}")


def launch(
    tmp: Path, *args: str, token: str | None = TOKEN, store: Path | str | None = None,
    name: str = "serve", cwd: Path = ROOT, env_extra: dict[str, str] | None = None,
) -> Launched:
    """Start ``fanout serve --port 0`` (a free loopback port) without waiting for it."""
    store = store or tmp / "runs.sqlite"
    log = tmp / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("FANOUT_TOKEN", "FANOUT_STORE")}
    env.update(env_extra or {})
    if token is not None:
        env["FANOUT_TOKEN"] = token
    with open(log, "ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "coordinator.cli", "serve", "--port", "0",
             "--store", str(store), *args],
            stdout=subprocess.DEVNULL, stderr=sink, env=env, cwd=cwd,
        )
    return Launched(proc, store, log, token)


def start_server(
    tmp: Path, *args: str, token: str | None = TOKEN, store: Path | str | None = None,
    name: str = "serve", cwd: Path = ROOT, env_extra: dict[str, str] | None = None,
) -> Server:
    """Start ``fanout serve`` and wait until its application has started."""
    return launch(tmp, *args, token=token, store=store, name=name, cwd=cwd,
                  env_extra=env_extra).ready()


@pytest.fixture(scope="package")
def _launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Launched]]:
    """Both package servers, started side by side (each takes seconds to import)."""
    launched = {
        # A token, 2 runs at once, pings every 0.2 s.
        "server": launch(tmp_path_factory.mktemp("served"), "--max-runs", "2",
                         "--ping-interval", "0.2"),
        # No token (loopback only), 1 run at once, at most 2 event streams.
        "open": launch(tmp_path_factory.mktemp("open"), "--max-runs", "1",
                       "--max-streams", "2", "--ping-interval", "0.2", token=None),
    }
    yield launched
    for one in launched.values():  # a server no selected test used
        if one.proc.poll() is None:
            one.proc.terminate()
        one.proc.wait(timeout=30)


@pytest.fixture(scope="package")
def server(_launched: dict[str, Launched]) -> Iterator[Server]:
    """One served store for the package: a token, 2 runs at once, pings every 0.2 s."""
    srv = _launched["server"].ready()
    yield srv
    assert srv.stop() == 0, srv.log.read_text()


@pytest.fixture(scope="package")
def open_server(_launched: dict[str, Launched]) -> Iterator[Server]:
    """A token-less loopback server: 1 run at once, at most 2 event streams."""
    srv = _launched["open"].ready()
    yield srv
    assert srv.stop() == 0, srv.log.read_text()


def read_stream(
    client: httpx.Client, path: str, *, headers: dict[str, str] | None = None,
    stop_after: int | None = None, timeout: float = 30,
    into: list[dict[str, Any]] | None = None, tolerate_disconnect: bool = False,
    until: Callable[[list[dict[str, Any]]], bool] | None = None, pings: int | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Read an SSE stream: its messages ({id, event, data}) and its comment lines.

    Stops at ``end`` (or after ``stop_after`` messages with an id, once ``until`` holds
    for the messages so far, or after ``pings`` ping comments: how a test waits for an
    event). ``into`` receives the messages as they arrive (another thread may watch it);
    with ``tolerate_disconnect`` a connection the server drops ends the read instead of
    raising.
    """
    try:
        return _read_stream(client, path, headers, stop_after, timeout, into, until, pings)
    except httpx.TransportError:
        if not tolerate_disconnect:
            raise
        return (into if into is not None else []), []


def _read_stream(
    client: httpx.Client, path: str, headers: dict[str, str] | None,
    stop_after: int | None, timeout: float, into: list[dict[str, Any]] | None,
    until: Callable[[list[dict[str, Any]]], bool] | None = None, pings: int | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    import json

    messages: list[dict[str, Any]] = into if into is not None else []
    comments: list[str] = []
    current: dict[str, Any] = {}
    with client.stream("GET", path, headers=headers or {}, timeout=timeout) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith(":"):
                comments.append(line)
                if pings is not None and comments.count(": ping") >= pings:
                    break
            elif line == "":
                if "event" in current:
                    current["data"] = json.loads(current["data"])
                    messages.append(current)
                    if current["event"] == "end":
                        break
                    if stop_after is not None and len(messages) >= stop_after:
                        break
                    if until is not None and until(messages):
                        break
                current = {}
            else:
                key, _, value = line.partition(": ")
                current[key] = value
    return messages, comments


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    """A fresh page in headless chromium, failing the test on any script error."""
    from tests.chromium import chromium as find_chromium

    chromium = find_chromium()
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium,
                                     args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        tab = context.new_page()

        def on_dialog(dialog: Any) -> None:
            errors.append(f"dialog: {dialog.message}")  # an alert() means a script ran
            dialog.dismiss()

        def on_console(message: Any) -> None:
            if "Content Security Policy" in message.text:
                errors.append(message.text)

        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.on("dialog", on_dialog)
        tab.on("console", on_console)
        yield tab
        context.close()
        browser.close()
    assert errors == [], errors
