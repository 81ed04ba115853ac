"""The calls of one model turn as a planner keeps them: proposed together, answered in order.

A model turn may ask for several calls; the loop may run them together (docs/design.md §7,
"Parallel calls"). :class:`TurnCalls` is the part of the model planner that says which
of a turn's calls may start beside the first, and takes their results back in the order
the model asked, wherever each result comes from (a batch, or the retry round).
"""

from __future__ import annotations

import json
from typing import Any

from subagents.models.base import AssistantMessage, ToolCall
from subagents.planners.base import Action, CallAction, Observation, PlanEnv
from subagents.planners.prompt import ESCALATE_TOOL
from subagents.planners.transcript import Entry, ResultEntry

REPEATS = 2
"""How many times the same call may return ok: a third identical call is no progress."""


def signature(tool: str, args: dict[str, Any]) -> str:
    """One call's identity: the tool and its arguments, key order ignored."""
    return tool + json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


class TurnCalls:
    """A planner's calls in flight: ``awaiting`` in the turn's order, ``queue`` not yet
    proposed (the model planner's state; see :class:`~subagents.planners.model.ModelPlanner`)."""

    entries: list[Entry]
    queue: list[ToolCall]
    awaiting: list[CallAction]
    evidence: int
    ok_calls: dict[str, int]
    refused_last: bool

    def _propose(self, call: ToolCall) -> Action:
        raise NotImplementedError

    def observe(self, observation: Observation, env: PlanEnv) -> None:
        """Take the result of one call of a turn whose calls ran together.

        Its result is the context's newest message: the loop adds each call and its
        result in the turn's order before it tells the planner.
        """
        self._take(observation, len(env.context.messages) - 1)

    def _take(self, last: Observation, index: int) -> None:
        """Record ``last``'s result in the transcript, where the turn's order puts it."""
        i = next(
            (k for k, a in enumerate(self.awaiting) if a.call_id == last.action.call_id), None
        )
        if i is None:
            return
        answered = self.awaiting.pop(i)
        self.refused_last = last.result.category == "validation"
        if last.result.ok:
            self.evidence += 1
            key = signature(last.action.tool, last.action.args)
            self.ok_calls[key] = self.ok_calls.get(key, 0) + 1
        entry = ResultEntry(
            call_id=answered.call_id or "",
            name=answered.tool,
            index=index,
            is_error=not last.result.ok,
        )
        self.entries.insert(self._result_position(answered), entry)

    def _result_position(self, call: CallAction) -> int:
        """Where a result goes in the transcript: after the results of the calls its turn
        made before it (a call retried in the retry round answers before the later calls
        of its turn that ran beside it), so results go back in the order asked."""
        turn = next(
            (e.turn for e in reversed(self.entries) if isinstance(e, AssistantMessage)), None
        )
        order = {c.id: n for n, c in enumerate(turn.calls)} if turn is not None else {}
        mine = order.get(call.call_id or "", len(order))
        at = len(self.entries)
        while at > 0:
            before = self.entries[at - 1]
            if not isinstance(before, ResultEntry) or order.get(before.call_id, -1) <= mine:
                break
            at -= 1
        return at

    def more_calls(self, limit: int, env: PlanEnv) -> list[CallAction]:
        """Up to ``limit`` calls of the current turn that may run beside its first.

        Calls proposed before and not answered come first (the retry round); then the
        turn's next calls while each may run with the others: not ``escalate`` (it ends
        the subtask once the calls before it have answered), not a tool with side
        effects (it runs alone), not a tool off the allowlist (refused, it ends the
        subtask: nothing after it runs), and not a call the batch already holds or that
        answered ok twice already (it waits for those results: the repeat rules of
        docs/design.md §7 stay exact).
        """
        batch = self.awaiting[1 : 1 + limit]
        seen = {signature(a.tool, a.args) for a in self.awaiting[: 1 + len(batch)]}
        while len(batch) < limit and self.queue:
            call = self.queue[0]
            if call.name == ESCALATE_TOOL:
                break
            tool = env.tools.get(call.name)
            if tool is not None and (tool.side_effects or call.name not in env.spec.tools):
                break
            if call.arguments is not None:
                key = signature(call.name, call.arguments)
                if key in seen or self.ok_calls.get(key, 0) >= REPEATS:
                    break
                seen.add(key)
            self.queue.pop(0)
            action = self._propose(call)
            assert isinstance(action, CallAction)  # escalate and repeats are kept out above
            batch.append(action)
        return batch
