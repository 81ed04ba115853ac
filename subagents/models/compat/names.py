"""Tool names as the providers' APIs accept them.

Anthropic's and OpenAI's APIs take tool names of letters, digits, ``_`` and ``-`` only
(at most 64 characters); fanout's MCP and built-in tools are namespaced with a dot
(``time.get_current_time``, ``web.search``). :class:`WireNames` maps each name of a
request to a name the API takes, unique within the request, and maps the model's calls
back, so the loop, the trace and the report only ever see fanout's own names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Final

from subagents.models.base import (
    AssistantMessage,
    ModelRequest,
    ModelTurn,
    ToolResultMessage,
)

_ALLOWED: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_OTHER: Final = re.compile(r"[^A-Za-z0-9_-]")


class WireNames:
    """fanout's tool names ↔ the names one request sends."""

    def __init__(self, names: Iterable[str]) -> None:
        self.to_wire: dict[str, str] = {}
        taken: set[str] = set()
        for name in dict.fromkeys(names):
            if _ALLOWED.match(name):
                taken.add(name)
                self.to_wire[name] = name
        for name in dict.fromkeys(names):
            if name in self.to_wire:
                continue
            base = (_OTHER.sub("__", name) or "tool")[:60]
            wire, n = base, 1
            while wire in taken:
                n += 1
                wire = f"{base[:57]}_{n}"
            taken.add(wire)
            self.to_wire[name] = wire
        self.from_wire = {wire: name for name, wire in self.to_wire.items()}

    @property
    def needed(self) -> bool:
        """Whether any name changes on the wire."""
        return any(name != wire for name, wire in self.to_wire.items())

    @classmethod
    def of(cls, request: ModelRequest) -> WireNames:
        """The names of a request: its tools and the calls of its transcript."""
        names = [t.name for t in request.tools]
        for message in request.messages:
            if isinstance(message, AssistantMessage):
                names += [c.name for c in message.turn.calls]
        return cls(names)

    def wire(self, name: str) -> str:
        """The name sent for ``name`` (itself when it needs no change)."""
        return self.to_wire.get(name, name)

    def encode(self, request: ModelRequest) -> ModelRequest:
        """``request`` with every tool name as the API takes it."""
        messages = [
            AssistantMessage(self._turn(m.turn, self.wire))
            if isinstance(m, AssistantMessage)
            else replace(m, name=self.wire(m.name))
            if isinstance(m, ToolResultMessage)
            else m
            for m in request.messages
        ]
        return replace(
            request,
            messages=messages,
            tools=[replace(t, name=self.wire(t.name)) for t in request.tools],
            force_tool=None if request.force_tool is None else self.wire(request.force_tool),
        )

    def decode(self, turn: ModelTurn) -> ModelTurn:
        """``turn`` with its calls named as fanout names them (unknown names unchanged)."""
        return self._turn(turn, lambda name: self.from_wire.get(name, name))

    @staticmethod
    def _turn(turn: ModelTurn, rename: object) -> ModelTurn:
        assert callable(rename)
        if not turn.calls:
            return turn
        return replace(turn, calls=tuple(replace(c, name=rename(c.name)) for c in turn.calls))
