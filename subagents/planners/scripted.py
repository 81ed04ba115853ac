"""The scripted planner: follows a scenario's plan, correcting with ``on_validation``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from subagents.planners.base import (
    Action,
    CallAction,
    EscalateAction,
    FinishAction,
    Observation,
    PlanEnv,
)
from subagents.spec import CallStep, EscalateStep, FinishStep, PlanStep


@dataclass
class ScriptedPlanner:
    """Follows a fixed plan; corrects a call with ``on_validation`` after a validation error."""

    plan: list[PlanStep]
    position: int = 0
    current_args: dict[str, Any] | None = None

    async def next_action(
        self, last: Observation | None, env: PlanEnv | None = None
    ) -> Action | None:
        """The step at the current position, corrected, repeated or advanced."""
        return self.decide(last)

    def decide(self, last: Observation | None) -> Action | None:
        """The same decision, synchronously (the scripted plan needs no I/O)."""
        if last is not None:
            if last.result.ok:
                self._advance()
            elif last.result.category == "validation":
                step = self.plan[self.position]
                correction = step.on_validation if isinstance(step, CallStep) else None
                # A shallow update; when it changes nothing the loop sees the same call
                # again and ends with no_progress instead of sending it.
                args = {**last.action.args, **(correction or {})}
                self.current_args = args
                return CallAction(last.action.tool, args, self.position)
        return self._propose()

    def _advance(self) -> None:
        self.position += 1
        self.current_args = None

    def _propose(self) -> Action | None:
        if self.position >= len(self.plan):
            return None
        step = self.plan[self.position]
        if isinstance(step, FinishStep):
            self._advance()
            return FinishAction(step.finish)
        if isinstance(step, EscalateStep):
            self._advance()
            return EscalateAction(step.escalate, step.message or "")
        if self.current_args is None:
            self.current_args = dict(step.args)
        return CallAction(step.call, dict(self.current_args), self.position)

    def snapshot(self) -> dict[str, Any]:
        """The planner's position, for a run store to resume from."""
        return {"position": self.position, "current_args": self.current_args}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`snapshot`."""
        self.position = int(state["position"])
        args = state.get("current_args")
        self.current_args = dict(args) if args is not None else None
