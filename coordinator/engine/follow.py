"""Following a run that another process records: its trace, read from the store.

A run on Temporal is recorded by the workers; the door that submitted it hears it by
tailing the store (:class:`StoreTail`), as ``fanout run --executor temporal`` has
always shown its live board. While no event comes, :func:`no_worker_hint` checks the
task queue and says how to start a worker (a run on a queue no worker polls waits at
``queued`` forever with no other sign).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from coordinator.lead import FollowupHook, PlanHook
from coordinator.store.runs import RunStore
from shared.envelope import ToolResult
from subagents.result import LEAD, ProgressEvent, ProgressObserver, SubagentResult
from subagents.spec import SubtaskSpec

__all__ = ["NO_WORKER_HINT_S", "StoreTail", "no_worker_hint", "progress_event"]

NO_WORKER_HINT_S = 5.0
"""How long a submitted run may show no progress before the task queue is checked for a
worker; a workflow task is picked up in well under a second when one polls."""


def progress_event(e: dict[str, Any]) -> ProgressEvent:
    """A stored trace event as the ProgressEvent it was recorded from."""
    result = e.get("result")
    return ProgressEvent(
        e["subtask_id"], e["kind"], e["at"], state=e.get("state"), tool=e.get("tool"),
        attempt=e.get("attempt"), wait_s=e.get("wait_s"),
        result=ToolResult.model_validate(result) if result is not None else None,
        step=e.get("step"), trigger=e.get("trigger"),
    )


class StoreTail:
    """Hands the trace events another process writes to the store to a door's hooks.

    The lead's ``plan`` and ``followups`` go to ``on_plan`` and ``on_followups`` (a live
    board adds their rows); the catalogue is not a progress event and is skipped; every
    other event goes to ``observer``. ``on_row`` hears every event as stored.
    """

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        observer: ProgressObserver | None,
        on_plan: PlanHook | None = None,
        on_followups: FollowupHook | None = None,
        *,
        on_row: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.store = store
        self.on_row = on_row
        self.run_id = run_id
        self.observer = observer
        self.on_plan = on_plan
        self.on_followups = on_followups
        self.seq = 0
        self.seen = False  # any event from a worker yet

    async def follow(self, every_s: float = 0.25) -> None:
        """Feed the hooks every ``every_s`` until cancelled."""
        while True:
            await anyio.to_thread.run_sync(self.feed)
            await anyio.sleep(every_s)

    def feed(self) -> None:
        """Hand on the events recorded since the last feed (blocking: reads the store)."""
        for e in self.store.events_after(self.run_id, self.seq):
            self.seq = e["seq"]
            self.seen = True
            if self.on_row is not None:
                self.on_row(e)
            kind, sid = e["kind"], e["subtask_id"]
            if sid == LEAD and kind == "plan":
                if self.on_plan is not None:
                    gap = e.get("lead_gap")
                    subtasks = [SubtaskSpec.model_validate(s) for s in e["subtasks"]]
                    lead_gap = None if gap is None else SubagentResult.model_validate(gap)
                    self.on_plan(subtasks, e["at"], lead_gap)
            elif sid == LEAD and kind == "followups":
                if self.on_followups is not None:
                    specs = [SubtaskSpec.model_validate(s) for s in e["followups"]]
                    self.on_followups(specs, e["at"])
            elif kind != "catalogue" and self.observer is not None:
                self.observer(progress_event(e))


async def no_worker_hint(
    client: Any,
    task_queue: str,
    address: str,
    progressed: Callable[[], bool],
    say: Callable[[str | None], None],
    *,
    after_s: float = NO_WORKER_HINT_S,
    every_s: float = 2.0,
) -> None:
    """Once a run has shown no progress for ``after_s``, check the task queue for a
    worker and ``say`` how to start one while none polls it (``say(None)`` once one does).
    """
    from coordinator.temporal import workflow_pollers

    await anyio.sleep(after_s)
    while not progressed():
        try:
            pollers = await workflow_pollers(client, task_queue)
        except Exception:  # a hint only: a check that fails (RPCError, …) says nothing
            pollers = 1
        say(
            None
            if pollers
            else f"no worker is polling task queue {task_queue!r} on {address}: start one "
            f"with `fanout worker --address {address} --task-queue {task_queue}`"
        )
        await anyio.sleep(every_s)
    say(None)
