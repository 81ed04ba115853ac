"""The line of callers waiting for a model endpoint's turn (:mod:`subagents.models.limiter`).

First come, first served. In virtual time many callers ask at the same instant, and
which of them the event loop runs first is the loop's own choice (trio varies it on
purpose): the first caller of an instant waits until every task is blocked, so all of
that instant's callers have asked, then lines them up by key (the subtask's id). A
replay so hands out the same turns every time. Live, callers come one at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import anyio

from shared.clock import in_virtual_time

__all__ = ["Caller", "CallerLine"]


@dataclass(eq=False)
class Caller:
    """One call's place in the line: its key, how it is told of a wait, its turn."""

    key: str
    waiting: Callable[[], None]
    turn: anyio.Event = field(default_factory=anyio.Event)  # set when it heads the line
    through: bool = False  # let through, or gone


class CallerLine:
    """Callers in order; the head is the one whose turn it is."""

    def __init__(self) -> None:
        self._line: deque[Caller] = deque()
        self._arriving: list[Caller] = []  # this instant's callers, not lined up yet
        self._blocked = False  # the head waits (for a slot or the clock): the line waits
        self._untold: list[Caller] = []  # callers in line not yet told they wait

    async def wait_turn(self, me: Caller) -> None:
        """Join the line and wait until ``me`` heads it."""
        await self._join(me)
        if not self._line or self._line[0] is not me:
            await me.turn.wait()

    async def _join(self, me: Caller) -> None:
        if not in_virtual_time():
            self._enter((me,))
            return
        arriving = self._arriving
        arriving.append(me)
        if len(arriving) > 1:
            return  # the first of this instant's callers lines this one up
        try:
            await anyio.wait_all_tasks_blocked()
        finally:
            # Cancelled or not, the callers that asked are lined up (sorted() is stable:
            # one caller's own calls stay in the order it made them).
            batch = sorted(arriving, key=lambda caller: caller.key)
            arriving.clear()
            self._enter(batch)

    def _enter(self, callers: Iterable[Caller]) -> None:
        line = self._line
        for caller in callers:
            line.append(caller)
            if line[0] is caller:
                caller.turn.set()
            elif self._blocked:
                caller.waiting()
            else:
                self._untold.append(caller)

    def head_waits(self) -> None:
        """The head has to wait: so has everyone in the line, and each is told once.

        A caller behind a head that goes at once has not waited: it is told only when a
        head in front of it (or itself, as the head) waits for a slot or the clock.
        """
        self._blocked = True
        self._line[0].waiting()
        for caller in self._untold:
            if not caller.through:
                caller.waiting()
        self._untold.clear()

    def leave(self, me: Caller) -> None:
        """``me`` is let through, or gives up (cancelled): the next caller heads the line."""
        me.through = True
        line = self._line
        if line and line[0] is me:
            line.popleft()
            self._blocked = False
            if line:
                line[0].turn.set()
            else:
                self._untold.clear()
        elif me in line:
            line.remove(me)
        elif me in self._arriving:
            self._arriving.remove(me)
