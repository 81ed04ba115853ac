"""A run's sessions driven in process, in virtual time, with a person at its desk
(docs/design.md §17): started or resumed, decided, stopped where it stands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from coordinator.engine import Hooks, LocalExecutor, RunRequest, Start
from coordinator.jobfile.loader import load_scenario
from coordinator.people import Desk
from coordinator.report import CoverageReport
from coordinator.store.runs import RunStore
from shared.clock import AnyioClock, run_in_virtual_time

__all__ = ["next_waiting", "session"]


async def next_waiting(desk: Desk, seen: set[str], subtask: str | None = None) -> dict[str, Any]:
    """The next escalation (of ``subtask``, when given) to wait at the desk that was not
    waited for before."""
    while True:
        for escalation in desk.pending()["escalations"]:
            if escalation["id"] not in seen and subtask in (None, escalation["subtask_id"]):
                seen.add(escalation["id"])
                return dict(escalation)
        await desk.change().wait()


def session(
    store: RunStore, path: Path, run_id: str | None, steps: list[dict[str, Any]],
    *, person: bool = True,
) -> tuple[str, CoverageReport | None]:
    """One session of the run of ``path`` (``run_id`` None: a new run, else resumed).

    Each step waits for the next escalation (of its ``subtask``, when it names one: two
    may come to wait at one instant), then decides it (``decide``) or stops the
    run there (``stop``: no report); ``then_stop`` stops it right after deciding, before
    the run acts on the decision. Without steps the session runs to its report
    (``person`` False: without a desk)."""
    scenario = load_scenario(path)
    text = path.read_text()
    seen: dict[str, Any] = {}

    async def main() -> CoverageReport | None:
        clock = AnyioClock()
        desk = Desk(clock) if person else None
        if run_id is None:
            executor = LocalExecutor(store, start=Start.fresh(scenario, clock), clock=clock)
            request = RunRequest(scenario, text, str(path))
            recorder = None
        else:
            row = store.get(run_id)
            start = Start.resumed_from(scenario, store, run_id, clock)
            recorder = store.claim_for_resume(run_id)
            executor = LocalExecutor(recorder=recorder, start=start, clock=clock)
            request = RunRequest(scenario, row.spec_text, row.file)
            seen["run"] = run_id
        out: list[CoverageReport] = []
        hooks = Hooks(desk=desk, on_recorded=lambda rid: seen.update(run=rid))

        async def run() -> None:
            out.append(await executor.execute(request, hooks))

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                waited: set[str] = set()
                for step in steps:
                    assert desk is not None
                    escalation = await next_waiting(desk, waited, step.get("subtask"))
                    if step.get("stop") or step.get("then_stop"):
                        # The run stops where it stands (its waits are cut: a decision
                        # made now is recorded, and nothing acts on it).
                        tg.cancel_scope.cancel()
                    if step.get("decide"):
                        desk.decide(step["decide"] | {"escalation": escalation["id"]},
                                    by="test")
                    if tg.cancel_scope.cancel_called:
                        return None
        finally:
            if recorder is not None:
                await recorder.aclose()
        return out[0]

    report = run_in_virtual_time(main)
    if report is None:
        store.release(seen["run"])  # its process is gone: the run reads interrupted
    return seen["run"], report
