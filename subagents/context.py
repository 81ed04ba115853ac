"""A subagent's context window: messages counted once, compacted deterministically.

The context is the subtask's query, then for every logical call the call (compact JSON)
and its final envelope (compact JSON, wire names), a result truncated to the active
tool budget. Compaction replaces every result but the newest with a one-line summary;
the query and pinned decisions (validation, business and permission outcomes: the
corrections made, rules hit, permissions denied) are never compacted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from shared.budget import ContextDecision, should_compact_or_stop
from shared.envelope import ToolResult
from shared.tokens import TokenCounter
from shared.wire import COMPACT_JSON

MessageKind = Literal["query", "call", "result", "summary"]

_PINNED_CATEGORIES = frozenset({"validation", "business", "permission"})


@dataclass(slots=True)
class Message:
    """One message in the context, with its token count taken once."""

    kind: MessageKind
    text: str
    tokens: int
    pinned: bool = False
    tool: str = ""
    summary: str = ""


def _compact_json(value: Any) -> str:
    return COMPACT_JSON.encode(value)


def item_count(data: Any) -> int:
    """How many items a result holds, for summaries: list length, or its main list's."""
    if data is None:
        return 0
    if isinstance(data, list | tuple):
        return len(data)
    if isinstance(data, dict):
        for value in data.values():
            if isinstance(value, list | tuple):
                return len(value)
        return 1 if data else 0
    return 1


def summarize(result: ToolResult) -> str:
    """The one-line summary a compacted result leaves behind."""
    if result.ok:
        state = "empty" if result.empty else "ok"
        partial = ", partial" if not result.complete else ""
        return f"[compacted] {result.tool}: {state}{partial}, {item_count(result.data)} items"
    return f"[compacted] {result.tool}: {result.category} ({result.error_type})"


class Context:
    """The messages a subagent carries, their running token count, and the gate."""

    def __init__(
        self,
        query: str,
        *,
        window: int,
        active_tool_budget: int,
        counter: TokenCounter | None = None,
    ) -> None:
        self.window = window
        self.active_tool_budget = active_tool_budget
        self.counter = counter or TokenCounter()
        self.messages: list[Message] = []
        self.compactions = 0
        self._append("query", query, pinned=True)

    @property
    def tokens(self) -> int:
        """The context's token count: the sum of its messages' counts."""
        return self.counter.total

    def _append(self, kind: MessageKind, text: str, *, pinned: bool = False, **kw: str) -> None:
        n = self.counter.add(text)
        self.messages.append(Message(kind, text, n, pinned, **kw))

    def add_call(self, tool: str, args: dict[str, Any]) -> None:
        """Record a logical call before it is made."""
        self._append("call", _compact_json({"tool": tool, "args": args}), tool=tool)

    def add_result(self, result: ToolResult) -> None:
        """Record a call's final envelope, truncated to the active tool budget."""
        text, n = self.counter.fit(result.to_json(), self.active_tool_budget)
        self.counter.total += n
        pinned = not result.ok and result.category in _PINNED_CATEGORIES
        self.messages.append(
            Message("result", text, n, pinned, tool=result.tool, summary=summarize(result))
        )

    def gate(self) -> ContextDecision:
        """The budget rule of DESIGN §2 on the current count."""
        return should_compact_or_stop(self.tokens, self.window, self.active_tool_budget)

    def compact(self) -> int:
        """Summarise every unpinned result but the newest; return the tokens freed."""
        results = [i for i, m in enumerate(self.messages) if m.kind == "result"]
        freed = 0
        replaced = False
        for i in results[:-1]:
            message = self.messages[i]
            if message.pinned:
                continue
            n = self.counter.count(message.summary)
            freed += message.tokens - n
            self.counter.total -= message.tokens - n
            self.messages[i] = Message("summary", message.summary, n, tool=message.tool)
            replaced = True
        if replaced:
            self.compactions += 1
        return freed

    def ensure_room(self) -> ContextDecision:
        """Run the gate, compacting once if it asks; the final decision is returned."""
        decision = self.gate()
        if decision.decision == "compact_before_next_tool":
            self.compact()
            decision = self.gate()
        return decision
