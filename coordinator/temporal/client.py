"""Talking to Temporal: connecting with the pydantic converter, submitting and awaiting jobs."""

from __future__ import annotations

from opentelemetry.trace import TracerProvider
from temporalio.client import Client, Interceptor, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter

from coordinator.jobfile.research import ResearchPolicy
from coordinator.jobfile.scenario import Scenario
from coordinator.report import CoverageReport
from coordinator.store.runs import RunStore
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
        handle = await start_job(client, inp, task_queue=task_queue)
    return ref, handle
