"""The planner protocol and the actions a planner proposes to the subagent loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from shared.categories import ErrorCategory, Trigger
from shared.clock import Clock
from shared.envelope import Finding, ToolError, ToolResult
from shared.ids import TraceIds

if TYPE_CHECKING:
    from subagents.context import Context
    from subagents.executor import ExecObserver
    from subagents.spec import SubtaskSpec
    from subagents.tool import Tool


@dataclass(frozen=True, slots=True)
class CallAction:
    """Call ``tool`` with ``args``; ``step`` is the plan position it serves."""

    tool: str
    args: dict[str, Any]
    step: int = 0
    # The provider's id of this call (a model's tool_use / tool_call id); None: scripted.
    call_id: str | None = None
    # Set when the call cannot be sent as it is (a model's arguments that are not a JSON
    # object): the loop answers with this error and the tool never runs.
    invalid: ToolError | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class FinishAction:
    """Stop: the subtask is done; ``text`` is a written finding when not empty.

    ``tool`` names who wrote it (``finish`` for a plan, ``model`` for a model's answer,
    whose finding data is ``{"text": ...}``); ``complete`` is False for an answer cut
    off by the model's token limit (the subtask then ends with ``incomplete_data``).
    """

    text: str = ""
    tool: str = "finish"
    complete: bool = True


@dataclass(frozen=True, slots=True)
class EscalateAction:
    """Hand the subtask up on purpose with a concrete trigger.

    ``result`` is the failed envelope behind it (a model call that failed for good),
    ``alternatives`` what the planner suggests instead (a model's own list), and
    ``category`` the error category when there is no envelope. ``partial`` is handed up
    in ``partial_results`` without becoming a finding (a model's words that no tool
    backed: kept for a person to read, never counted as coverage).
    """

    trigger: Trigger
    message: str = ""
    alternatives: tuple[str, ...] = ()
    result: ToolResult | None = field(default=None, compare=False)
    category: ErrorCategory | None = None
    partial: tuple[Finding, ...] = field(default=(), compare=False)


Action = CallAction | FinishAction | EscalateAction


@dataclass(frozen=True, slots=True)
class Observation:
    """A call and the envelope it produced, as the planner sees it."""

    action: CallAction
    result: ToolResult


PlannerState = Literal["thinking", "throttled", "running"]


@dataclass(frozen=True, slots=True)
class Hint:
    """What a person said to a running subtask, for its model's next turn (docs/design.md §17)."""

    text: str
    by: str


def _no_hints(turn: int) -> list[str]:
    return []


def reads_hints(planner: object) -> bool:
    """Whether ``planner`` asks a model, which reads a person's hints before its next turn
    (:attr:`PlanEnv.hints`); a scripted plan has no turn to read one at."""
    return getattr(planner, "reads_hints", False) is True


@dataclass(slots=True)
class PlanEnv:
    """What the loop lends a planner for one round of a subagent.

    A planner that calls a model uses ``clock`` for time, ``trace_ids`` and
    ``trace_sink`` for the model call's trace id, ``observer`` to report every attempt
    and wait (the loop counts and traces them like a tool's), ``context`` as the
    transcript's gate and compaction state, and ``tools`` for the schemas it shows.
    ``hints(turn)`` hands over, once each, the hints a person gave since it was last
    asked; a model reads them before its turn ``turn`` (1: its first), and the loop
    records each as read then.
    """

    spec: SubtaskSpec
    tools: Mapping[str, Tool]
    context: Context
    clock: Clock
    trace_ids: TraceIds
    observer: ExecObserver
    trace_sink: Callable[[str], None]
    set_state: Callable[[PlannerState], None]
    hints: Callable[[int], list[str]] = _no_hints


class Planner(Protocol):
    """Proposes the next action after each envelope (None: nothing left to do).

    ``next_action(None, env)`` is asked at the start and when a subtask resumes after an
    escalation: the planner proposes the step that failed, with the arguments it last
    had. A validation envelope carries ``field`` and ``expected`` for a correction.
    Awaited: a model-driven planner calls its model here.
    """

    async def next_action(self, last: Observation | None, env: PlanEnv) -> Action | None:
        """The next action, given the last call's observation."""
        ...


@runtime_checkable
class TurnPlanner(Protocol):
    """A planner whose calls come in turns: several calls of one turn may run together.

    After :meth:`Planner.next_action` proposed a call, the loop may ask for the calls of
    the same turn that follow it (:meth:`more_calls`); those are proposed too, and their
    results come back in the order asked: each but the last through :meth:`observe`,
    the last as the ``last`` observation of the next :meth:`Planner.next_action`. A
    call whose result never comes back (the subagent escalated first) is proposed
    again by ``next_action(None, env)`` in the retry round, before anything else.
    """

    def more_calls(self, limit: int, env: PlanEnv) -> list[CallAction]:
        """Up to ``limit`` calls of the current turn after the one just proposed."""
        ...

    def observe(self, observation: Observation, env: PlanEnv) -> None:
        """Take one call's result without proposing anything."""
        ...
