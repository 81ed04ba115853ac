"""A job's token budget and what its model calls spent, per subtask and in all.

``job.budget`` bounds the tokens a job's model calls may spend. The subagents (and the
lead's decomposition) may spend the budget less a **reserve** kept for the lead's
synthesis (``synthesis_reserve``, 10 % of each limit by default). Once they have spent
it, every model-planned subagent hands up at its next model call (trigger
``threshold_breach``, category ``business``) and the ones not started yet end the same
way with 0 attempts; a call already under way finishes (the provider bills it anyway).
The synthesis runs while the budget is not spent in full, its ``max_tokens`` cut to
what is left of the output budget.

Each model planner keeps what its own calls spent in its checkpoint, and the lead's
position keeps the lead's: a resumed run's meter starts from them, so it cuts where an
uninterrupted run would. On Temporal the workflow keeps the job's meter from what each
activity brings back (``coordinator.temporal.budget``).

Tokens are what the provider reports in ``usage``; a live provider that reports none is
counted by the same estimate the limiter uses (characters / 4). A scripted turn costs
its ``usage``, else nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, model_validator

from subagents.models.base import ModelRequest, ModelTurn, Usage
from subagents.models.limiter import estimate_tokens

DEFAULT_RESERVE = 0.1


def _unset(value: object) -> bool:
    return value is None


class TokenBudget(BaseModel):
    """``job.budget``: the most tokens the job's model calls may spend (any may be unset)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # An unset limit stays out of a report's JSON (exclude_if), as it is out of the file.
    input_tokens: int | None = Field(
        default=None, gt=0, description="Input tokens, in all.", exclude_if=_unset
    )
    output_tokens: int | None = Field(
        default=None, gt=0, description="Output tokens, in all.", exclude_if=_unset
    )
    total_tokens: int | None = Field(
        default=None, gt=0, description="Input and output tokens together.", exclude_if=_unset
    )
    synthesis_reserve: float = Field(
        default=DEFAULT_RESERVE,
        ge=0,
        lt=1,
        description="The share of each limit the subagents leave for the lead's synthesis.",
    )

    @model_validator(mode="after")
    def _some_limit(self) -> TokenBudget:
        if self.input_tokens is None and self.output_tokens is None and self.total_tokens is None:
            raise ValueError("at least one of input_tokens, output_tokens, total_tokens")
        return self

    @classmethod
    def parse(cls, text: str) -> TokenBudget:
        """``--budget``: ``N`` (input and output tokens together) or ``IN:OUT`` (either empty).

        Raises:
            ValueError: not one of those forms, or a number that is not positive.
        """
        text = text.strip().replace("_", "").replace(",", "")
        if ":" not in text:
            return cls(total_tokens=_count(text, "the budget"))
        inp, _, out = text.partition(":")
        return cls(
            input_tokens=_count(inp, "input tokens") if inp else None,
            output_tokens=_count(out, "output tokens") if out else None,
        )


def _count(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what}: expected a whole number of tokens, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"{what}: expected a positive number of tokens, got {value}")
    return value


LIMITS = ("input_tokens", "output_tokens", "total_tokens")
"""A budget's limits, in the order a spent one is named."""


def budget_shares(budget: TokenBudget, *, reserve: bool = True) -> dict[str, float]:
    """Each limit ``budget`` sets, as the tokens that may be spent of it: the subagents'
    share (the limit less the synthesis reserve), or with ``reserve`` False the whole
    limit (the synthesis's). One rule for the local meter and the Temporal workflow's
    lending (``coordinator.rules`` names it)."""
    part = 1.0 - budget.synthesis_reserve if reserve else 1.0
    return {
        name: limit * part for name in LIMITS if (limit := getattr(budget, name)) is not None
    }


def spent_dims(input_tokens: int, output_tokens: int) -> dict[str, int]:
    """Tokens spent, measured as each of a budget's limits counts them."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


Spent = list[int]
"""What one subtask's model calls spent: ``[input_tokens, output_tokens, calls]`` (JSON-ready:
it travels in checkpoints and Temporal payloads)."""


def counted(turn: ModelTurn, request: ModelRequest, provider: str) -> Usage | None:
    """What ``turn`` costs: its usage, or (a live provider that sends none) the estimate;
    None for a scripted turn without usage (it costs nothing)."""
    usage = turn.usage
    if usage is None:
        if provider == "scripted":
            return None
        usage = Usage(estimate_tokens(request), max(1, math.ceil(len(turn.text) / 4)))
    return usage


def add_spent(spent: Spent, usage: Usage) -> None:
    """Add one answered model call to ``spent`` (in place)."""
    spent[0] += usage.input_tokens
    spent[1] += usage.output_tokens
    spent[2] += 1


@dataclass
class TokenMeter:
    """What the job's model calls spent, per subtask (``lead`` for the lead), against the budget."""

    budget: TokenBudget | None = None
    by_subtask: dict[str, Spent] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0

    @classmethod
    def of(cls, budget: TokenBudget | None, spent: dict[str, Spent]) -> TokenMeter:
        """A meter that has counted ``spent`` (a :meth:`snapshot`) already."""
        meter = cls(budget)
        for subtask_id, counts in spent.items():
            meter.record(subtask_id, counts)
        return meter

    def snapshot(self) -> dict[str, Spent]:
        """What each subtask spent, JSON-ready (:meth:`of` makes the meter again)."""
        return {sid: list(counts) for sid, counts in self.by_subtask.items()}

    def spend(self, subtask_id: str, usage: Usage) -> None:
        """Count one answered model call."""
        add_spent(self.by_subtask.setdefault(subtask_id, [0, 0, 0]), usage)
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.calls += 1

    def record(self, subtask_id: str, spent: Spent) -> None:
        """Set what ``subtask_id`` has spent in all so far (``[in, out, calls]``): what a
        resumed run's checkpoint says, or what a Temporal round came back with. It
        replaces what the meter held for that subtask; the totals follow."""
        old = self.by_subtask.get(subtask_id, [0, 0, 0])
        self.input_tokens += spent[0] - old[0]
        self.output_tokens += spent[1] - old[1]
        self.calls += spent[2] - old[2]
        self.by_subtask[subtask_id] = [int(spent[0]), int(spent[1]), int(spent[2])]

    def count(
        self, subtask_id: str, turn: ModelTurn, request: ModelRequest, provider: str
    ) -> Usage | None:
        """Count ``turn``: its usage, or (a live provider that sends none) the estimate.

        Returns what was counted (None: a scripted turn without usage, which is free).
        """
        usage = counted(turn, request, provider)
        if usage is not None:
            self.spend(subtask_id, usage)
        return usage

    def _over(self, *, reserve: bool) -> str | None:
        """What is spent past its share of a limit (:func:`budget_shares`), said for a
        person; None if nothing."""
        b = self.budget
        if b is None:
            return None
        spent = spent_dims(self.input_tokens, self.output_tokens)
        for name, share in budget_shares(b, reserve=reserve).items():
            if spent[name] >= share:
                what = name.removesuffix("_tokens")
                limit = getattr(b, name)
                if not reserve:
                    return f"{spent[name]} {what} tokens spent of the job's budget of {limit}"
                return (
                    f"{spent[name]} {what} tokens spent; the subagents' share of the job's "
                    f"budget of {limit} is {math.floor(share)} (the rest is kept for the "
                    "synthesis)"
                )
        return None

    def subagents_stop(self) -> str | None:
        """Why subagents may call their model no more (the budget less the reserve)."""
        if self.budget is None:
            return None
        return self._over(reserve=True)

    def spent(self) -> str | None:
        """Why the synthesis may not run (the whole budget is spent), else None."""
        return self._over(reserve=False)

    def output_left(self) -> int | None:
        """Output tokens the budget still allows (None: no output limit)."""
        b = self.budget
        if b is None:
            return None
        lefts = [
            limit - spent
            for limit, spent in (
                (b.output_tokens, self.output_tokens),
                (b.total_tokens, self.input_tokens + self.output_tokens),
            )
            if limit is not None
        ]
        return max(0, min(lefts)) if lefts else None
