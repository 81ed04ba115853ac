"""A real ``fanout serve`` on a free 127.0.0.1 port, for the service-under-faults tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from coordinator.store.runs import RunStore
from tests.reliability.counts import count

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).with_name("data")
TOKEN = "reliability-token-5f2c9a41d0b3"
_LISTENING = re.compile(r"listening on (http://\S+?)/ ")
SMALL_JOB = b"""\
scenario: small
job:
  query: "a small job"
  subtasks:
    - id: a
      query: "one search"
      tools: [search]
      plan: [{call: search, args: {q: "x"}}]
tools:
  search:
    params: {q: {type: string}}
    latency_s: 0.5
    responses: [{ok: {results: ["r"]}}]
"""


@dataclass
class Served:
    """A running ``fanout serve``."""

    proc: subprocess.Popen[bytes]
    url: str
    store: Path
    log: Path

    def client(self, token: str | None = TOKEN, timeout: float = 30) -> httpx.Client:
        """A client with the token (or another, or none)."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) for raw sockets."""
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        return host, int(port)

    def answering(self) -> None:
        """The server still answers an ordinary request, promptly, and its store reads."""
        count("requests")
        with self.client(timeout=10) as c:
            r = c.get("/runs")
        assert r.status_code == 200, r.text
        RunStore(self.store).runs()


SERVER_SECRET = "server-side-secret-that-no-job-may-read"


def serve(tmp: Path, *args: str, store: Path | None = None, name: str = "serve") -> Served:
    """Start ``fanout serve --port 0`` with the token; wait until it answers.

    Its environment holds a secret of its own and a model key, as a real one would.
    """
    store = store or tmp / "runs.sqlite"
    log = tmp / f"{name}.log"
    env = {**os.environ, "FANOUT_TOKEN": TOKEN, "PYTHONPATH": str(ROOT),
           "SERVER_SECRET": SERVER_SECRET, "OPENAI_API_KEY": "sk-the-operators-own-key"}
    env.pop("FANOUT_STORE", None)
    with open(log, "ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "coordinator.cli", "serve", "--port", "0", "--store",
             str(store), "--log-level", "warning", *args],
            stdout=subprocess.DEVNULL, stderr=sink, env=env, cwd=ROOT,
        )
    end = time.monotonic() + 90
    offset = log.stat().st_size if log.exists() else 0
    while time.monotonic() < end:
        text = log.read_bytes()[offset:].decode("utf-8", "replace")
        match = _LISTENING.search(text)
        if match:
            served = Served(proc, match.group(1), store, log)
            try:
                served.answering()
                return served
            except (httpx.HTTPError, AssertionError):
                pass
        assert proc.poll() is None, f"fanout serve exited:\n{text}"
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"fanout serve did not start:\n{log.read_text(errors='replace')}")


def stop(served: Served, sig: int = signal.SIGTERM) -> int:
    """Signal the server and wait for it."""
    if served.proc.poll() is None:
        served.proc.send_signal(sig)
    return served.proc.wait(timeout=60)


def submit(served: Served, body: bytes, content_type: str = "application/yaml",
           **params: Any) -> httpx.Response:
    """POST /runs."""
    count("requests")
    with served.client() as c:
        return c.post("/runs", content=body, params=params,
                      headers={"Content-Type": content_type})
