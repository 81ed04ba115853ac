"""Shared fixtures: virtual time by default, every test on the anyio plugin."""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

# The pytest plugin of scenario files is tested through pytest's own pytester.
pytest_plugins = ["pytester"]


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """Run async tests on trio with a mock clock that jumps when every task waits.

    Backoff, latency and timeouts then take no wall time; see shared/clock.py.
    """
    return ("trio", {"clock": MockClock(autojump_threshold=0)})
