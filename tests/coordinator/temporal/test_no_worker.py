"""A run on a task queue no worker polls says so, instead of waiting at `queued` mute."""

from __future__ import annotations

import time

import anyio
import pytest

from coordinator.engine.follow import no_worker_hint
from coordinator.temporal import connect, workflow_pollers
from coordinator.temporal.dev import DevServer
from tests.coordinator.temporal.conftest import Workers

pytestmark = pytest.mark.anyio


async def test_an_unpolled_queue_gets_a_hint_and_a_polled_one_none(
    dev_server: DevServer, workers: Workers
) -> None:
    """With no worker on the queue the hint names the queue and the command that starts
    one; with a worker polling it, the check finds the poller and says nothing."""
    client = await connect(dev_server.address)
    said: list[str | None] = []

    def say(hint: str | None) -> None:
        said.append(hint)

    await no_worker_hint(
        client, "nobody-polls-this", dev_server.address, lambda: len(said) >= 1, say,
        after_s=0, every_s=0,
    )
    assert said[0] is not None and said[-1] is None  # cleared once the run progressed
    assert "nobody-polls-this" in said[0]
    assert f"fanout worker --address {dev_server.address} --task-queue nobody-polls-this" in (
        said[0]
    )

    workers.start("hint-polled")
    # A worker process polls once it has started: wait for that event, not a time.
    deadline = time.monotonic() + 60
    while await workflow_pollers(client, "hint-polled") < 1:
        assert time.monotonic() < deadline, "the worker never polled its queue"
        await anyio.sleep(0.2)
    said.clear()
    await no_worker_hint(
        client, "hint-polled", dev_server.address, lambda: len(said) >= 1, say,
        after_s=0, every_s=0,
    )
    assert said[0] is None
