"""The clock seam: everything that waits or times out goes through a Clock.

Live runs use :class:`AnyioClock` on the asyncio backend. Replays and tests use
virtual time: anyio's trio backend with ``trio.testing.MockClock(autojump_threshold=0)``,
which jumps the clock ahead whenever every task is blocked, so ``anyio.sleep`` and
``anyio.fail_after`` both run in virtual time with the same code. We chose trio's
MockClock over patching asyncio's loop (looptime) because it is part of trio's public
testing API and needs no loop patching.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    from trio.testing import MockClock as MockClockType

T = TypeVar("T")

MAX_SECONDS: Final = 1e9
"""The longest duration a job may state (about 31 years). Sums of such durations stay
finite, so a clock never reaches infinity, where a sleep would never end."""


class Clock(Protocol):
    """Time as fanout sees it: now, sleep and a timeout scope."""

    def now(self) -> float:
        """Seconds on this clock (only differences are meaningful)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...

    def fail_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """A scope that raises TimeoutError after ``seconds`` of this clock's time."""
        ...

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """A cancel scope that quietly ends its body after ``seconds`` of this clock's time."""
        ...


class AnyioClock:
    """The event loop's clock, optionally running ``speed`` times faster than real time.

    With ``speed=1`` this is plain anyio; under trio's MockClock it is virtual time.
    """

    def __init__(self, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed

    def now(self) -> float:
        """Loop time scaled to this clock's seconds."""
        return anyio.current_time() * self.speed

    def sleep(self, seconds: float) -> Coroutine[Any, Any, None]:
        """Sleep ``seconds`` of this clock's time (``await clock.sleep(s)``).

        A plain function returning anyio's coroutine: one frame fewer for every waiting
        subagent (at full fan-out all of them wait at once).
        """
        return anyio.sleep(max(0.0, seconds) / self.speed)

    def fail_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """anyio.fail_after in this clock's seconds."""
        return _FailAfter(None if seconds is None else seconds / self.speed)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """anyio.move_on_after in this clock's seconds."""
        return anyio.move_on_after(None if seconds is None else seconds / self.speed)

    def reader(self) -> Callable[[], float]:
        """``now`` bound to the running event loop: the same readings, found faster.

        ``anyio.current_time()`` looks the running library up on every call, which a
        fan-out of thousands of subagents pays many times per call; a job runs on one
        loop, so the lookup can be done once. Call it inside that loop.
        """
        loop_time = _loop_time()
        if loop_time is None:
            return self.now
        speed = self.speed
        if speed == 1.0:
            return loop_time  # x * 1.0 is x: the readings are identical
        return lambda: loop_time() * speed


def _loop_time() -> Callable[[], float] | None:
    """What anyio.current_time() calls on the running loop, or None if unsure."""
    # Looked up, not imported: no asyncio loop runs in a process that never imported it
    # (a replay runs on trio), and importing it costs every command ~30 ms.
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        try:
            return asyncio.get_running_loop().time  # type: ignore[no-any-return]
        except RuntimeError:
            pass
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            return None
        current_time: Callable[[], float] = trio.current_time
        return current_time
    return None


class _FailAfter:
    """``anyio.fail_after`` as a plain class: the same cancel scope, deadline and
    TimeoutError, without two nested generator context managers per tool attempt."""

    __slots__ = ("_delay", "_scope")

    def __init__(self, delay: float | None) -> None:
        self._delay = delay
        self._scope: anyio.CancelScope | None = None

    def __enter__(self) -> anyio.CancelScope:
        deadline = math.inf
        if self._delay is not None:
            # One float step past the limit: a body that needs exactly its ``seconds``
            # (a latency equal to the tool timeout, docs/design.md §5.1: only a latency *above* it
            # is a timeout) finishes; at an equal deadline trio would cancel it.
            deadline = math.nextafter(anyio.current_time() + self._delay, math.inf)
        self._scope = anyio.CancelScope(deadline=deadline)
        return self._scope.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        scope = self._scope
        assert scope is not None
        suppress = bool(scope.__exit__(exc_type, exc, tb))
        if scope.cancelled_caught and anyio.current_time() >= scope.deadline:
            raise TimeoutError
        return suppress


class PacedClock:
    """Virtual time kept at a real pace: a clock for simulated work on a busy machine.

    A reading advances by exactly the seconds slept (or timed out), never by the time the
    machine spent between waits, so what is decided from readings (a retry's time
    budget, a deadline) is what a replay decides, however loaded the machine; and each
    wait still takes ``seconds / speed`` of real time, so the work goes at the pace it
    was asked for. Tasks waiting at once move it to the latest of their wake-ups, which
    come in order (one event loop's timers). For one subagent's simulated round (on
    Temporal); a clock shared by many subagents would let one's lag show in another's
    readings.

    Its timeouts cut in its own time too: a sleep that would end past the end of a
    scope of this clock around it ends at the scope's end and cuts the scope there. A
    timer in real time alone raced the work on a stalled machine: a loop held up past
    both the sleep's wake-up and the scope's deadline woke the task already cancelled,
    and a call that ends well inside its timeout timed out.
    """

    __slots__ = ("_now", "speed")

    def __init__(self, speed: float = 1.0, start: float = 0.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self._now = start

    def now(self) -> float:
        """The seconds slept so far, from ``start``."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds / speed`` of real time, then read ``seconds`` later than now;
        inside a scope of this clock that ends sooner, wait until its end and cut it."""
        seconds = max(0.0, seconds)
        until = self._now + seconds
        cut = self._first_cut(until)
        if cut is None:
            await anyio.sleep(seconds / self.speed)
            self.advance_to(until)
            return
        await anyio.sleep(max(0.0, cut.end - self._now) / self.speed)
        self.advance_to(cut.end)
        cut.expire()
        await anyio.lowlevel.checkpoint()  # the cut, delivered here

    def _first_cut(self, until: float) -> _PacedScope | None:
        """The scope of this clock around the caller that ends first, if before ``until``."""
        first: _PacedScope | None = None
        for scope in _PACED_SCOPES.get():
            if scope.clock is self and scope.end < until and (
                first is None or scope.end < first.end
            ):
                first = scope
        return first

    def advance_to(self, reading: float) -> None:
        """Read at least ``reading`` from now on (a wake-up or a timeout)."""
        if reading > self._now:
            self._now = reading

    def fail_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """A timeout of ``seconds`` of this clock's time: TimeoutError, read at its end."""
        return _PacedScope(self, seconds, fail=True)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """A cancel scope of ``seconds`` of this clock's time, read at its end if cut."""
        return _PacedScope(self, seconds, fail=False)

    def reader(self) -> Callable[[], float]:
        """``now`` (the readings need no loop)."""
        return self.now


_PACED_SCOPES: ContextVar[tuple[_PacedScope, ...]] = ContextVar("paced_scopes", default=())
"""The paced scopes with an end around the running code (its task inherits them)."""


class _PacedScope:
    """A cancel scope that ends ``seconds`` of its clock's time after it starts: the
    clock's sleeps inside it cut it at its end (:meth:`PacedClock.sleep`). A body that
    waits on anything else is cut in real time, with a margin: at twice the pace, and at
    least a second later. When it cuts its body the clock reads exactly its end, and a
    ``fail`` scope raises TimeoutError."""

    __slots__ = ("_fail", "_scope", "_seconds", "_token", "clock", "end")

    def __init__(self, clock: PacedClock, seconds: float | None, *, fail: bool) -> None:
        self.clock = clock
        self._seconds = seconds
        self._fail = fail
        self.end = math.inf
        self._scope: anyio.CancelScope | None = None
        self._token: Token[tuple[_PacedScope, ...]] | None = None

    def __enter__(self) -> anyio.CancelScope:
        deadline = math.inf
        if self._seconds is not None:
            self.end = self.clock.now() + self._seconds
            real = self._seconds / self.clock.speed
            deadline = anyio.current_time() + real + max(real, 1.0)
            self._token = _PACED_SCOPES.set((*_PACED_SCOPES.get(), self))
        self._scope = anyio.CancelScope(deadline=deadline)
        return self._scope.__enter__()

    def expire(self) -> None:
        """The clock reached the end: cut the body."""
        assert self._scope is not None
        self._scope.cancel()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        scope = self._scope
        assert scope is not None
        try:
            suppress = bool(scope.__exit__(exc_type, exc, tb))
        finally:
            if self._token is not None:
                _PACED_SCOPES.reset(self._token)
        if scope.cancelled_caught:
            self.clock.advance_to(self.end)
            if self._fail:
                raise TimeoutError
        return suppress


def speed_of(clock: Clock) -> float:
    """How many times faster than real time ``clock`` runs (1 for a virtual clock)."""
    # Any clock that wraps another (the job's clock, a call's clock within a turn) names
    # it ``base``: the speed is the innermost clock's.
    while (base := getattr(clock, "base", None)) is not None:
        clock = base
    return clock.speed if isinstance(clock, AnyioClock | PacedClock) else 1.0


class RealTimeClock:
    """``base`` in real seconds: readings, waits and timeouts.

    ``--speed`` scales simulated time only (docs/design.md §7): a real model or MCP call keeps
    its real timeout, a real server's Retry-After is waited for in real seconds, and a
    real call's envelope says how long it really took (``elapsed_s``), so a recording
    replays it with its real latency against its real timeout. Job times (deadlines, the
    trace's ``at``) stay on the job's clock.
    """

    __slots__ = ("base", "speed")

    def __init__(self, base: Clock, speed: float) -> None:
        self.base = base
        self.speed = speed

    def now(self) -> float:
        """The base clock's reading, in real seconds."""
        return self.base.now() / self.speed

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of real time."""
        await self.base.sleep(seconds * self.speed)

    def fail_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """A timeout of ``seconds`` real seconds."""
        return self.base.fail_after(None if seconds is None else seconds * self.speed)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """A cancel scope of ``seconds`` real seconds."""
        return self.base.move_on_after(None if seconds is None else seconds * self.speed)


def real_time(clock: Clock) -> Clock:
    """``clock`` with waits and timeouts in real seconds (itself when it is not scaled)."""
    speed = speed_of(clock)
    return clock if speed == 1.0 else RealTimeClock(clock, speed)


def in_virtual_time() -> bool:
    """Whether this task runs on trio's MockClock (a replay, a virtual-time test): a
    worker thread's real seconds would then let the clock jump past any timeout."""
    trio = sys.modules.get("trio")
    if trio is None:
        return False
    try:
        clock = trio.lowlevel.current_clock()
    except RuntimeError:
        return False
    return type(clock).__name__ == "MockClock"


@functools.cache
def _mock_clock_class() -> type[MockClockType]:
    """trio's ``MockClock``, imported without pytest (~65 ms of a replay's start-up)."""
    # trio.testing imports pytest where it is installed, only for RaisesGroup's
    # ExceptionInfo, and falls back to its own when pytest is absent (trio does not
    # depend on pytest). A ``None`` in sys.modules makes that import fail (the import
    # system's documented way to block a module); it is undone at once, so a later
    # ``import pytest`` works. Where pytest is already loaded (the test suite), nothing
    # changes.
    blocked = "pytest" not in sys.modules
    if blocked:
        sys.modules["pytest"] = None  # type: ignore[assignment]
    try:
        from trio.testing import MockClock
    finally:
        if blocked and sys.modules.get("pytest", False) is None:
            del sys.modules["pytest"]
    return MockClock


def run_in_virtual_time(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``fn(*args)`` to completion in virtual time and return its result.

    Backoff, latency and timeouts advance a mock clock, so hours replay in milliseconds.
    Work in worker threads is not virtualised: virtual-time runs must stay on the loop.

    trio runs the tasks woken at one instant in an order it varies on purpose; whatever
    a replay's report depends on is ordered by key instead (the model endpoint's limiter
    lines up the callers of one instant by subtask id), so a replay gives the same report
    every time without fixing the scheduler's order.
    """
    MockClock = _mock_clock_class()
    return anyio.run(
        fn, *args, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)}
    )


class JobClock:
    """A clock that reads seconds since a job started (plus ``offset`` for a resumed run).

    Reports, traces and deadlines use it so times mean the same on any backend.
    """

    def __init__(self, base: Clock, *, offset: float = 0.0) -> None:
        self.base = base
        # A job runs on one loop: read the base clock through a reader bound to it.
        self._read = base.reader() if isinstance(base, AnyioClock) else base.now
        self._origin = self._read() - offset

    def now(self) -> float:
        """Seconds since the job started, to the nanosecond."""
        return round(self._read() - self._origin, 9)

    def sleep(self, seconds: float) -> Coroutine[Any, Any, None]:
        """Sleep on the base clock (its coroutine, without a frame of this clock's own)."""
        return self.base.sleep(seconds)

    def fail_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """The base clock's timeout scope."""
        return self.base.fail_after(seconds)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """The base clock's cancel scope."""
        return self.base.move_on_after(seconds)
