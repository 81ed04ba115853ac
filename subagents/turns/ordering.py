"""Running the calls of one turn together, with an order no event loop can change.

The calls of one model turn run at once (docs/design.md §7, "Parallel calls"), and a replay must
still give the same report and trace byte for byte. The event loop decides which of two
tasks due at one instant goes first (trio breaks a tie of deadlines by the address of a
cancel scope), so everything that a tie could reorder is put in call order here:

- **Events** are relayed in call order (:class:`Relay`): the first unfinished call's
  events go out as they happen; a later call's are held until every call before it has
  finished, each with the time it happened. A trace reads turn by turn, call by call.
- **Attempts** that start at one instant start in call order (:class:`TurnOrder`,
  through :class:`OrderedClock`): at the turn's start and when retries fall due
  together, a lower-numbered call starts first, so a tool's per-subtask response
  counter is consumed in call order.

(Jitter is the third: each call of a batch draws from its own stream; see
:mod:`subagents.turns.batch`.)
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import anyio

from shared.clock import Clock

T = TypeVar("T")

_TIE_S = 1e-6
"""Two waits that end this close together end at one instant (the clock's rounding)."""

Post = Callable[[Callable[[], None]], None]
"""Hands a call's event (a thunk) to the relay, which runs it in call order."""


class TurnOrder:
    """When several calls of a turn go on at one instant, the lower-numbered goes first.

    ``due[i]`` is when call ``i`` wakes from its current wait (None while it runs). A
    call that wakes at ``now`` waits until no call before it is due by ``now``: those
    wake at this same instant, and go first.
    """

    __slots__ = ("_changed", "_due")

    def __init__(self, n: int, now: float) -> None:
        # Every call starts at the turn's start: all are due now.
        self._due: list[float | None] = [now] * n
        self._changed = anyio.Event()

    async def go(self, i: int, now: float) -> None:
        """Call ``i`` woke at ``now``: return once every call before it due by then went."""
        while any(d is not None and d <= now + _TIE_S for d in self._due[:i]):
            await self._changed.wait()
        self.due(i, None)

    def due(self, i: int, until: float | None) -> None:
        """Call ``i`` waits until ``until`` (None: it runs, or it ended)."""
        self._due[i] = until
        if until is None:
            changed, self._changed = self._changed, anyio.Event()
            changed.set()


class OrderedClock:
    """``base`` as call ``index`` of a turn sees it: its waits end in call order at a tie."""

    __slots__ = ("_index", "_order", "base")

    def __init__(self, base: Clock, order: TurnOrder, index: int) -> None:
        self.base = base
        self._order = order
        self._index = index

    def now(self) -> float:
        """The base clock's reading."""
        return self.base.now()

    async def sleep(self, seconds: float) -> None:
        """Sleep on the base clock, then wait for the calls before this one due as well."""
        self._order.due(self._index, self.base.now() + max(0.0, seconds))
        woke = False
        try:
            await self.base.sleep(seconds)
            woke = True
        finally:
            if not woke:
                # Cut during the wait (a deadline, a cancel): it is due no more.
                self._order.due(self._index, None)
        await self._order.go(self._index, self.base.now())

    def fail_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """The base clock's timeout scope."""
        return self.base.fail_after(seconds)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """The base clock's cancel scope."""
        return self.base.move_on_after(seconds)


class Relay:
    """Runs each call's events in call order: the first unfinished call's at once, the
    others' when every call before them has finished."""

    __slots__ = ("_done", "_head", "_held")

    def __init__(self, n: int) -> None:
        self._head = 0
        self._held: list[list[Callable[[], None]]] = [[] for _ in range(n)]
        self._done = [False] * n

    def post(self, i: int, event: Callable[[], None]) -> None:
        """Run ``event`` of call ``i`` now if no call before it is running, else later."""
        if i == self._head:
            event()
        else:
            self._held[i].append(event)

    def finish(self, i: int) -> None:
        """Call ``i`` ended: the held events of the calls after it that may go, go."""
        self._done[i] = True
        while self._head < len(self._done) and self._done[self._head]:
            self._head += 1
            self._flush(self._head)

    def release(self) -> None:
        """Run every event still held, in call order (a turn cut before its end)."""
        while self._head < len(self._done):
            self._flush(self._head)
            self._head += 1

    def _flush(self, i: int) -> None:
        if i < len(self._held):
            events, self._held[i] = self._held[i], []
            for event in events:
                event()


async def run_together(
    n: int,
    clock: Clock,
    call: Callable[[int, Clock, Post], Awaitable[T]],
    results: list[T | None] | None = None,
) -> list[T]:
    """Run ``call(i, clock_i, post_i)`` for every ``i < n`` at once; the results in order.

    ``clock_i`` is the clock call ``i`` waits on (its attempts then start in call order
    at a tie) and ``post_i`` relays its events in call order. Held events still go out
    when the turn is cut (a deadline, a cancel): a cut attempt counts (docs/design.md §5.1).
    ``results`` (n Nones) is filled as calls finish: what a cut turn had, the caller
    still has. Cancellation propagates.
    """
    order = TurnOrder(n, clock.now())
    relay = Relay(n)
    if results is None:
        results = [None] * n
    done = results

    async def one(i: int) -> None:
        try:
            await order.go(i, clock.now())
            done[i] = await call(i, OrderedClock(clock, order, i), functools.partial(
                relay.post, i
            ))
        finally:
            order.due(i, None)
            relay.finish(i)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    except ExceptionGroup as group:
        # A bug in a call (tool failures are envelopes, never raised): it reads as the same
        # bug in a lone call would. Cancellation is no Exception and is not caught here.
        raise group.exceptions[0] from group
    finally:
        relay.release()
    out: list[T] = []
    for result in results:
        assert result is not None  # every call returned, or the group raised
        out.append(result)
    return out
