"""`fanout ask` as a newcomer meets it (docs/design.md §7): no key and no model gives a cited
retrieval-only answer; an endpoint's mistakes are one line naming the flag; a failed run
exits 3."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.loopback import OpenAIServer

# The CLI, as a subprocess.
pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "tests" / "live" / "data" / "docs"
FAST_MODEL = """\
model:
  provider: openai
  timeout_s: 2
  retry: {max_attempts: 2, initial_backoff_s: 0.01, multiplier: 2, max_backoff_s: 0.02,
          jitter: none}
"""


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    keyless = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                            "FANOUT_SEARCH")}
    env = {**keyless, "FANOUT_STORE": str(tmp_path / "runs.sqlite"), "NO_COLOR": "1",
           "COLUMNS": "100"}
    return subprocess.run(
        [sys.executable, "-m", "coordinator.cli", *args], capture_output=True, text=True,
        env=env, cwd=tmp_path, timeout=120, check=False,
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


def test_no_model_and_no_key_gives_a_cited_retrieval_only_answer(tmp_path: Path) -> None:
    """Without --model or a key, --docs answers with the best passages, each cited [n] to a
    file of the folder, marked extractive; the run is covered by the search's evidence."""
    done = _cli(tmp_path, "ask", "How do sodium-ion cells do in the cold?", "--docs",
                str(DOCS), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "complete" and report["coverage"] == 1.0
    answer = report["answer"]
    assert answer["kind"] == "extractive" and answer["text"]
    files = {p.name for p in DOCS.iterdir()}
    assert answer["sources"] and {s["path"] for s in answer["sources"]} <= files
    assert all(f"[{s['n']}]" in answer["text"] for s in answer["sources"])
    assert "sodium-ion-cold.md" in {s["path"] for s in answer["sources"]}


def test_the_people_view_of_a_retrieval_only_answer_says_what_it_is(tmp_path: Path) -> None:
    """For people, the answer says no model wrote it and how to give one."""
    done = _cli(tmp_path, "ask", "sodium-ion cold", "--docs", str(DOCS))
    assert done.returncode == 0, done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert "retrieval-only" in said and "--model PROVIDER:NAME" in said
    assert "extractive" in said


def test_an_unreachable_endpoint_is_one_line_naming_the_url(tmp_path: Path) -> None:
    """A server that is not there: after the retry policy, one line naming the URL, exit 3,
    no Answer box and nothing recorded."""
    (tmp_path / "tools.yaml").write_text(FAST_MODEL)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    done = _cli(tmp_path, "ask", "q?", "--docs", str(DOCS), "--tools", "tools.yaml",
                "--model", "openai:gemma", "--base-url", url)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --base-url: cannot reach")
    assert url in lines[0] and "2 attempts" in lines[0]
    assert "Answer" not in done.stdout and "Traceback" not in done.stderr
    assert not (tmp_path / "runs.sqlite").exists()


def test_a_base_url_without_v1_is_exit_2_saying_to_add_it(tmp_path: Path) -> None:
    """A server that serves /v1/models but not /models: the base URL lacks its /v1."""
    (tmp_path / "tools.yaml").write_text(FAST_MODEL)
    with OpenAIServer(owned_by="me") as server:
        done = _cli(tmp_path, "ask", "q?", "--docs", str(DOCS), "--tools", "tools.yaml",
                    "--model", "openai:gemma", "--base-url", server.origin)
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert said.startswith("error: --base-url:") and f"use {server.origin}/v1" in said
    assert not [r for r in server.requests if r.method == "POST"]  # no chat request made


def test_a_failed_run_exits_3_and_still_prints_its_report(tmp_path: Path) -> None:
    """`fanout run` of a job whose outcome is failed exits 3; --json prints the report."""
    done = _cli(tmp_path, "run", str(ROOT / "scenarios" / "retry_time_budget.yaml"),
                "--json", "--speed", "1000")
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["outcome"] == "failed"
