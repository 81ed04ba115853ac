"""Talking to Temporal: connecting with the pydantic converter, submitting and awaiting jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Final

import anyio
from opentelemetry.trace import TracerProvider
from temporalio.client import Client, Interceptor, WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from coordinator.jobfile.research import ResearchPolicy
from coordinator.jobfile.scenario import Scenario
from coordinator.lead.decompose import failed_decomposition
from coordinator.report import CoverageReport
from coordinator.store.runs import RunStore
from coordinator.store.writer import StoreWriter
from coordinator.temporal.lead import lost_decomposition
from coordinator.temporal.payloads import (
    DEFAULT_ADDRESS,
    DEFAULT_NAMESPACE,
    DEFAULT_TASK_QUEUE,
    JobInput,
    TemporalSettings,
)
from coordinator.temporal.records import TemporalRunRef, register_run
from coordinator.temporal.workflow import FanoutWorkflow
from subagents.telemetry.run import job_span
from subagents.telemetry.spans import tracer_of, tracing_enabled

JobHandle = WorkflowHandle[FanoutWorkflow, CoverageReport]

# Starting a workflow again is worth it only when the service was briefly unreachable.
_TRANSIENT: Final = frozenset({RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED,
                               RPCStatusCode.RESOURCE_EXHAUSTED})
START_ATTEMPTS: Final = 3
"""How often a registered run's workflow start is tried before the run is failed."""


class WorkflowNotStarted(RuntimeError):
    """A registered run's workflow could not be started; the run is stored ``failed``
    with the reason (never left ``interrupted``)."""

    def __init__(self, run_id: str, reason: str) -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"run {run_id}: its workflow did not start on Temporal: {reason}")


async def connect(
    address: str = DEFAULT_ADDRESS,
    namespace: str = DEFAULT_NAMESPACE,
    *,
    tracer_provider: TracerProvider | None = None,
) -> Client:
    """A client of the Temporal service at ``address`` that speaks fanout's models.

    When runs are traced (``tracer_provider``, or a global provider the application set)
    the client carries temporalio's TracingInterceptor, and so do the workers built on
    it: a run's trace continues from its submission through the workflow into every
    activity (docs/design.md §13).

    Raises:
        RuntimeError: nothing answers at ``address`` (temporalio's connection error).
    """
    interceptors: list[Interceptor] = []
    if tracing_enabled(tracer_provider):
        from temporalio.contrib.opentelemetry import TracingInterceptor

        interceptors.append(TracingInterceptor(tracer_of(tracer_provider)))
    return await Client.connect(
        address, namespace=namespace, data_converter=pydantic_data_converter,
        interceptors=interceptors,
    )


async def workflow_pollers(client: Client, task_queue: str) -> int:
    """How many workers poll ``task_queue`` for workflow tasks now (0: none will run it)."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return len(response.pollers)


def workflow_id(run_id: str) -> str:
    """The workflow id of run ``run_id``: one workflow per recorded run."""
    return f"fanout-{run_id}"


async def start_job(
    client: Client, inp: JobInput, *, task_queue: str = DEFAULT_TASK_QUEUE
) -> JobHandle:
    """Start the job as a workflow; the workers on ``task_queue`` run it."""
    return await client.start_workflow(
        FanoutWorkflow.run, inp, id=workflow_id(inp.run_id), task_queue=task_queue
    )


async def still_running(client: Client, workflow: str) -> tuple[JobHandle, datetime] | None:
    """The handle of workflow ``workflow`` on the client's namespace and when it started,
    while it runs; None when it has ended or the namespace does not know it (a restarted
    ``fanout serve`` takes back the runs whose workflow still runs, docs/design.md §9)."""
    handle = client.get_workflow_handle_for(FanoutWorkflow.run, workflow)
    try:
        described = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.status != WorkflowExecutionStatus.RUNNING:
        return None
    return handle, described.start_time


async def start_recorded(
    client: Client,
    scenario: Scenario,
    store: RunStore,
    run_id: str,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    speed: float = 1.0,
    settings: TemporalSettings | None = None,
    policy: ResearchPolicy | None = None,
    asks: bool = False,
    attended: bool = False,
) -> tuple[TemporalRunRef, JobHandle]:
    """Start run ``run_id``, already registered in ``store``, on Temporal (``fanout
    serve --executor temporal`` registers its runs as they are submitted); ``policy``
    is the research tools' (where fetches may go); ``asks``: the door answers the run's
    escalations (the workflow waits for its ``decide`` signal on each); ``attended``: a
    person is attached (the workflow waits for its ``decided`` signal, docs/design.md §17)."""
    ref = TemporalRunRef(
        run_id=run_id,
        workflow_id=workflow_id(run_id),
        address=client.service_client.config.target_host,
        namespace=client.namespace,
        task_queue=task_queue,
    )
    register_run(store, ref)
    inp = JobInput.of(
        scenario, run_id=run_id, store=store.target, speed=speed, settings=settings,
        research_policy=policy,
    ).model_copy(update={"asks": asks, "attended": attended})
    # The run's trace starts here: the job's span is current while the workflow starts,
    # so the interceptor carries it to the workflow and its activities. It ends once the
    # job is submitted (the workflow's own spans say how long the run took).
    with job_span(job=scenario.scenario, query=scenario.job.query, run_id=run_id,
                  model=scenario.model):
        try:
            handle = await _started(client, inp, task_queue)
        except (RPCError, WorkflowAlreadyStartedError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            await fail_unstarted(store, inp, reason)
            raise WorkflowNotStarted(run_id, reason) from exc
    return ref, handle


async def _started(client: Client, inp: JobInput, task_queue: str) -> JobHandle:
    """The job's workflow, started: tried again while the service is briefly
    unavailable (a start that did land before its answer was lost is taken as is)."""
    transient = False
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return await start_job(client, inp, task_queue=task_queue)
        except WorkflowAlreadyStartedError:
            if not transient:
                raise  # another run's workflow has this id: nothing of ours started it
            return client.get_workflow_handle_for(FanoutWorkflow.run, workflow_id(inp.run_id))
        except RPCError as exc:
            if exc.status not in _TRANSIENT or attempt == START_ATTEMPTS:
                raise
            transient = True
            await anyio.sleep(0.5 * attempt)
    raise AssertionError("unreachable")  # the last attempt returns or raises


async def fail_unstarted(store: RunStore, inp: JobInput, reason: str) -> None:
    """Close run ``inp.run_id``, whose workflow never started, ``failed``: one gap for
    ``lead`` (``internal_error``) saying why; nothing of the job ran."""
    message = f"the run's workflow did not start on Temporal: {reason}"
    report = failed_decomposition(inp.job, lost_decomposition(inp.job, message, 0.0), 0.0)
    writer = StoreWriter(store.backend)
    try:
        routes = inp.job.routes
        escalations = [(e.subtask_id, routes.route(e).route, e.model_dump_json(by_alias=True))
                       for e in report.escalations]
        await writer.finish(inp.run_id, report.to_wire(), escalations)
    finally:
        writer.close()
