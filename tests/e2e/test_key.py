"""The model key: read from the environment, sent in the headers, and nowhere else.

``fanout run`` runs in a subprocess with the key in its environment only; the loopback
server sees it in every request's headers, and even echoes it back in error messages (as
a careless gateway might). Then no byte of the store (main file, -wal, -shm) and no line
of ``fanout trace``/``report`` holds it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.cli.main import main as fanout_main
from tests.e2e.jobs import job_text, subagent_requests
from tests.e2e.wire import KEY, KEY_ENV, Wire
from tests.loopback import LoopbackServer

# The CLI, as a subprocess.
pytestmark = pytest.mark.process

READS = [
    ("trace", "--json"),
    ("trace",),
    ("report", "--format", "json"),
    ("report", "--format", "md"),
    ("report", "--format", "html"),
    ("report",),
    ("gaps", "--json"),
    ("runs", "--json"),
]


def store_bytes(store: Path) -> dict[str, bytes]:
    """Every file of the SQLite store that exists now (main, -wal, -shm, -journal)."""
    return {p.name: p.read_bytes() for p in store.parent.glob(store.name + "*")}


def assert_no_key(where: str, text: str) -> None:
    """The key appears nowhere in ``text``, not even split across a wrapped line."""
    assert KEY not in text, where
    assert KEY not in re.sub(r"\s+", "", text), where


def test_the_key_is_sent_but_never_stored_or_shown(
    wire: Wire,
    server: LoopbackServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A real run: the key in every request header, in no store byte and no CLI output."""
    server.push(
        wire.error(500, f"upstream failed while checking key {KEY}"),
        wire.tool("web_search", {"query": "market size"}),
        wire.text("USD 9bn [market]"),
        # The lead's synthesis fails with the key in the message: its envelope is kept.
        wire.error(400, f"malformed request from key {KEY}"),
    )
    job = tmp_path / "job.yaml"
    job.write_text(job_text(wire, server), encoding="utf-8")
    assert KEY not in job.read_text(encoding="utf-8")
    store = tmp_path / "store" / "runs.sqlite"
    env = {**os.environ, KEY_ENV: KEY, "FANOUT_STORE": str(store)}
    run = subprocess.run(
        [sys.executable, "-m", "coordinator.cli", "run", str(job), "--json", "--speed", "50"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=False,
    )
    assert run.returncode == 0, run.stderr
    written = store_bytes(store)  # as the run left them (a -wal may go once read)
    report = json.loads(run.stdout)
    assert report["subtasks"][0]["status"] == "complete"
    assert report["answer"]["synthesis_error"] is not None

    assert len(server.requests) == 4
    assert all(r.api_key == KEY for r in server.requests)
    assert len(subagent_requests(wire, server.requests)) == 3
    for where, text in (("run stdout", run.stdout), ("run stderr", run.stderr)):
        assert_no_key(where, text)

    monkeypatch.setenv("FANOUT_STORE", str(store))
    monkeypatch.delenv(KEY_ENV)  # reading a run never needs the key
    capsys.readouterr()
    shown: dict[str, str] = {}
    for argv in READS:
        assert fanout_main(list(argv)) == 0, argv
        shown[" ".join(argv)] = capsys.readouterr().out
    entries = [json.loads(line) for line in shown["trace --json"].splitlines()]
    assert any(e["envelope"]["tool"] == "model" for e in entries)
    assert any("[redacted]" in (e["envelope"].get("message") or "") for e in entries)
    for command, text in shown.items():
        assert text.strip(), command
        assert_no_key(f"fanout {command}", text)

    after = store_bytes(store)
    assert "runs.sqlite" in written and "runs.sqlite" in after
    for name, data in [*written.items(), *after.items()]:
        assert KEY.encode() not in data, name
        assert KEY.encode("utf-16-le") not in data, name
