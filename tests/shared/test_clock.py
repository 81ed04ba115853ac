"""The clock seam: sleeping and timeouts in virtual time."""

from __future__ import annotations

import anyio
import pytest

from shared import AnyioClock, run_in_virtual_time


@pytest.mark.anyio
async def test_anyio_clock_sleeps_in_virtual_time() -> None:
    """An hour's sleep under the mock clock advances the clock by exactly an hour."""
    clock = AnyioClock()
    start = clock.now()
    await clock.sleep(3600)
    assert clock.now() - start == 3600


@pytest.mark.anyio
async def test_anyio_clock_fail_after_raises_timeout() -> None:
    """fail_after raises TimeoutError after exactly its seconds; None means no limit."""
    clock = AnyioClock()
    start = clock.now()
    with pytest.raises(TimeoutError), clock.fail_after(30):
        await clock.sleep(100)
    assert clock.now() - start == pytest.approx(30)
    with clock.fail_after(None):
        await clock.sleep(1000)


@pytest.mark.anyio
async def test_speed_scales_the_clock() -> None:
    """A clock at speed 20 covers 20 of its seconds per loop second."""
    clock = AnyioClock(speed=20)
    loop_start, start = anyio.current_time(), clock.now()
    await clock.sleep(40)
    assert anyio.current_time() - loop_start == pytest.approx(2)
    assert clock.now() - start == pytest.approx(40)


@pytest.mark.anyio
async def test_negative_sleep_returns_at_once() -> None:
    """Sleeping a negative time does not move the clock."""
    clock = AnyioClock()
    start = clock.now()
    await clock.sleep(-5)
    assert clock.now() == start


def test_speed_must_be_positive() -> None:
    """A clock that does not move forward is a programmer error."""
    with pytest.raises(ValueError):
        AnyioClock(speed=0)


def test_run_in_virtual_time_returns_the_result() -> None:
    """run_in_virtual_time runs a coroutine function on a mock clock and returns its value."""

    async def hours(n: float) -> float:
        start = anyio.current_time()
        await anyio.sleep(n * 3600)
        return anyio.current_time() - start

    assert run_in_virtual_time(hours, 5) == 5 * 3600
