"""The fanout worker: the workflow and the activities on one task queue, resources opened once.

``fanout worker`` runs :func:`serve_worker` until SIGINT or SIGTERM. A worker opens the
MCP servers, research tools and model clients its rounds need once and keeps them
(:class:`~coordinator.temporal.resources.WorkerResources`); ``concurrency`` bounds how
many subagent rounds it runs at once, whatever the jobs' own ``concurrency``.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from coordinator.temporal.activities import FanoutActivities
from coordinator.temporal.client import connect
from coordinator.temporal.payloads import DEFAULT_ADDRESS, DEFAULT_NAMESPACE, DEFAULT_TASK_QUEUE
from coordinator.temporal.resources import ClientFactory, PlannerFactory, WorkerResources
from coordinator.temporal.workflow import FanoutWorkflow
from shared.tokens import load_encoding

DEFAULT_CONCURRENCY = 100

# fanout's own packages are deterministic where the workflow uses them and import
# pydantic models by the hundred: the sandbox passes them through instead of importing
# them again for every workflow run.
_RUNNER = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules(
        "coordinator", "subagents", "shared", "pydantic", "pydantic_core", "anyio",
        # The TracingInterceptor's workflow side uses the API's global state (docs/design.md §13).
        "opentelemetry",
    )
)


@asynccontextmanager
async def fanout_worker(
    client: Client,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    concurrency: int = DEFAULT_CONCURRENCY,
    client_factory: ClientFactory | None = None,
    planner_factory: PlannerFactory | None = None,
    workflows: Sequence[type] = (),
    activities: Sequence[Callable[..., Any]] = (),
    store: str | None = None,
) -> AsyncIterator[Worker]:
    """A worker for fanout jobs on ``task_queue``, running while the block runs.

    Args:
        client: the connected Temporal client (:func:`coordinator.temporal.connect`).
        task_queue: where the jobs are submitted.
        concurrency: the most subagent rounds this worker runs at once.
        client_factory: builds a model client from a job's ``model`` block (the
            models wing's ``build_client`` by default).
        planner_factory: builds the model-driven planner of a subtask without a plan.
        workflows: more workflows this worker serves (the application's own).
        activities: more activities this worker runs.
    """
    load_encoding()  # load the encoding now, not on the first round's clock
    async with WorkerResources(
        client_factory=client_factory, planner_factory=planner_factory, store=store
    ) as resources:
        ours = FanoutActivities(resources)
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[FanoutWorkflow, *workflows],
            activities=[ours.decompose, ours.plan_followups, ours.subagent_round, ours.settle,
                        ours.record_queued, ours.record_catalogue, ours.record_decision,
                        ours.record_plan,
                        ours.synthesize, ours.record_report, *activities],
            workflow_runner=_RUNNER,
            max_concurrent_activities=concurrency,
            # Every checkpoint goes to the server as it is made: a throttled one could
            # leave a retried round further back than its last finished call.
            max_heartbeat_throttle_interval=timedelta(0),
            # A lost worker's jobs wait this long on its sticky queue before any worker
            # takes them (Temporal's default is 10 s); replaying a history elsewhere is
            # cheap next to a job standing still.
            sticky_queue_schedule_to_start_timeout=timedelta(seconds=3),
            graceful_shutdown_timeout=timedelta(seconds=5),
        )
        async with worker:
            yield worker


async def serve_worker(
    address: str = DEFAULT_ADDRESS,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    task_queue: str = DEFAULT_TASK_QUEUE,
    concurrency: int = DEFAULT_CONCURRENCY,
    ready: asyncio.Event | None = None,
    store: str | None = None,
) -> None:
    """Connect and run a worker until SIGINT or SIGTERM; rounds under way finish first.

    ``store`` is the worker's own ``--store`` (its credentials for a Postgres store).
    """
    client = await connect(address, namespace)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with fanout_worker(client, task_queue=task_queue, concurrency=concurrency,
                                 store=store):
            if ready is not None:
                ready.set()
            await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
