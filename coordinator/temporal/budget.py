"""``job.budget`` on Temporal: the workflow owns the spend, each round gets an allowance.

A local run has one :class:`~subagents.models.spend.TokenMeter` that every subagent
sees in real time. On Temporal each subagent round is an activity, maybe on another
worker, and the workflow is the one place that sees every round's result: it keeps the
job's meter (:class:`WorkflowBudget`), fed by the tokens each round, the lead's plan and
its follow-up plan come back with.

What running activities cannot do is see each other's spend while they run. Given the
whole of what is left, two rounds started together could each spend it, and a job
could end at several times its budget. A demanding user wants the budget to hold, so
the workflow **lends** what is left of the subagents' share: a round is given an equal
part of what no running round holds (shared by the lanes free to take a subtask now,
at most the subtasks left), and stops itself at its next model call once its own spend
reaches that part (:class:`AllowanceMeter`), or once the job's share is spent by what
the workflow knew when the round started plus its own spend. What a round was lent and
did not spend comes back when it returns. So, as locally, the subagents overshoot
their share by at most the calls under way when it ran out; unlike locally, a round
may stop with tokens left that another round did not use (it could not know).

A new subagent (round 1, planned by the model) is started only when something can be
lent: when the share is spent it is a gap without starting, exactly as locally
(trigger ``threshold_breach``, category ``business``, 0 attempts, the same message);
when all that is left is lent to running rounds it waits for one to return (their
unspent tokens may be enough), and becomes a gap if, once none is left running, the
share is spent. A round that continues a subagent (the retry round) starts even with
nothing to lend: like a local one, it makes the call it was retrying and stops at its
next model call. The synthesis is run by the lead with the job's meter as the workflow
knows it once every round is in, so it sees the same spend as a local one.

Everything here is a pure function of the activities' results: deterministic on replay.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow

from coordinator.rules import budget_shares
from subagents.models.spend import LIMITS, Spent, TokenBudget, TokenMeter, spent_dims

__all__ = ["Allowance", "AllowanceMeter", "WorkflowBudget"]

class Allowance(BaseModel):
    """What one round may spend of each of the job's limits (None: that limit is unset)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    total_tokens: int | None = Field(default=None, ge=0)


@dataclass
class AllowanceMeter(TokenMeter):
    """A round's meter on a worker: the job's spend the workflow knew when the round
    started (``by_subtask`` empty, the totals set), this subagent's spend on top, and the
    allowance the workflow lent it."""

    subtask_id: str = ""
    allowance: Allowance | None = None
    base: Spent = field(default_factory=lambda: [0, 0, 0])
    """What the subagent had spent when the round started (its retry round's earlier spend)."""

    def subagents_stop(self) -> str | None:
        """The job's share spent (as locally), or this round's allowance spent."""
        why = super().subagents_stop()
        if why is not None or self.allowance is None:
            return why
        mine = self.by_subtask.get(self.subtask_id, [0, 0, 0])
        own = spent_dims(mine[0] - self.base[0], mine[1] - self.base[1])
        for name in LIMITS:
            given = getattr(self.allowance, name)
            if given is not None and own[name] >= given:
                what = name.removesuffix("_tokens")
                return (
                    f"this subagent spent {own[name]} {what} tokens of the {given} the "
                    "workflow lent it; on Temporal the subagents running at once share "
                    "what is left of the subagents' share of the job's budget"
                )
        return None


class WorkflowBudget:
    """The job's meter in the workflow, and what it has lent to running rounds."""

    def __init__(self, budget: TokenBudget | None) -> None:
        self.meter = TokenMeter(budget)
        self.lent: dict[str, Allowance] = {}
        self.returned = 0
        """How many lent rounds came back: a waiting subtask re-checks when it moves."""

    @property
    def budget(self) -> TokenBudget | None:
        """The job's budget (None: the job has none)."""
        return self.meter.budget

    def record(self, subtask_id: str, spent: Spent | None) -> None:
        """What ``subtask_id`` spent in all so far (a round or lead activity came back);
        what it was lent is free again."""
        if spent is not None:
            self.meter.record(subtask_id, spent)
        if self.lent.pop(subtask_id, None) is not None:
            self.returned += 1

    def others(self, subtask_id: str) -> Spent:
        """The job's known spend without ``subtask_id``'s (its round adds its own)."""
        mine = self.meter.by_subtask.get(subtask_id, [0, 0, 0])
        m = self.meter
        return [m.input_tokens - mine[0], m.output_tokens - mine[1], m.calls - mine[2]]

    def stop(self) -> str | None:
        """Why no subagent may call its model any more (the share is spent), else None."""
        return self.meter.subagents_stop()

    def free(self) -> dict[str, float]:
        """What is left of the subagents' share of each limit, less what is lent."""
        b = self.meter.budget
        assert b is not None
        spent = spent_dims(self.meter.input_tokens, self.meter.output_tokens)
        out: dict[str, float] = {}
        for name, share in budget_shares(b).items():
            lent = sum(getattr(a, name) or 0 for a in self.lent.values())
            out[name] = share - spent[name] - lent
        return out

    def lend(self, subtask_id: str, sharers: int) -> Allowance | None:
        """An equal part (of ``sharers``) of what is free, lent to ``subtask_id``'s round;
        None when nothing is free."""
        free = self.free()
        if any(left <= 0 for left in free.values()):
            return None
        parts = {name: math.ceil(left / max(1, sharers)) for name, left in free.items()}
        allowance = Allowance(**parts)
        self.lent[subtask_id] = allowance
        return allowance

    def lend_nothing(self, subtask_id: str) -> Allowance:
        """A round that must start with nothing to lend (it continues a subagent)."""
        allowance = Allowance(**{name: 0 for name in self.free()})
        self.lent[subtask_id] = allowance
        return allowance

    async def gate(
        self, subtask_id: str, *, fresh: bool, sharers: Callable[[], int], cut: asyncio.Event
    ) -> Allowance | str | None:
        """What a model-planned round may start with (in the workflow).

        Returns the allowance to start with; for a new subagent when the subagents'
        share is spent, why (it is a gap without starting); None when the deadline cut
        the wait (it stays queued).
        """
        while True:
            why = self.stop()
            if why is not None:
                return why if fresh else self.lend_nothing(subtask_id)
            allowance = self.lend(subtask_id, sharers())
            if allowance is not None:
                return allowance
            if not self.lent:  # (not reached: nothing free and nothing lent is spent)
                return self.lend_nothing(subtask_id)
            # Everything left is lent to running rounds: wait for one to bring back what
            # it did not spend (a local run would find out at its next model call).
            await workflow.wait_condition(_moved(self, self.returned, cut))
            if cut.is_set():
                return None


def _moved(budget: WorkflowBudget, seen: int, cut: asyncio.Event) -> Callable[[], bool]:
    """Whether a lent round came back since ``seen``, or the deadline cut the wait."""
    return lambda: budget.returned != seen or cut.is_set()
