"""The lead agent (docs/design.md §7, §11): it decomposes a question, follows up on the gaps and
synthesizes the answer, around the fan-out of ``run_job``.

- ``decompose``: the planning tool ``plan_subtasks``, a checked plan, the degraded plan.
- ``followups``: the planning tool ``plan_followups``, follow-ups that fill gaps.
- ``synthesis``: the answer text that names its sources and what is missing.
- ``checks``: the answer checks itself (``answer.checks``: not the prompt, not cut off,
  real citations, numbers found in the sources it cites).
- ``extractive``: the answer quoted from the findings, for a rejected answer or a run
  without a model.
- ``planning``: who plans each subtask (the scripted plan or the job's model).
- ``research``: the lead's plan as the job runs it (its catalogue, the planned job).
"""

from typing import TYPE_CHECKING

# Bound now, not on first use: `decompose` is also the name of a submodule, and importing
# it (any module of the lead does) binds the module to the package under that name.
from coordinator.lead.decompose import decompose
from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from coordinator.lead.checks import check_answer
    from coordinator.lead.decompose import (
        QUESTION,
        LeadContext,
        degraded_plan,
        failed_decomposition,
        lead_subtask,
        with_lead_gap,
    )
    from coordinator.lead.extractive import extractive_answer, with_extractive_answer
    from coordinator.lead.followups import plan_followups, with_followups
    from coordinator.lead.planning import JobPlanning
    from coordinator.lead.research import (
        FollowupHook,
        PlanHook,
        catalogue,
        planned_job,
        with_subtasks,
    )
    from coordinator.lead.synthesis import synthesize, with_model_answer

__all__ = [
    "QUESTION",
    "FollowupHook",
    "JobPlanning",
    "LeadContext",
    "PlanHook",
    "catalogue",
    "check_answer",
    "decompose",
    "degraded_plan",
    "extractive_answer",
    "failed_decomposition",
    "lead_subtask",
    "plan_followups",
    "planned_job",
    "synthesize",
    "with_extractive_answer",
    "with_followups",
    "with_lead_gap",
    "with_model_answer",
    "with_subtasks",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.lead.checks": ("check_answer",),
    "coordinator.lead.decompose": (
        "QUESTION", "LeadContext", "degraded_plan", "failed_decomposition",
        "lead_subtask", "with_lead_gap",
    ),
    "coordinator.lead.extractive": ("extractive_answer", "with_extractive_answer"),
    "coordinator.lead.followups": ("plan_followups", "with_followups"),
    "coordinator.lead.planning": ("JobPlanning",),
    "coordinator.lead.research": (
        "FollowupHook", "PlanHook", "catalogue", "planned_job", "with_subtasks",
    ),
    "coordinator.lead.synthesis": ("synthesize", "with_model_answer"),
})
