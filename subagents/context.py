"""A subagent's context window: messages counted once, compacted deterministically.

The context is the subtask's query, then for every logical call the call (compact JSON)
and its final envelope (compact JSON, wire names), a result truncated to the active
tool budget. Compaction replaces every result but the newest with a one-line summary;
the query and pinned decisions (validation, business and permission outcomes: the
corrections made, rules hit, permissions denied) are never compacted.

Counting is exact and each message is counted at most once, but not before it matters:
a cl100k token is at least one UTF-8 byte, so a message's byte length bounds its token
count. While the bounds alone prove the margin is there, the gate needs no BPE at all;
the first time they do not (or anyone asks for the count), the pending messages are
counted exactly, once. The decisions are those of exact counting, always.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal

from shared.budget import ContextDecision, required_margin, should_compact_or_stop
from shared.envelope import ToolResult
from shared.tokens import TokenCounter
from shared.wire import COMPACT_JSON

# "system" and "assistant" are a model transcript's: the instructions with the tool
# schemas (pinned), and the text of the model's turns.
MessageKind = Literal["query", "call", "result", "summary", "system", "assistant", "user"]

_PINNED_CATEGORIES = frozenset({"validation", "business", "permission"})
_UNCOUNTED = -1


def _byte_bound(text: str) -> int:
    """An upper bound of ``text``'s cl100k tokens: every token is at least one byte."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


@functools.lru_cache(maxsize=256)
def _room_threshold(window: int, active_tool_budget: int) -> int:
    """The largest token count the gate lets through without compaction."""
    # continue ⇔ window − count ≥ margin ⇔ count ≤ window − margin; margin may be
    # fractional (15% of the window), so the threshold is its floor.
    return (window - required_margin(window, active_tool_budget)) // 1


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
        self._messages: list[Message] = []
        self.compactions = 0
        self._pending: list[Message] = []
        self._pending_bound = 0
        # Calls and results whose text is not built yet: it is needed only at the next
        # gate (or when someone reads the messages), so a subagent's last call and
        # result are never serialised unless asked for.
        self._unrendered: list[tuple[Message, ToolResult | dict[str, Any]]] = []
        self._room_below = _room_threshold(window, active_tool_budget)
        # What the provider's own count (usage) says beyond the sum of cl100k counts.
        self.calibration = 0
        self._append("query", query, pinned=True)

    @property
    def messages(self) -> list[Message]:
        """The messages, oldest first (the query, then each call and its result)."""
        self._render()
        return self._messages

    @messages.setter
    def messages(self, value: list[Message]) -> None:
        # Replacing the messages (restoring a checkpoint) replaces everything derived
        # from them: the running total and what is still to be counted.
        self._unrendered = []
        self._messages = value
        self._pending = []
        self._pending_bound = 0
        self.counter.total = self.calibration
        for message in value:
            if message.tokens == _UNCOUNTED:
                self._track(message)
            else:
                self.counter.total += message.tokens

    @property
    def tokens(self) -> int:
        """The context's exact token count: the sum of its messages' counts."""
        self.count_pending()
        return self.counter.total

    @property
    def exact_tokens(self) -> int | None:
        """The exact count if nothing is pending, else None (without counting anything)."""
        return None if self._pending or self._unrendered else self.counter.total

    def count_pending(self) -> None:
        """Count exactly, once, every message that so far had only its byte bound."""
        self._render()
        if not self._pending:
            return
        for message in self._pending:
            message.tokens = self.counter.count(message.text)
            self.counter.total += message.tokens
        self._pending = []
        self._pending_bound = 0

    def _track(self, message: Message) -> None:
        """Bound a message by its bytes until its exact count is needed."""
        self._pending.append(message)
        self._pending_bound += _byte_bound(message.text)

    def _append(self, kind: MessageKind, text: str, *, pinned: bool = False, **kw: str) -> None:
        message = Message(kind, text, _UNCOUNTED, pinned, **kw)
        self._messages.append(message)
        self._track(message)

    def _render(self) -> None:
        if not self._unrendered:
            return
        for message, source in self._unrendered:
            if isinstance(source, ToolResult):
                self._render_result(message, source)
            else:
                message.text = _compact_json(source)
                self._track(message)
        self._unrendered = []

    def _render_result(self, message: Message, result: ToolResult) -> None:
        text = result.to_json()
        message.summary = summarize(result)
        if _byte_bound(text) <= self.active_tool_budget:
            # It fits whatever its exact count: counted later, if ever needed.
            message.text = text
            self._track(message)
            return
        message.text, message.tokens = self.counter.fit(text, self.active_tool_budget)
        self.counter.total += message.tokens

    def add_text(self, kind: Literal["system", "assistant", "user"], text: str) -> None:
        """Record a model transcript's text: its instructions (pinned) or a turn's text."""
        self._append(kind, text, pinned=kind == "system")

    def calibrate(self, measured: int) -> None:
        """Take the provider's count of everything so far as the truth (docs/design.md §7).

        What is added later is counted with cl100k on top; compaction frees what it
        frees from that total.

        The total becomes ``measured`` whatever cl100k says of what was sent, so the
        messages still pending are not all counted: only results are (compaction frees a
        result's own count). The rest (instructions and tool schemas, the query, calls,
        the model's text) is never compacted: it is taken as counted by the provider
        (``tokens`` 0, its share in ``calibration``), which spares encoding the long
        system prompt on every subagent's first model call. The total, and so every
        decision of the gate, is what counting them all would give.
        """
        self._render()
        for message in self._pending:
            if message.kind == "result":
                message.tokens = self.counter.count(message.text)
                self.counter.total += message.tokens
            else:
                message.tokens = 0
        self._pending = []
        self._pending_bound = 0
        delta = measured - self.counter.total
        self.calibration += delta
        self.counter.total += delta

    def add_call(self, tool: str, args: dict[str, Any]) -> None:
        """Record a logical call before it is made."""
        message = Message("call", "", _UNCOUNTED, tool=tool)
        self._messages.append(message)
        self._unrendered.append((message, {"tool": tool, "args": dict(args)}))

    def add_result(self, result: ToolResult) -> None:
        """Record a call's final envelope, truncated to the active tool budget."""
        pinned = not result.ok and result.category in _PINNED_CATEGORIES
        message = Message("result", "", _UNCOUNTED, pinned, tool=result.tool)
        self._messages.append(message)
        self._unrendered.append((message, result))

    def fit(self, window: int, active_tool_budget: int) -> None:
        """Shrink the window and the tool budget to a model endpoint's (never grow them).

        A local server's window is learned at run time (docs/design.md §7): the gate then holds
        the transcript to what the endpoint can take beside its answer.
        """
        window, budget = min(window, self.window), min(active_tool_budget, self.active_tool_budget)
        if (window, budget) == (self.window, self.active_tool_budget):
            return
        shrunk = budget < self.active_tool_budget
        self.window, self.active_tool_budget = window, budget
        self._room_below = _room_threshold(window, budget)
        if shrunk:
            # Results already in the context were cut to the old budget: cut to the new.
            self.count_pending()
            for message in self.messages:
                if message.kind == "result" and message.tokens > budget:
                    before = message.tokens
                    message.text, message.tokens = self.counter.fit(message.text, budget)
                    self.counter.total -= before - message.tokens

    def has_room(self, calls: int = 1) -> bool:
        """True when the byte bounds alone prove the gate would say ``continue``.

        ``calls`` is how many calls are about to start together (one model turn's,
        docs/design.md §7 "Parallel calls"): each may bring back a result as large as the active
        tool budget, so the gate keeps room for all of them (see :meth:`gate`).
        False means "not proven": run :meth:`ensure_room` for the exact decision.
        """
        self._render()
        below = (
            self._room_below
            if calls == 1
            else _room_threshold(self.window, self.active_tool_budget * calls)
        )
        return self.counter.total + self._pending_bound <= below

    def gate(self, calls: int = 1) -> ContextDecision:
        """The budget rule of docs/design.md §2 on the current (exact) count.

        For ``calls`` calls that start together the rule keeps room for all their
        results: the margin is max(15% of the window, ``calls`` × active tool budget),
        which for one call is the rule itself.
        """
        return should_compact_or_stop(
            self.tokens, self.window, self.active_tool_budget * calls
        )

    def compact(self) -> int:
        """Summarise every unpinned result but the newest; return the tokens freed."""
        self.count_pending()
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

    def ensure_room(self, calls: int = 1) -> ContextDecision:
        """Run the gate, compacting once if it asks; the final decision is returned."""
        decision = self.gate(calls)
        if decision.decision == "compact_before_next_tool":
            self.compact()
            decision = self.gate(calls)
        return decision
