"""Shared fixtures: virtual time by default, every test on the anyio plugin."""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """Run async tests on trio with a mock clock that jumps when every task waits.

    Backoff, latency and timeouts then take no wall time; see shared/clock.py.
    """
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


@pytest.fixture(autouse=True)
def _fresh_endpoint_limiters() -> None:
    """Each test starts with no shared endpoint limiter: one test's 429 never slows another's."""
    from subagents.models.limiter import forget_shared_limiters

    forget_shared_limiters()
