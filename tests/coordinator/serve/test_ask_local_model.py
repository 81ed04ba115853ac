"""`fanout serve --model openai:NAME --base-url URL`: the operator's local model answers
POST /ask, with no key asked for, and jobs still never name an endpoint (docs/design.md §7, §8)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tests.coordinator.serve.conftest import start_server
from tests.loopback import OpenAIServer, Reply
from tests.loopback.openai_server import completion

# A real fanout serve, as a subprocess.
pytestmark = pytest.mark.process


def test_post_ask_runs_on_the_operators_local_model(tmp_path: Path) -> None:
    """POST /ask with just the question on a server started with a local --base-url and a
    folder: 201 (no key is asked for), the chat requests reach that endpoint, and the run
    finishes with an answer and sources from the served folder."""
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "sodium.md").write_text(
        "# Sodium-ion in the cold\n\nSodium-ion cells keep 90 percent of their capacity at "
        "-20 C.\n")
    with OpenAIServer(owned_by="me") as model:
        srv = start_server(tmp_path, "--docs", str(papers), "--model", "openai:gemma",
                           "--base-url", model.base_url)
        try:
            with srv.client() as c:
                r = c.post("/ask", json={"question": "How do sodium-ion cells do in the cold?"})
                assert r.status_code == 201, r.text
                run_id = r.json()["run_id"]
                srv.wait_status(run_id, "finished", timeout=60)
                report = c.get(f"/runs/{run_id}/report?format=json").json()
                submitted = c.post("/runs", content=yaml.safe_dump({
                    "scenario": "names-an-endpoint", "job": {"query": "q"},
                    "model": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1"},
                }), headers={"content-type": "application/yaml"})
        finally:
            assert srv.stop() == 0, srv.log.read_text()
        chats = [r for r in model.requests if r.method == "POST"]
    assert chats, "the operator's endpoint was never asked"
    assert report["coverage"] > 0
    assert any(s["path"] == "sodium.md" for s in report["answer"]["sources"])
    assert submitted.status_code == 422 and "base_url" in submitted.text


def test_a_cancel_reaches_a_lead_that_is_still_planning(tmp_path: Path) -> None:
    """The lead's first model call (its plan) hangs on the operator's endpoint; POST
    /runs/{id}/cancel reaches it: the run ends at once with its report, the lead and the
    question it had not planned both gaps with trigger cancelled, and no other call made."""
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "sodium.md").write_text("# Sodium-ion\n\nSodium-ion cells keep 90 percent.\n")
    with OpenAIServer(owned_by="me") as model:
        model.push(Reply(200, completion("too late"), delay_s=3600))  # until the cancel
        srv = start_server(tmp_path, "--docs", str(papers), "--model", "openai:gemma",
                           "--base-url", model.base_url)
        try:
            with srv.client() as c:
                r = c.post("/ask", json={"question": "How do sodium-ion cells do?"})
                assert r.status_code == 201, r.text
                run_id = r.json()["run_id"]
                end = time.monotonic() + 30
                while not [q for q in model.requests if q.method == "POST"]:  # the plan asked
                    assert time.monotonic() < end, "the lead never asked its model"
                    time.sleep(0.02)
                cancelled = c.post(f"/runs/{run_id}/cancel")
                assert cancelled.status_code in (200, 202), cancelled.text
                srv.wait_status(run_id, "finished", timeout=30)
                report = c.get(f"/runs/{run_id}/report").json()
        finally:
            assert srv.stop() == 0, srv.log.read_text()
        chats = [q for q in model.requests if q.method == "POST"]
    assert [(g["subtask_id"], g["trigger"]) for g in report["gaps"]] == [
        ("lead", "cancelled"), ("question", "cancelled")]
    assert len(chats) == 1  # the plan's call only: no subagent, no synthesis
