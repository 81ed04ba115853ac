"""Waiting is durable (docs/design.md §17): a run stopped while an escalation waits for a
person is resumed waiting for the same escalation, and a decision made then applies.

The stop here is in-process (the run's task is cancelled where it stands, its hold on
the run given up as a dead process's is); tests/coordinator/serve/test_lifecycle.py
kills a real ``fanout serve`` the same way with SIGKILL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from coordinator.engine import Hooks, LocalExecutor, RunRequest, Start
from coordinator.engine.resume import recorded_waits
from coordinator.jobfile.loader import load_scenario
from coordinator.people import Desk
from coordinator.report import CoverageReport
from coordinator.store.runs import RunStore
from shared.clock import AnyioClock, run_in_virtual_time

WAITS = Path(__file__).parents[1] / "data" / "person_waits.yaml"


async def _pending(desk: Desk) -> dict[str, Any]:
    """The desk's first waiting escalation, once one waits."""
    while not desk.pending()["escalations"]:
        await desk.change().wait()
    escalation: dict[str, Any] = desk.pending()["escalations"][0]
    return escalation


def _stopped_while_waiting(store: RunStore) -> tuple[str, dict[str, Any]]:
    """Run the job until patents waits for a person, then stop it there (no report):
    the run id and what waited."""
    scenario = load_scenario(WAITS)
    seen: dict[str, Any] = {}

    async def main() -> None:
        clock = AnyioClock()
        desk = Desk(clock)
        executor = LocalExecutor(store, start=Start.fresh(scenario, clock), clock=clock)
        request = RunRequest(scenario, WAITS.read_text(), str(WAITS))
        async with anyio.create_task_group() as tg:
            tg.start_soon(executor.execute, request,
                          Hooks(desk=desk, on_recorded=lambda rid: seen.update(run=rid)))
            seen["escalation"] = await _pending(desk)
            tg.cancel_scope.cancel()  # the run stops where it stands, waiting

    run_in_virtual_time(main)
    store.release(seen["run"])  # its process is gone: the run reads interrupted
    return seen["run"], seen["escalation"]


def _resumed(store: RunStore, run_id: str, decide: dict[str, Any] | None
             ) -> tuple[CoverageReport | None, dict[str, Any]]:
    """Resume ``run_id`` with a new desk; once its escalation waits again, decide
    ``decide`` (None: stop it again). The report, and what waited."""
    row = store.get(run_id)
    scenario = load_scenario(WAITS)
    seen: dict[str, Any] = {}

    async def main() -> CoverageReport | None:
        clock = AnyioClock()
        desk = Desk(clock)
        start = Start.resumed_from(scenario, store, run_id, clock)
        recorder = store.claim_for_resume(run_id)
        executor = LocalExecutor(recorder=recorder, start=start, clock=clock)
        request = RunRequest(scenario, row.spec_text, row.file)
        out: list[CoverageReport] = []

        async def run() -> None:
            out.append(await executor.execute(request, Hooks(desk=desk)))

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                seen["escalation"] = await _pending(desk)
                if decide is None:
                    tg.cancel_scope.cancel()
                    return None
                desk.decide(decide | {"escalation": seen["escalation"]["id"]}, by="test")
        finally:
            await recorder.aclose()
        return out[0]

    report = run_in_virtual_time(main)
    if report is None:
        store.release(run_id)
    return report, seen["escalation"]


def test_a_run_stopped_while_an_escalation_waits_waits_again_and_retry_applies(
    tmp_path: Path,
) -> None:
    """Stopped while patents waits: the store holds the pending escalation and patents'
    committed result; resumed (twice) with a new desk, the same escalation waits (id,
    options, since_s), and retry decided then runs patents again to complete."""
    store = RunStore(tmp_path / "runs.sqlite")
    run_id, first = _stopped_while_waiting(store)
    assert first["id"] == "patents:1"
    assert store.get(run_id).status == "interrupted"
    assert "patents" in store.results(run_id)
    waited, numbers = recorded_waits(store, run_id)
    assert waited["patents"].escalation.id == "patents:1" and numbers == {"patents": 1}

    _, again = _resumed(store, run_id, None)  # stopped again while it waits
    assert again == first

    report, last = _resumed(store, run_id, {"do": "retry"})
    assert last == first
    assert report is not None
    rows = {row.id: row.status for row in report.subtasks}
    assert rows == {"patents": "complete", "overview": "complete"}
    [decision] = report.decisions
    assert (decision.escalation, decision.do, decision.by) == ("patents:1", "retry", "test")
    assert decision.change is not None and decision.change.status_after == "complete"
    kinds = [(e["session"], e["kind"]) for e in store.events(run_id)
             if e["kind"].startswith("decision.")]
    assert kinds == [(1, "decision.needed"), (2, "decision.needed"),
                     (3, "decision.needed"), (3, "decision.made")]
    assert recorded_waits(store, run_id)[0] == {}
    assert store.get(run_id).status == "finished"
