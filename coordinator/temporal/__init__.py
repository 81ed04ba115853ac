"""Running jobs on Temporal (docs/design.md §9): the coordinator as a workflow, subagents as
activities.

The workflow schedules, routes, runs the retry round, keeps the deadline and assembles
the report with the same pure functions as the local executor; each subagent round is
an activity that heartbeats its checkpoint and resumes from it when Temporal retries it.
A job without subtasks is planned first by its lead agent, in an activity of its own.
Workers open MCP servers, research tools and model clients once; runs are recorded in the
run store. The job's decisions come from :mod:`coordinator.rules`, which the local
executor calls too.
"""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from coordinator.temporal.activities import FanoutActivities
    from coordinator.temporal.client import (
        JobHandle,
        WorkflowNotStarted,
        connect,
        start_job,
        start_recorded,
        workflow_id,
        workflow_pollers,
    )
    from coordinator.temporal.dev import (
        DevServer,
        DevServerFailed,
        TemporalUnavailable,
        free_port,
        start_dev_server,
        temporal_binary,
    )
    from coordinator.temporal.payloads import (
        DEFAULT_ADDRESS,
        DEFAULT_NAMESPACE,
        DEFAULT_TASK_QUEUE,
        Decomposition,
        DecompositionInput,
        JobInput,
        LeadPosition,
        RoundInput,
        RoundOutput,
        TemporalSettings,
    )
    from coordinator.temporal.records import TemporalRunRef, register_run, temporal_run
    from coordinator.temporal.resources import (
        ClientFactory,
        ModelClients,
        ModelPlanningUnavailable,
        PlannerFactory,
        WorkerResources,
    )
    from coordinator.temporal.worker import fanout_worker, serve_worker
    from coordinator.temporal.workflow import FanoutWorkflow

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TASK_QUEUE",
    "ClientFactory",
    "Decomposition",
    "DecompositionInput",
    "DevServer",
    "DevServerFailed",
    "FanoutActivities",
    "FanoutWorkflow",
    "JobHandle",
    "JobInput",
    "LeadPosition",
    "ModelClients",
    "ModelPlanningUnavailable",
    "PlannerFactory",
    "RoundInput",
    "RoundOutput",
    "TemporalRunRef",
    "TemporalSettings",
    "TemporalUnavailable",
    "WorkerResources",
    "WorkflowNotStarted",
    "connect",
    "fanout_worker",
    "free_port",
    "register_run",
    "serve_worker",
    "start_dev_server",
    "start_job",
    "start_recorded",
    "temporal_binary",
    "temporal_run",
    "workflow_id",
    "workflow_pollers",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.temporal.activities": ("FanoutActivities",),
    "coordinator.temporal.client": (
        "JobHandle", "WorkflowNotStarted", "connect", "start_job", "start_recorded",
        "workflow_id", "workflow_pollers",
    ),
    "coordinator.temporal.dev": (
        "DevServer", "DevServerFailed", "TemporalUnavailable", "free_port", "start_dev_server",
        "temporal_binary",
    ),
    "coordinator.temporal.payloads": (
        "DEFAULT_ADDRESS", "DEFAULT_NAMESPACE", "DEFAULT_TASK_QUEUE", "Decomposition",
        "DecompositionInput", "JobInput", "LeadPosition", "RoundInput", "RoundOutput",
        "TemporalSettings",
    ),
    "coordinator.temporal.records": ("TemporalRunRef", "register_run", "temporal_run"),
    "coordinator.temporal.resources": (
        "ClientFactory", "ModelClients", "ModelPlanningUnavailable", "PlannerFactory",
        "WorkerResources",
    ),
    "coordinator.temporal.worker": ("fanout_worker", "serve_worker"),
    "coordinator.temporal.workflow": ("FanoutWorkflow",),
})
