"""A run's sessions driven in process, in virtual time, with a person at its desk
(docs/design.md §17): started or resumed, decided, stopped where it stands.

The run's recorder commits on the loop's own thread: trio's virtual clock jumps to the
next timer whenever every task waits, and a task waiting for a worker thread's commit
waits too, so a commit let the clock jump ahead to an escalation's ``wait_s`` timeout
(the escalation was decided ``by: timeout`` as the test waited for it).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import anyio

from coordinator.engine import Hooks, LocalExecutor, RunRequest, Start
from coordinator.engine.run import record_run
from coordinator.jobfile.loader import load_scenario
from coordinator.people import Desk
from coordinator.report import CoverageReport
from coordinator.store.runs import RunRecorder, RunStore
from coordinator.store.writer import StoreWriter, Tx
from shared.clock import AnyioClock, run_in_virtual_time
from subagents.result import ProgressEvent

__all__ = ["next_waiting", "session"]

T = TypeVar("T")


class _LoopWriter(StoreWriter):
    """The store's writer whose commits are waited for on the loop's thread (blocking
    it): virtual time cannot jump ahead while a commit is under way."""

    async def acall(self, op: Callable[[Tx], T], *, first: bool = False) -> T:
        return self.enqueue(op, first=first).result()


class _DyingWriter(_LoopWriter):
    """A :class:`_LoopWriter` whose process is as good as killed once ``subtask``'s
    ``nth`` escalated result is committed: every write after that is dropped, never
    committed (what a SIGKILL in the instant after the commit leaves in the store)."""

    def __init__(self, backend: Any, subtask: str, nth: int = 1) -> None:
        super().__init__(backend)
        self.subtask = subtask
        self.nth = nth
        self.dead = False
        self.died = anyio.Event()

    def enqueue(self, op: Callable[[Tx], T], *, first: bool = False) -> Future[T]:
        if not self.dead:
            return super().enqueue(op, first=first)
        dropped: Future[T] = Future()
        dropped.set_result(None)  # type: ignore[arg-type]  # (nothing reads it)
        return dropped

    def submit(self, op: Callable[[Tx], Any]) -> None:
        if not self.dead:
            super().submit(op)

    async def commit_result(self, run_id: str, subtask_id: str, session: int,
                            result: dict[str, Any], state: dict[str, Any]) -> None:
        await super().commit_result(run_id, subtask_id, session, result, state)
        if subtask_id == self.subtask and result.get("escalation") is not None:
            self.nth -= 1
            self.dead = self.nth <= 0
            if self.dead:
                self.died.set()


def _on_the_loop(
    store: RunStore, recorder: RunRecorder, dies_after: str | None = None
) -> tuple[RunRecorder, StoreWriter]:
    """``recorder``'s run and session recorded through a :class:`_LoopWriter` (to close
    once the recorder is); ``dies_after``: a :class:`_DyingWriter` for that subtask
    (``SUBTASK#N``: after its N-th escalated result)."""
    recorder.close()  # (its own writer stops; the run stays this process's)
    subtask, _, nth = (dies_after or "").partition("#")
    writer = (_LoopWriter(store.backend) if dies_after is None
              else _DyingWriter(store.backend, subtask, int(nth or 1)))
    return RunRecorder(store.backend, recorder.run_id, recorder.session, writer=writer), writer


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
    *, person: bool = True, dies_after: str | None = None,
) -> tuple[str, CoverageReport | None]:
    """One session of the run of ``path`` (``run_id`` None: a new run, else resumed).

    Each step waits for the next escalation (of its ``subtask``, when it names one: two
    may come to wait at one instant), then decides it (``decide``) or stops the
    run there (``stop``: no report); ``then_stop`` stops it right after deciding, before
    the run acts on the decision; ``once_done`` (a subtask id) holds a stop until that
    subtask's subagent is done, ``once_ok`` (``SUBTASK/TOOL``) until a call of that tool
    by that subtask succeeded, ``until_dead`` until the ``dies_after`` writer died; a
    step with
    ``escalation: False`` waits for no escalation. Without steps the session runs to its
    report (``person`` False: without a desk). ``dies_after`` (a subtask id, or
    ``SUBTASK#N``): the session's store writes stop once that subtask's (N-th) escalated
    result is committed, as if the process were killed in that instant."""
    scenario = load_scenario(path)
    text = path.read_text()
    seen: dict[str, Any] = {}

    async def main() -> CoverageReport | None:
        clock = AnyioClock()
        desk = Desk(clock) if person else None
        if run_id is None:
            request = RunRequest(scenario, text, str(path))
            start = Start.fresh(scenario, clock)
            recorder, writer = _on_the_loop(store, record_run(store, request), dies_after)
        else:
            row = store.get(run_id)
            request = RunRequest(scenario, row.spec_text, row.file)
            start = Start.resumed_from(scenario, store, run_id, clock)
            recorder, writer = _on_the_loop(store, store.claim_for_resume(run_id))
        seen["run"] = recorder.run_id
        executor = LocalExecutor(recorder=recorder, start=start, clock=clock)
        out: list[CoverageReport] = []
        done: set[str] = set()
        progressed = [anyio.Event()]

        def observe(event: ProgressEvent) -> None:
            if event.kind == "state" and event.state == "done":
                done.add(event.subtask_id)
            if event.kind == "attempt" and event.result is not None and event.result.ok:
                done.add(f"{event.subtask_id}/{event.tool}")
            progressed[0].set()
            progressed[0] = anyio.Event()

        hooks = Hooks(desk=desk, observer=observe)

        async def run() -> None:
            out.append(await executor.execute(request, hooks))

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                waited: set[str] = set()
                for step in steps:
                    assert desk is not None
                    escalation: dict[str, Any] = {}
                    if step.get("escalation", True):
                        escalation = await next_waiting(desk, waited, step.get("subtask"))
                    for condition in (step.get("once_done"), step.get("once_ok")):
                        while condition and condition not in done:
                            await progressed[0].wait()
                    if step.get("until_dead") and isinstance(writer, _DyingWriter):
                        await writer.died.wait()
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
            await recorder.aclose()  # (it flushes the writer)
            writer.close()
        return out[0]

    report = run_in_virtual_time(main)
    if report is None:
        store.release(seen["run"])  # its process is gone: the run reads interrupted
    return seen["run"], report
