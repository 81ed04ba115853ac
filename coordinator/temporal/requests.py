"""A person's requests to a running round on a worker, read from its workflow
(docs/design.md §17): stop and hand up what it has, or a hint its model reads.

The door relays each request to the workflow (signal ``asked``), which keeps every
subtask's requests in order: they are in the workflow's history, so nothing said is lost
with a worker. A round with a person attached asks its workflow for them (query
``requests``) every ``request_poll_s`` while it runs. Why a query the round polls, and
not the activity's cancellation: a cancelled activity returns nothing, and a stop must
hand up what the subagent found; a hint is words for the model, which a cancel cannot
carry at all. Heartbeats go only from the activity to the server, so asking is the one
way in. What the subagent has taken of its requests travels in its heartbeat beside its
checkpoint (``asked``): a round retried on another worker takes again what its last
checkpoint had not taken, and a stop made to it stops the retry too. A hint made less
than a poll before the model's next turn is read at the turn after; one the round never
took is recorded ``hint.unread`` by the workflow once the round is back, as a local run
records it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from temporalio.client import WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError

from subagents.planners import Hint

__all__ = ["Fetch", "RoundRequests"]

Fetch = Callable[[], Awaitable[list[dict[str, Any]]]]
"""Asks the workflow for every request made to the round's subtask, oldest first."""


class RoundRequests:
    """The requests to one round, as its workflow holds them, polled while it runs.

    Args:
        fetch: asks the workflow (query ``requests``).
        start: where this round's requests begin in the subtask's list.
        taken: how many of them the subagent had taken at its last checkpoint (a round
            retried after a lost worker; 0 for a fresh one).
        poll_s: how often the workflow is asked.
    """

    def __init__(self, fetch: Fetch, *, start: int, taken: int, poll_s: float) -> None:
        self._fetch = fetch
        self._start = start
        self._poll_s = poll_s
        self.items: list[dict[str, Any]] = []
        self.taken = taken
        """How many of this round's requests the subagent has taken so far."""
        self.stop = anyio.Event()
        """Set once a person asked the round to stop."""
        self.stopped_by: str | None = None

    async def watch(self) -> None:
        """Ask the workflow now and every ``poll_s`` until cancelled."""
        while True:
            await self.poll()
            await anyio.sleep(self._poll_s)

    async def poll(self) -> None:
        """Ask the workflow once; a query that fails (the workflow's worker busy or
        briefly lost) is asked again at the next poll."""
        try:
            got = await self._fetch()
        except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
            return
        self.items = list(got[self._start:])
        for item in self.items:
            if item.get("stop") and not self.stop.is_set():
                self.stopped_by = str(item.get("by") or "") or None
                self.stop.set()

    def hints(self) -> list[Hint]:
        """The hints given since the subagent last asked, oldest first (each once)."""
        new = self.items[self.taken:]
        self.taken = max(self.taken, len(self.items))
        return [Hint(str(item["hint"]), str(item.get("by") or ""))
                for item in new if item.get("hint") is not None]
