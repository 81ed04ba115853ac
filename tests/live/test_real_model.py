"""fanout on a real model on a real server (llama-cpp-python, Gemma 3 270M, CPU).

The model is not scripted, so these tests assert invariants, never outputs: the run ends
(exit 0, no traceback), the server accepted every request fanout sent, every subtask has
one status, coverage comes only from a tool's evidence, every call the model got wrong
went back to it as a validation envelope, a failed plan ran ``question``, and the run's
recording replays offline to the same statuses, byte for byte twice.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.live.conftest import LiveServer

DATA = Path(__file__).parent / "data"
STATUSES = {"complete", "empty", "partial", "gap"}
RUN_TIMEOUT_S = 1800


# A real model on 2 CPU cores: minutes, not the suite's 120 s per test.
pytestmark = pytest.mark.timeout(3 * RUN_TIMEOUT_S)


def fanout(
    *args: str, cwd: Path, timeout: float = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would (its own process), with a key for a local server."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-local-llama", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "coordinator.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )


def trace(store: Path, cwd: Path) -> list[dict[str, Any]]:
    """Every attempt of the latest run, model calls included."""
    done = fanout("trace", "latest", "--json", "--store", str(store), cwd=cwd, timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def check_invariants(report: dict[str, Any], attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """The invariants a real, unscripted model run must keep; returns its figures."""
    ids = [s["id"] for s in report["subtasks"]]
    assert len(ids) == len(set(ids)), "one row per subtask"
    assert all(s["status"] in STATUSES for s in report["subtasks"])
    gaps = {g["subtask_id"]: g for g in report["gaps"]}
    for row in report["subtasks"]:
        evidence = [
            a for a in attempts
            if a["subtask_id"] == row["id"] and a["tool"] != "model" and a["envelope"]["ok"]
        ]
        if row["status"] in ("complete", "empty") and row["id"] != "lead":
            # Coverage is evidence: an ok envelope of a real tool, never the model's words.
            assert evidence, f"{row['id']} is {row['status']} without a tool's evidence"
        if row["status"] in ("partial", "gap"):
            assert row["id"] in gaps, f"{row['id']} is {row['status']} without a gap"
    refused = [
        a for a in attempts
        if a["tool"] != "model" and a["envelope"].get("errorCategory") == "validation"
    ]
    for a in refused:
        # Every call the model got wrong was answered with a validation envelope that
        # names what to fix; the model was asked again, or the subtask ended on it.
        assert a["envelope"]["field"], a
        later = [
            b for b in attempts
            if b["subtask_id"] == a["subtask_id"] and b["tool"] == "model" and b["at"] >= a["at"]
        ]
        assert later or a["subtask_id"] in gaps, a
    if "lead" in gaps and gaps["lead"]["trigger"] != "answer_rejected":
        # A failed plan degrades: the question ran with every tool. (A lead gap of a
        # rejected answer is the synthesis's: the plan may have been the job's own.)
        question = [s for s in report["subtasks"] if s["id"] == "question"]
        assert question and question[0]["attempts"] >= 1
    model_calls = [a for a in attempts if a["tool"] == "model"]
    return {
        "outcome": report["outcome"],
        "coverage": report["coverage"],
        "statuses": {s["id"]: s["status"] for s in report["subtasks"]},
        "triggers": {g["subtask_id"]: g["trigger"] for g in report["gaps"]},
        "model_calls": len(model_calls),
        "model_failures": dict(Counter(
            a["envelope"].get("error_type") for a in model_calls if not a["envelope"]["ok"]
        )),
        "tool_calls": len(attempts) - len(model_calls),
        "validation_envelopes_sent_back": len(refused),
    }


def accepted_everything(server: LiveServer, before: int) -> int:
    """The server accepted every chat request since ``before`` but, at most, the first
    refusal for length that taught fanout its window (docs/design.md §7): nothing after it."""
    lines = server.accesses()[before:]
    refused = server.refused(before)
    assert len(refused) <= 1 and all('" 400' in line for line in refused), refused
    if refused:
        assert refused[0] == next(line for line in lines if '" 200' not in line)
    return len(lines)


def keep_figures(name: str, figures: dict[str, Any]) -> None:
    """Append the run's figures where CI collects them (FANOUT_LIVE_FIGURES)."""
    target = os.environ.get("FANOUT_LIVE_FIGURES")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps({"test": name, **figures}) + "\n")


def replays_identically(recording: Path, live: dict[str, Any], cwd: Path) -> None:
    """The recording replays offline twice, byte for byte, with the live statuses.

    ``FANOUT_LIVE_KEEP`` names a folder to keep the recording in (how
    ``scenarios/recorded/gemma_*.yaml`` were made).
    """
    keep = os.environ.get("FANOUT_LIVE_KEEP")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{cwd.name}.yaml").write_text(recording.read_text())
    runs = [fanout("replay", str(recording), "--json", cwd=cwd, timeout=300) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stdout + done.stderr
    assert runs[0].stdout == runs[1].stdout
    replayed = json.loads(runs[0].stdout)["scenarios"][0]["report"]
    assert {s["id"]: s["status"] for s in replayed["subtasks"]} == {
        s["id"]: s["status"] for s in live["subtasks"]
    }


DOCS = DATA / "docs"
QUESTION = "How do sodium-ion cells do in the cold?"


def check_answer(report: dict[str, Any], *, useful: bool = True) -> dict[str, Any]:
    """A useful answer (docs/design.md §7): coverage from the folder's files, an answer that passes
    checks 1-3 or is the extractive fallback, every source a file of the folder.
    ``useful=False`` keeps only what holds whatever the model did: no source outside the
    folder, and an answer shown only when it passed its checks."""
    answer = report["answer"]
    files = {p.name for p in DOCS.iterdir()}
    paths = {s.get("path") for s in answer.get("sources") or []}
    assert paths <= files, answer.get("sources")
    if useful:
        assert report["coverage"] > 0, report["gaps"]
        assert paths & files, answer.get("sources")
    checks = answer.get("checks")
    if answer.get("kind") is None:
        assert not useful and not answer.get("text"), answer
    elif answer["kind"] == "model":
        assert checks["not_prompt"]["ok"] and checks["complete"]["ok"], checks
        assert checks["citations"]["ok"], checks
    else:
        assert answer["kind"] == "extractive" and answer["text"], answer
    return {"kind": answer.get("kind"), "checks": {k: v["ok"] for k, v in (checks or {}).items()
                                               if isinstance(v, dict)},
            "sources": sorted(p for p in paths if p)}


def test_ask_on_a_folder_with_default_options_answers(
    live_fc_server: LiveServer, tmp_path: Path
) -> None:
    """`fanout ask --docs` with default options on Gemma (chatml-function-calling) reaches
    coverage, cites the folder's files, and refuses nothing after learning its window."""
    store = tmp_path / "runs.sqlite"
    before = len(live_fc_server.accesses())
    started = time.monotonic()
    done = fanout(
        "ask", QUESTION, "--docs", str(DOCS), "--model", "openai:gemma",
        "--base-url", live_fc_server.base_url, "--json", "--store", str(store),
        cwd=tmp_path, timeout=900,
    )
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    requests = accepted_everything(live_fc_server, before)
    figures = check_invariants(report, trace(store, tmp_path))
    answer = check_answer(report)
    keep_figures("ask --docs (chatml-function-calling)", {
        **figures, **answer, "requests": requests, "wall_s": round(wall, 1),
        "refused": len(live_fc_server.refused(before)),
    })
    recording = tmp_path / "recorded.yaml"
    recorded = fanout("record", "latest", "--output", str(recording), "--store", str(store),
                      cwd=tmp_path, timeout=120)
    assert recorded.returncode == 0, recorded.stderr
    replays_identically(recording, report, tmp_path)
    # The target is under 300 s on 2 idle cores (the figure is kept above, for CI's log);
    # asserted with a margin, since CI may run beside other work (docs/design.md §15).
    assert wall < 600, f"{wall:.0f}s: the target is under 300 s on 2 idle cores"


def test_ask_on_a_folder_under_gemmas_own_template(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """Under `--chat_format gemma` the model calls no tool: search first still gives each
    subtask evidence, and the answer is the model's only when it passes its checks."""
    store = tmp_path / "runs.sqlite"
    before = len(live_server.accesses())
    started = time.monotonic()
    done = fanout(
        "ask", QUESTION, "--docs", str(DOCS), "--model", "openai:gemma",
        "--base-url", live_server.base_url, "--json", "--store", str(store),
        cwd=tmp_path, timeout=900,
    )
    wall = time.monotonic() - started
    assert done.returncode in (0, 3), done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    requests = accepted_everything(live_server, before)
    figures = check_invariants(report, trace(store, tmp_path))
    # The model under this template only echoes its instructions until its token limit:
    # that turn is cut off (incomplete_data), so coverage may be 0, honestly.
    answer = check_answer(report, useful=False)
    keep_figures("ask --docs (gemma)", {
        **figures, **answer, "requests": requests, "wall_s": round(wall, 1),
        "refused": len(live_server.refused(before)),
    })


def test_post_ask_on_the_operators_local_model(
    live_fc_server: LiveServer, tmp_path: Path
) -> None:
    """`fanout serve --model openai:gemma --base-url URL --docs DIR`: POST /ask runs on the
    real model with no key, and its report is as useful as the CLI's."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "FANOUT_TOKEN")}
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator.cli", "serve", "--port", str(port),
         "--store", str(tmp_path / "runs.sqlite"), "--docs", str(DOCS),
         "--model", "openai:gemma", "--base-url", live_fc_server.base_url],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            _wait_up(client, proc)
            started = time.monotonic()
            # Two subtasks at most: the CLI test above runs the defaults; this one keeps
            # CI's time bounded on one CPU thread.
            created = client.post("/ask", json={"question": QUESTION, "docs": ".",
                                                "max_subtasks": 2})
            assert created.status_code == 201, created.text
            run_id = created.json()["run_id"]
            while client.get(f"/runs/{run_id}").json()["status"] == "running":
                assert time.monotonic() - started < RUN_TIMEOUT_S
                time.sleep(2)
            wall = time.monotonic() - started
            report = client.get(f"/runs/{run_id}/report", params={"format": "json"}).json()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    answer = check_answer(report)
    keep_figures("POST /ask (chatml-function-calling)", {
        "coverage": report["coverage"], **answer, "wall_s": round(wall, 1)})


def test_coordinator_ask_on_the_local_model(live_fc_server: LiveServer) -> None:
    """`coordinator.ask_events` from Python, on the same server and folder: a useful
    answer, streamed (docs/design.md §8): its first words come before the whole of it."""
    from coordinator import ask_events

    # When the synthesis's model call began, its first answer.delta, and its answer event.
    marks: dict[str, float] = {}

    async def main() -> Any:
        async with ask_events(QUESTION, tools=[f"docs:{DOCS}"], model="openai:gemma",
                              base_url=live_fc_server.base_url, max_subtasks=2) as run:
            async for event in run:
                now = time.monotonic()
                if event.subtask_id == "lead" and event.kind == "start" and "first" not in marks:
                    marks["asked"] = now  # the last lead call before the answer: its synthesis
                elif event.kind == "answer.delta":
                    marks.setdefault("first", now)
                elif event.kind == "answer":
                    marks["whole"] = now
        return run.report

    os.environ.setdefault("OPENAI_API_KEY", "sk-local-llama")
    started = time.monotonic()
    report = anyio.run(main)
    wall = time.monotonic() - started
    answer = check_answer(report.to_wire())
    assert marks["asked"] <= marks["first"] <= marks["whole"], marks
    keep_figures("coordinator.ask_events (chatml-function-calling)", {
        "coverage": report.coverage, **answer, "wall_s": round(wall, 1),
        "first_answer_words_s": round(marks["first"] - marks["asked"], 2),
        "whole_answer_s": round(marks["whole"] - marks["asked"], 2)})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_up(client: httpx.Client, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "fanout serve exited"
        try:
            if client.get("/runs").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail("fanout serve did not start in 60 s")


def test_ask_on_a_tools_file(live_server: LiveServer, tmp_path: Path) -> None:
    """`fanout ask` decomposes, fans out and synthesizes on the real model, and every
    invariant holds; its recording replays offline."""
    store, recording = tmp_path / "runs.sqlite", tmp_path / "recorded.yaml"
    before = len(live_server.accesses())
    started = time.monotonic()
    done = fanout(
        "ask", "Where do solid-state batteries stand?",
        "--tools", str(DATA / "tools.yaml"), "--model", "openai:gemma",
        "--base-url", live_server.base_url, "--max-subtasks", "2",
        "--json", "--store", str(store), "--speed", "20",
        cwd=tmp_path,
    )
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    requests = accepted_everything(live_server, before)
    figures = check_invariants(report, trace(store, tmp_path))
    recorded = fanout("record", "latest", "--output", str(recording), "--store", str(store),
                      cwd=tmp_path, timeout=120)
    assert recorded.returncode == 0, recorded.stderr
    replays_identically(recording, report, tmp_path)
    keep_figures("ask", {**figures, "requests": requests, "wall_s": round(wall, 1)})


def test_a_job_of_model_planned_subtasks(live_server: LiveServer, tmp_path: Path) -> None:
    """Three subtasks planned by the real model: each ends with one status, covered only
    by evidence; the recording replays offline to the same statuses."""
    job = tmp_path / "job.yaml"
    job.write_text((DATA / "job.yaml").read_text().replace("BASE_URL", live_server.base_url))
    store, recording = tmp_path / "runs.sqlite", tmp_path / "recorded.yaml"
    before = len(live_server.accesses())
    started = time.monotonic()
    done = fanout("run", str(job), "--json", "--store", str(store), "--record", str(recording),
                  cwd=tmp_path)
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    # A lead row, when there is one, is its rejected answer's gap (docs/design.md §7).
    ids = {s["id"] for s in report["subtasks"]}
    assert ids - {"lead"} == {"leaders", "news", "outlook"}
    assert "lead" not in ids or report["answer"]["kind"] == "extractive", report["gaps"]
    requests = accepted_everything(live_server, before)
    figures = check_invariants(report, trace(store, tmp_path))
    replays_identically(recording, report, tmp_path)
    keep_figures("model-planned job", {**figures, "requests": requests, "wall_s": round(wall, 1)})
