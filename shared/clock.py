"""The clock seam: everything that waits or times out goes through a Clock.

Live runs use :class:`AnyioClock` on the asyncio backend. Replays and tests use
virtual time: anyio's trio backend with ``trio.testing.MockClock(autojump_threshold=0)``,
which jumps the clock ahead whenever every task is blocked, so ``anyio.sleep`` and
``anyio.fail_after`` both run in virtual time with the same code. We chose trio's
MockClock over patching asyncio's loop (looptime) because it is part of trio's public
testing API and needs no loop patching.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

import anyio

T = TypeVar("T")


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

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of this clock's time."""
        await anyio.sleep(max(0.0, seconds) / self.speed)

    def fail_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """anyio.fail_after in this clock's seconds."""
        return anyio.fail_after(None if seconds is None else seconds / self.speed)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """anyio.move_on_after in this clock's seconds."""
        return anyio.move_on_after(None if seconds is None else seconds / self.speed)


def run_in_virtual_time(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``fn(*args)`` to completion in virtual time and return its result.

    Backoff, latency and timeouts advance a mock clock, so hours replay in milliseconds.
    Work in worker threads is not virtualised: virtual-time runs must stay on the loop.
    """
    from trio.testing import MockClock

    return anyio.run(
        fn, *args, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)}
    )


class JobClock:
    """A clock that reads seconds since a job started (plus ``offset`` for a resumed run).

    Reports, traces and deadlines use it so times mean the same on any backend.
    """

    def __init__(self, base: Clock, *, offset: float = 0.0) -> None:
        self.base = base
        self._origin = base.now() - offset

    def now(self) -> float:
        """Seconds since the job started, to the nanosecond."""
        return round(self.base.now() - self._origin, 9)

    async def sleep(self, seconds: float) -> None:
        """Sleep on the base clock."""
        await self.base.sleep(seconds)

    def fail_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """The base clock's timeout scope."""
        return self.base.fail_after(seconds)

    def move_on_after(self, seconds: float | None) -> AbstractContextManager[Any]:
        """The base clock's cancel scope."""
        return self.base.move_on_after(seconds)
