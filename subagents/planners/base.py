"""The planner protocol and the actions a planner proposes to the subagent loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from shared.categories import Trigger
from shared.envelope import ToolResult


@dataclass(frozen=True, slots=True)
class CallAction:
    """Call ``tool`` with ``args``; ``step`` is the plan position it serves."""

    tool: str
    args: dict[str, Any]
    step: int = 0


@dataclass(frozen=True, slots=True)
class FinishAction:
    """Stop: the subtask is done; ``text`` is a written finding when not empty."""

    text: str = ""


@dataclass(frozen=True, slots=True)
class EscalateAction:
    """Hand the subtask up on purpose with a concrete trigger."""

    trigger: Trigger
    message: str = ""


Action = CallAction | FinishAction | EscalateAction


@dataclass(frozen=True, slots=True)
class Observation:
    """A call and the envelope it produced, as the planner sees it."""

    action: CallAction
    result: ToolResult


class Planner(Protocol):
    """Proposes the next action after each envelope (None: nothing left to do).

    ``next_action(None)`` is asked at the start and when a subtask resumes after an
    escalation: the planner proposes the step that failed, with the arguments it last
    had. A validation envelope carries ``field`` and ``expected`` for a correction.
    """

    def next_action(self, last: Observation | None) -> Action | None:
        """The next action, given the last call's observation."""
        ...
