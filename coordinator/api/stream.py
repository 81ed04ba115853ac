"""Progress events as an async iterator: ``async with ask_events(...) as run: async for``.

The job runs in a task group the context manager opens (a job never outlives the block
that started it, the structured-concurrency rule an async generator cannot keep), and
the events come through a memory stream in the order they happened. Once the iteration
ends, ``run.report`` holds the report; a failure of the job (a missing key, a server
that cannot start) is raised by the iteration. Leaving the block early cancels the job
the way cancelling ``ask()`` does: subagents hand up with trigger ``cancelled`` and
``run.report`` still holds the whole report.

    async with ask_events("State of solid-state batteries", tools=[search],
                          model="anthropic:claude-sonnet-4-6") as run:
        async for event in run:
            print(event.subtask_id, event.kind, event.state)
    print(run.report.coverage)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from os import PathLike
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from coordinator.api.run import (
    EscalationCallback,
    ExecutorName,
    PlanCallback,
    Prepared,
    StoreLike,
    execute,
    plainly,
    prepare_ask,
    prepare_file,
)
from coordinator.report import CoverageReport
from subagents.models.factory import MissingModelKey
from subagents.result import ProgressEvent

__all__ = ["JobEvents", "ask_events", "run_file_events"]


class JobEvents:
    """The events of one running job, and its report once the iteration has ended."""

    def __init__(self, receive: MemoryObjectReceiveStream[ProgressEvent]) -> None:
        self._receive = receive
        self._report: CoverageReport | None = None
        self._error: BaseException | None = None

    def __aiter__(self) -> JobEvents:
        return self

    async def __anext__(self) -> ProgressEvent:
        # A plain iterator, not an async generator: a caller that breaks out of the loop
        # leaves nothing to be finalised later.
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._receive.close()
            if isinstance(self._error, MissingModelKey):
                raise plainly(self._error) from None
            if self._error is not None:
                raise self._error from None
            raise StopAsyncIteration from None

    @property
    def report(self) -> CoverageReport:
        """The job's report.

        Raises:
            RuntimeError: the job has not ended yet (iterate the events to the end).
        """
        if self._report is None:
            raise RuntimeError("the job has not ended: iterate its events to the end first")
        return self._report


@asynccontextmanager
async def _stream(
    job: Prepared,
    on_escalation: EscalationCallback | None,
    store: StoreLike | None,
    speed: float = 1.0,
    allow_private_fetch: bool = False,
    executor: ExecutorName = "local",
    temporal: Mapping[str, str] | None = None,
    on_plan: PlanCallback | None = None,
) -> AsyncIterator[JobEvents]:
    send: MemoryObjectSendStream[ProgressEvent]
    send, receive = anyio.create_memory_object_stream[ProgressEvent](math.inf)
    events = JobEvents(receive)

    def keep(report: CoverageReport) -> None:
        events._report = report

    def hear(event: ProgressEvent) -> None:
        # A caller that stopped iterating has closed its end: the job goes on regardless.
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            send.send_nowait(event)

    async def run() -> None:
        async with send:
            try:
                await execute(
                    job,
                    on_event=hear,
                    on_escalation=on_escalation,
                    on_plan=on_plan,
                    store=store,
                    speed=speed,
                    on_report=keep,
                    allow_private_fetch=allow_private_fetch,
                    executor=executor,
                    temporal=temporal,
                )
            except Exception as exc:  # handed to the iteration, which raises it
                events._error = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            yield events
        finally:
            receive.close()
            if events._report is None and events._error is None:
                # Left before the job ended: cancel it; it still hands up its report.
                tg.cancel_scope.cancel()


def ask_events(
    question: str,
    *,
    on_escalation: EscalationCallback | None = None,
    on_plan: PlanCallback | None = None,
    store: StoreLike | None = None,
    allow_private_fetch: bool = False,
    executor: ExecutorName = "local",
    temporal: Mapping[str, str] | None = None,
    **job: Any,
) -> AbstractAsyncContextManager[JobEvents]:
    """``ask(question, ...)`` with its progress events to iterate instead of ``on_event``
    (``on_escalation`` and ``on_plan`` as :func:`~coordinator.api.run.ask` takes them).

    The job is validated now: bad arguments raise here, before the block is entered.
    """
    return _stream(prepare_ask(question, **job), on_escalation, store,
                   allow_private_fetch=allow_private_fetch, executor=executor,
                   temporal=temporal, on_plan=on_plan)


def run_file_events(
    path: str | PathLike[str],
    *,
    on_escalation: EscalationCallback | None = None,
    on_plan: PlanCallback | None = None,
    store: StoreLike | None = None,
    speed: float = 1.0,
    allow_private_fetch: bool = False,
    executor: ExecutorName = "local",
    temporal: Mapping[str, str] | None = None,
) -> AbstractAsyncContextManager[JobEvents]:
    """``run_file(path, ...)`` with its progress events to iterate."""
    return _stream(prepare_file(path), on_escalation, store, speed,
                   allow_private_fetch=allow_private_fetch, executor=executor,
                   temporal=temporal, on_plan=on_plan)
