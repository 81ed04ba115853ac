"""Shared fixtures: virtual time by default, every test on the anyio plugin."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from trio.testing import MockClock

# The pytest plugin of scenario files is tested through pytest's own pytester; the tiers
# mark what `make test-fast` leaves out, and fail an unmarked test that starts a process.
pytest_plugins = ["pytester", "tests.tiers"]

# Document search is lexical in the tests, as on a machine without the semantic extra, so
# a ranking a test pins does not depend on what is installed (subprocesses inherit it);
# the tests of hybrid search turn it on for themselves (tests/subagents/research/
# test_semantic.py).
os.environ.setdefault("FANOUT_SEMANTIC", "off")


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """Run async tests on trio with a mock clock that jumps when every task waits.

    Backoff, latency and timeouts then take no wall time; see shared/clock.py.
    """
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Any]:
    """A throwaway Postgres cluster for the session (Debian's server binaries).

    Skipped, with the reason, only where the binaries are truly absent outside CI; under
    CI (``CI`` set, as .ci/run sets it, which installs them) their absence fails.
    """
    from tests.loopback.postgres import PostgresCluster, server_binaries

    if server_binaries() is None:
        reason = ("Postgres server binaries are not installed (apt-get install -y postgresql)"
                  "; in CI (CI set) this test fails instead")
        if os.environ.get("CI"):
            pytest.fail(reason.split(";")[0])
        pytest.skip(reason)
    cluster = PostgresCluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def _fresh_endpoint_limiters() -> None:
    """Each test starts with no shared endpoint limiter and no learned endpoint facts: one
    test's 429 or context window never reaches another's (session servers share ports)."""
    from subagents.models.endpoints.facts import forget_endpoints
    from subagents.models.limiter import forget_shared_limiters

    forget_shared_limiters()
    forget_endpoints()
