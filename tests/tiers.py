"""The test tiers: which tests ``make test-fast`` leaves to ``make test`` (README "Tests").

``make test-fast`` runs ``-m "not process and not slow and not live"``. The rule:

- ``live``: every test under ``tests/live/`` (a real model on a real server).
- ``process``: a test that starts another process or needs one started for it. It is
  marked here when it uses a fixture of :data:`PROCESS_FIXTURES`, or by hand where it
  starts one itself (``pytestmark = pytest.mark.process`` on its module, or the mark on
  its class, test or parameter). The rule holds by construction: a test without the mark
  that starts a process, in its setup or its body, fails and says so (an audit hook
  watches ``subprocess.Popen``, ``os.fork``, ``os.posix_spawn``, ``os.system``).
- ``slow``: by hand, an in-process test that takes seconds on its own (over ~2 s on an
  idle 2-core machine): a large generated input, many hypothesis examples, a benchmark.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

# Fixtures that start a process (or a cluster of them): a test using one is `process`.
PROCESS_FIXTURES = frozenset({
    "postgres_cluster",  # tests/conftest.py: a throwaway Postgres
    "dev_server", "workers",  # tests/coordinator/temporal/conftest.py
    "_launched",  # tests/coordinator/serve/conftest.py: `fanout serve` subprocesses
    "served",  # tests/coordinator/serve/test_ask.py: a `fanout serve` with a docs folder
    "live_server", "live_fc_server",  # tests/live/conftest.py: the llama server
})
LIVE = Path(__file__).resolve().parent / "live"
_SPAWNS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn",
                     "os.system", "os.spawn", "os.exec"})


class _Watch:
    """What processes the running test (when it is not marked `process`) started."""

    active = False
    started: list[str] = []  # noqa: RUF012 - one watch per interpreter, reset per phase


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _Watch.active and event in _SPAWNS:
        _Watch.started.append(f"{event}: {args[1] if event == 'subprocess.Popen' else args}")


sys.addaudithook(_audit)
# The model SDKs send the processor's name, which `platform` learns by running `uname -p`
# once and caching: learnt here, before any test, so no test is blamed for asking first.
platform.processor()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each item `live` or `process` by where it lives and what fixtures it uses."""
    for item in items:
        if item.path.is_relative_to(LIVE):
            item.add_marker(pytest.mark.live)
        if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.process)


def _watched(item: pytest.Item) -> Generator[None, object, object]:
    if item.get_closest_marker("process") is not None:
        return (yield)
    _Watch.active, _Watch.started = True, []
    try:
        result = yield
    finally:
        _Watch.active = False
    if _Watch.started:
        pytest.fail(
            f"{item.nodeid} started a process but is not marked `process` (tests/tiers.py):"
            "\n  " + "\n  ".join(_Watch.started[:5]), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """Watch a test's setup: a fixture that starts a process makes the test `process`."""
    return (yield from _watched(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Watch a test's body. (Teardown is not: a session fixture's finaliser, stopping a
    server, runs in whichever test happens to be last.)"""
    return (yield from _watched(item))
