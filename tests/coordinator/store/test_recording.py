"""Recordings replay to the report they came from, or `fanout record` refuses, saying why."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from coordinator.cli import main
from coordinator.engine import Hooks, LocalExecutor, RunRequest
from coordinator.engine.recording import NotReplayable, recording, refusal
from coordinator.jobfile.loader import load_scenario
from coordinator.store.runs import RunStore
from shared.clock import run_in_virtual_time

ROOT = Path(__file__).resolve().parents[3]
NEVER_PLANS = ROOT / "scenarios" / "lead_plan_never_valid.yaml"
DESIGN = ROOT / "tests" / "coordinator" / "data" / "design_example.yaml"

TOOLS_FILE = """\
model:
  provider: scripted
  turns:
    lead:
      - {error: auth, message: "invalid x-api-key", latency_s: 0.2}
tools:
  web_search:
    params: {query: {type: string}}
    responses: [{ok: {results: ["unused"]}}]
"""


@pytest.mark.parametrize(
    "how",
    [pytest.param("run", id="run-plan-never-valid"), pytest.param("ask", id="ask-lead-auth")],
)
def test_a_run_whose_lead_failed_records_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """A lead that never planned (its plans refused, or its model call failed) degraded
    its job to `question`; it is recorded as a job that decomposes, and the replay
    degrades the same way (it was written with `subtasks: []`, so `expect.subtasks.lead`
    was refused)."""
    store = str(tmp_path / "s.sqlite")
    out = tmp_path / "rec.yaml"
    if how == "run":
        argv = ["run", str(NEVER_PLANS)]
    else:
        tools = tmp_path / "tools.yaml"
        tools.write_text(TOOLS_FILE)
        argv = ["ask", "what is new in batteries?", "--tools", str(tools)]
    code = main([*argv, "--json", "--speed", "1000", "--store", store, "--record", str(out)])
    live = json.loads(capsys.readouterr().out)
    assert code == (3 if live["outcome"] == "failed" else 0)  # exit 3: a failed run
    assert live["gaps"][0]["subtask_id"] == "lead"
    assert [s["id"] for s in live["subtasks"]] == ["lead", "question"]
    assert main(["replay", str(out), "--json"]) == 0, capsys.readouterr().err
    replayed = json.loads(capsys.readouterr().out)["scenarios"][0]
    assert replayed["passed"] and replayed["report"]["gaps"] == live["gaps"]


def test_a_cancelled_run_is_refused_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A served run cancelled (POST /cancel sets the run's cancel event): `fanout record`
    exits 2 saying it was cancelled, and writes nothing."""
    store = RunStore(tmp_path / "s.sqlite")
    scenario = load_scenario(DESIGN)

    async def cancelled() -> None:
        cancel = anyio.Event()
        cancel.set()  # a cancel that arrives as the run starts: every subtask is cut
        recorder = store.create_run(
            job=scenario.scenario, query=scenario.job.query, file=str(DESIGN),
            spec_text=DESIGN.read_text(), seed=str(scenario.seed), speed=1.0,
        )
        try:
            request = RunRequest(scenario, DESIGN.read_text(), str(DESIGN))
            await LocalExecutor(recorder=recorder).execute(request, Hooks(cancel=cancel))
        finally:
            recorder.close()

    run_in_virtual_time(cancelled)
    run = store.get("latest")
    assert run.status == "finished"
    assert "cancelled" in (refusal(store, run.id) or "")
    with pytest.raises(NotReplayable, match="cancelled"):
        recording(store, run.id)
    out = tmp_path / "rec.yaml"
    assert main(["record", run.id, "-o", str(out), "--store", str(store.path)]) == 2
    assert "cancelled" in capsys.readouterr().err and not out.exists()
