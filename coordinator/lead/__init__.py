"""The lead agent (DESIGN §7, §11): it decomposes a question, follows up on the gaps and
synthesizes the answer, around the fan-out of ``run_job``.

- ``decompose``: the planning tool ``plan_subtasks``, a checked plan, the degraded plan.
- ``followups``: the planning tool ``plan_followups``, follow-ups that fill gaps.
- ``synthesis``: the answer text that names its sources and what is missing.
- ``planning``: who plans each subtask (the scripted plan or the job's model).
- ``research``: :func:`run_research`, the whole job with its lead.
"""

from coordinator.lead.decompose import (
    LEAD,
    QUESTION,
    LeadContext,
    decompose,
    degraded_plan,
    failed_decomposition,
    lead_subtask,
    with_lead_gap,
)
from coordinator.lead.followups import plan_followups, with_followups
from coordinator.lead.planning import JobPlanning
from coordinator.lead.research import (
    FollowupHook,
    PlanHook,
    catalogue,
    planned_job,
    run_research,
    with_subtasks,
)
from coordinator.lead.synthesis import synthesize

__all__ = [
    "LEAD",
    "QUESTION",
    "FollowupHook",
    "JobPlanning",
    "LeadContext",
    "PlanHook",
    "catalogue",
    "decompose",
    "degraded_plan",
    "failed_decomposition",
    "lead_subtask",
    "plan_followups",
    "planned_job",
    "run_research",
    "synthesize",
    "with_followups",
    "with_lead_gap",
    "with_subtasks",
]
