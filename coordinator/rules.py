"""A job's decisions, as pure functions the one flow calls (docs/design.md §15, "One engine").

The job's flow (:mod:`coordinator.flow`, run by the local backend and by the Temporal
workflow), the run store's record of the lead, and the rounds and lead activities of
Temporal workers decide the same things from the same facts. Each decision is written
once, here:

- **retry later**: which results go to the retry round (:func:`retried_later`);
- **the deadline and cancel cuts**: how long a round may still run (:func:`time_left`),
  whether another round starts (:func:`next_round_starts`), and how a subagent still
  running when the job is cut hands up (:func:`cut`);
- **follow-ups**: whether the lead plans them (:func:`follows_up`, :func:`asks_for_followups`)
  and for which gaps (:func:`open_gaps`: never one a person decided, :func:`settled`,
  :func:`split_followups`), and the job they run as (:func:`followup_job`);
- **the lead's position**: what a checkpoint keeps of where the lead stands
  (:func:`lead_position`), so a resumed run (local) or the lead's next activity
  (Temporal) continues from there;
- **the budget's shares**: what the subagents may spend of ``job.budget`` before the
  synthesis reserve (:func:`budget_shares`; it lives with the token meter in
  :mod:`subagents.models.spend`, which cannot import this package, and is named here).

What is left in the workflow is what Temporal's determinism demands: job time from
``workflow.now()`` and the job's speed, timers instead of cancel scopes, activities for
everything that does I/O, and the lending of the budget to rounds that cannot see each
other's spend (:mod:`coordinator.temporal.budget`). Nothing here reads a clock, draws a
random number or does I/O, so the workflow's sandbox may import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from coordinator.job import JobSpec
from coordinator.report import CoverageReport, Gap
from coordinator.routing import RoutingTable
from shared.escalation import Escalation
from subagents.models.spend import Spent, budget_shares
from subagents.result import LEAD
from subagents.run import SubagentRun, cut_by_deadline
from subagents.spec import SubtaskSpec

__all__ = [
    "CutTrigger",
    "asks_for_followups",
    "budget_shares",
    "closed",
    "cut",
    "follows_up",
    "followup_job",
    "handed_up",
    "lead_position",
    "next_round_starts",
    "open_gaps",
    "past_deadline",
    "retried_later",
    "review_wait",
    "settled",
    "split_followups",
    "time_left",
]

CutTrigger = Literal["deadline", "cancelled"]
# A person's decisions that settle a gap for the lead (docs/design.md §17, ``settled``).
_SETTLING = frozenset({"accept", "stop", "answer"})


# -- retry later ----------------------------------------------------------------------


def retried_later(escalation: Escalation | None, rounds: int, table: RoutingTable) -> bool:
    """Whether a subagent that ended its round with ``escalation`` runs once more in the
    retry round: it escalated, in its first round, and the job routes it ``retry_later``."""
    return escalation is not None and rounds < 2 and table.route(escalation).route == (
        "retry_later"
    )


# -- the deadline and cancel cuts -----------------------------------------------------


def time_left(deadline_s: float | None, now: float) -> float | None:
    """Job seconds until the deadline at job time ``now`` (None: the job has none); zero
    or less once it has passed."""
    return None if deadline_s is None else deadline_s - now


def past_deadline(deadline_s: float | None, now: float) -> bool:
    """Whether the job's deadline has passed at job time ``now``: from then nothing starts."""
    left = time_left(deadline_s, now)
    return left is not None and left <= 0


def review_wait(wait_s: float | None, deadline_s: float | None, now: float) -> float | None:
    """How long the lead's plan may wait for a person's review from job time ``now``:
    ``job.escalations.wait_s``, never past the job's deadline (a wait never holds the
    job past it, docs/design.md §17); None: no bound. Both engines bound it so, and a
    review that times out either way is approved ``by: timeout``."""
    bounds = [b for b in (wait_s, time_left(deadline_s, now)) if b is not None]
    return max(min(bounds), 0.0) if bounds else None


def next_round_starts(deadline_s: float | None, now: float, *, cancelled: bool) -> bool:
    """Whether another round (the retry round, the follow-ups) may start: the run was
    not cancelled and its deadline has not passed."""
    return not cancelled and not past_deadline(deadline_s, now)


def cut(run: SubagentRun, now: float, *, cancelled: bool = False) -> CutTrigger:
    """Hand up what a subagent still running when the job was cut has found, the attempt
    under way counted; a person's cancel (docs/design.md §8) says ``cancelled``, else the
    deadline cut it. Returns the trigger."""
    if cancelled:
        run.ended_s = now
        run.state = "escalated"
        run.escalate("cancelled", "the run was cancelled before this subtask finished")
        return "cancelled"
    cut_by_deadline(run, now)
    return "deadline"


def handed_up(run: SubagentRun, now: float, by: str | None) -> None:
    """Hand up what a subagent a person asked to stop has found (docs/design.md §17):
    trigger ``human_request``, its findings as partial results; on both engines."""
    run.ended_s = now
    run.state = "escalated"
    run.escalate("human_request", f"{by or 'a person'} asked this subtask to stop and hand "
                 "up what it had")


# -- follow-ups (docs/design.md §11) ----------------------------------------------------------


def settled(report: CoverageReport) -> dict[str, str]:
    """The subtasks a person's decision settled, by id, each with the escalation decided
    (its subtask id when the decision names none), from ``report.decisions`` in the
    order made (docs/design.md §17).

    A decision is the person's word on that gap, so the lead plans no follow-up for it:
    ``accept`` keeps the gap, ``stop`` ends the run, ``answer`` fills it with the
    person's finding. A decision ``by: timeout`` or ``by: deadline`` is the person's too
    (``on_timeout`` says what their silence means). ``use_tool``/``requery`` say how to
    fill it: their continuation runs before the lead's follow-ups, and a gap it filled is
    no longer open (:func:`open_gaps`); one it did not fill stays open to the lead, whose
    follow-up serves what the person asked for, a filled gap. ``retry`` settles nothing:
    the subtask ran again and its new result is its own (one that escalated again was
    decided again). A handler's bare choice (no ``do``) is no person's decision.
    """
    last: dict[str, tuple[str, str]] = {}
    for decision in report.decisions:
        if decision.do is not None:
            last[decision.subtask_id] = (decision.do,
                                         decision.escalation or decision.subtask_id)
    return {sid: eid for sid, (do, eid) in last.items() if do in _SETTLING}


def open_gaps(report: CoverageReport) -> list[Gap]:
    """The gaps a follow-up may be planned for: not the lead's own failed plan (its
    degraded plan already researched the question), not one already filled (a person's
    ``use_tool``/``requery`` continuation filled it), and not one a person decided
    (:func:`settled`)."""
    decided = settled(report)
    return [g for g in report.gaps
            if g.subtask_id != LEAD and not g.filled_by and g.subtask_id not in decided]


def closed(report: CoverageReport) -> list[str]:
    """The subtasks a follow-up is not planned for though it may name them: those a
    person decided and the gaps already filled (a scripted lead plans by its script,
    whatever it was shown; such a follow-up is checked, then dropped)."""
    shown = {g.subtask_id for g in open_gaps(report)}
    filled = [g.subtask_id for g in report.gaps if g.subtask_id != LEAD and g.filled_by]
    return [sid for sid in dict.fromkeys([*settled(report), *filled]) if sid not in shown]


def split_followups(
    specs: Sequence[SubtaskSpec], report: CoverageReport
) -> tuple[list[SubtaskSpec], list[SubtaskSpec]]:
    """``specs``, the follow-ups the lead planned from ``report``, as those that run and
    those that do not: planned for a subtask :func:`closed` names. The run store
    records only those that run; the report says what did not
    (``Gap.skipped_followups``)."""
    shut = set(closed(report))
    kept = [s for s in specs if s.followup_of not in shut]
    return kept, [s for s in specs if s.followup_of in shut]


def follows_up(job: JobSpec, *, lead: bool, lead_failed: bool, lead_plans: bool) -> bool:
    """Whether the job has a follow-up round at all.

    Args:
        job: the job as it runs (a decomposed job follows up once by default).
        lead: the job has a lead agent (a model).
        lead_failed: the lead could not plan the job; its model already failed for
            good and its degraded plan researched the question, so it is not asked again.
        lead_plans: the lead may be asked (a scripted model only when its file scripts
            a ``followups`` turn, so a scenario without one replays byte for byte).
    """
    return lead and not lead_failed and lead_plans and job.followup_rounds() > 0


def asks_for_followups(
    report: CoverageReport, deadline_s: float | None, now: float, *, cancelled: bool
) -> bool:
    """Whether the lead is asked for follow-ups now, after the retry round: some gap is
    open and another round may start (a plan past the deadline could not run)."""
    return bool(open_gaps(report)) and next_round_starts(deadline_s, now, cancelled=cancelled)


def followup_job(job: JobSpec, followups: Sequence[SubtaskSpec]) -> JobSpec:
    """The job the follow-ups run as: the job's deadline, concurrency and routing (a
    follow-up routed ``retry_later`` gets the usual retry round), their own subtasks."""
    return job.model_copy(update={"subtasks": list(followups)})


# -- the lead's position --------------------------------------------------------------


def lead_position(model_attempts: int, trace: int, spent: Spent | None) -> dict[str, Any]:
    """Where the lead stands, as the lead's checkpoint keeps it after its plan and after
    its follow-up plan: its model calls so far (a scripted model's next ``lead`` turn),
    its trace-id position, and what its calls spent (``job.budget`` counts it again on
    resume)."""
    return {
        "model_attempts": model_attempts,
        "trace": trace,
        "spent": list(spent) if spent is not None else [0, 0, 0],
    }
