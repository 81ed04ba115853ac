"""The lead agent on a worker, without a server: its plan, where it stands, the plan on record."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from coordinator.engine.resume import planned_scenario
from coordinator.jobfile.loader import load_scenario
from coordinator.lead import synthesize
from coordinator.replay import replay
from coordinator.report import CoverageReport
from coordinator.store.runs import RunStore
from coordinator.temporal import Decomposition, DecompositionInput, JobInput, WorkerResources
from coordinator.temporal.lead import Lead, decompose_job
from coordinator.temporal.rounds import job_clock
from subagents.result import LEAD
from tests.coordinator.temporal.conftest import ROOT

DECOMPOSES = ROOT / "scenarios" / "lead_decomposes.yaml"
NEVER_VALID = ROOT / "scenarios" / "lead_plan_never_valid.yaml"
SPEED = 200.0  # the scripted lead's 1 s per model call takes 5 ms


def _input(path: Path, *, store: str | None = None, run_id: str = "r1") -> DecompositionInput:
    job = JobInput.of(load_scenario(path), run_id=run_id)
    assert job.model is not None
    return DecompositionInput(run_id=run_id, job=job.job, seed=job.seed, tools=job.tools,
                              model=job.model, store=store, speed=SPEED,
                              started_at=time.time())


async def _decompose(
    inp: DecompositionInput,
    resources: WorkerResources,
    resumed: dict[str, Any] | None = None,
) -> tuple[Decomposition, list[dict[str, Any]]]:
    beats: list[dict[str, Any]] = []
    out = await decompose_job(inp, resources, session=1, resumed=resumed, beat=beats.append)
    return out, beats


@pytest.fixture(scope="module")
def local() -> dict[str, Any]:
    """The local replay's report of the decomposed job."""
    return replay(load_scenario(DECOMPOSES)).report


@pytest.mark.anyio
async def test_the_synthesis_continues_at_the_leads_next_turn(local: dict[str, Any]) -> None:
    """After two plans (one sent back), the synthesis gets the lead's third scripted turn
    and writes the local replay's answer, not the first plan's turn again."""
    inp = _input(DECOMPOSES)
    async with WorkerResources() as resources:
        plan, _ = await _decompose(inp, resources)
        assert plan.subtasks is not None and plan.lead is not None
        assert [s.id for s in plan.subtasks] == [s["id"] for s in local["subtasks"]]
        assert all(s.planner == "model" for s in plan.subtasks)
        assert plan.lead.model_attempts == 2
        unanswered = CoverageReport.model_validate(local)
        answer = unanswered.answer.model_copy(update={"text": None, "sources": []})
        report = unanswered.model_copy(update={"answer": answer})
        clock = job_clock(SPEED, inp.started_at)
        lead = Lead(resources, inp.model, run_id="r1", seed=inp.seed, store=None, clock=clock,
                    session=1, position=plan.lead)
        answered = await synthesize(report, lead.context)
    assert answered.answer.text == local["answer"]["text"]
    # Sources are numbered records now (docs/design.md §10): compared as the wire has them.
    sources = [s.model_dump(mode="json") for s in answered.answer.sources or []]
    assert sources == local["answer"]["sources"]


@pytest.mark.anyio
async def test_a_lead_restored_from_its_position_draws_what_it_would_have() -> None:
    """The lead's jitter stream and trace ids continue across activities, as one local
    LeadContext's would."""
    inp = _input(DECOMPOSES)
    clock = job_clock(SPEED, inp.started_at)
    async with WorkerResources() as resources:
        first = Lead(resources, inp.model, run_id="r1", seed=0, store=None, clock=clock,
                     session=1)
        first.context.rng.random()
        first.trace_ids.next(LEAD)
        again = Lead(resources, inp.model, run_id="r1", seed=0, store=None, clock=clock,
                     session=1, position=first.position())
    assert again.context.rng.random() == first.context.rng.random()
    assert again.trace_ids.next(LEAD) == first.trace_ids.next(LEAD)


@pytest.mark.anyio
async def test_a_retried_decomposition_returns_the_plan_it_heartbeat() -> None:
    """A decomposition retried after its plan was heartbeaten does not ask the model
    again (live, it could plan differently from the plan on record)."""
    inp = _input(DECOMPOSES)
    async with WorkerResources() as resources:
        plan, [beat] = await _decompose(inp, resources)

    def no_model(block: Any, clock: Any) -> Any:
        raise AssertionError("the model was asked again")

    async with WorkerResources(client_factory=no_model) as resources:
        again, beats = await _decompose(inp, resources, resumed=beat)
    assert again == plan and beats == []


@pytest.mark.anyio
async def test_a_plan_never_valid_degrades_to_the_question(tmp_path: Path) -> None:
    """A lead that cannot plan returns the degraded plan (the question with every tool)
    and its gap (data, not an exception), beats and records both for a resume."""
    store = RunStore(tmp_path / "runs.sqlite")
    recorder = store.create_run(job="j", query="q", file=str(NEVER_VALID), spec_text="",
                                seed="12", speed=SPEED)
    recorder.close()
    inp = _input(NEVER_VALID, store=str(store.path), run_id=recorder.run_id)
    async with WorkerResources() as resources:
        out, beats = await _decompose(inp, resources)
    assert out.subtasks is not None and [s.id for s in out.subtasks] == ["question"]
    assert out.subtasks[0].tools == ["web_search"] and out.subtasks[0].planner == "model"
    assert out.gap is not None and out.gap.subtask_id == LEAD
    assert out.gap.escalation is not None and out.gap.escalation.trigger == "no_progress"
    assert len(beats) == 1
    events = store.events(recorder.run_id)
    plans = [e for e in events if e["kind"] == "plan"]
    assert len(plans) == 1 and plans[0]["lead_gap"]["subtask_id"] == LEAD
    assert sum(e["kind"] == "attempt" and e["subtask_id"] == LEAD for e in events) == 2


@pytest.mark.anyio
async def test_the_plan_is_recorded_for_report_and_resume(tmp_path: Path) -> None:
    """The plan lands in the store as the engine's drive writes it, so planned_scenario (what
    `fanout report` and `resume` read) gives the subtasks the run runs, and the lead's
    position as a local run keeps it (its spend included: coordinator.rules)."""
    scenario = load_scenario(DECOMPOSES)
    store = RunStore(tmp_path / "runs.sqlite")
    recorder = store.create_run(job="j", query="q", file=str(DECOMPOSES), spec_text="",
                                seed="11", speed=SPEED)
    recorder.close()
    inp = _input(DECOMPOSES, store=str(store.path), run_id=recorder.run_id)
    async with WorkerResources() as resources:
        out, _ = await _decompose(inp, resources)
    assert out.subtasks is not None and out.lead is not None
    assert planned_scenario(scenario, store, recorder.run_id).job.subtasks == out.subtasks
    lead = store.checkpoints(recorder.run_id)[LEAD]["lead"]
    assert lead == {"model_attempts": 2, "trace": out.lead.trace, "spent": out.lead.spent}


@pytest.mark.anyio
async def test_a_decomposition_crosses_the_pydantic_converter_unchanged() -> None:
    """The lead's plan and its position come out of the converter as they went in."""
    async with WorkerResources() as resources:
        out, _ = await _decompose(_input(DECOMPOSES), resources)
    converter = pydantic_data_converter.payload_converter
    [back] = converter.from_payloads(converter.to_payloads([out]), [Decomposition])
    assert back == out
