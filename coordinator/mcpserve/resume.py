"""The runs a killed ``fanout mcp`` left going: found in its store at start, and resumed.

Decision (a server that dies mid-run should not lose the run): when ``fanout mcp``
starts, every run a ``fanout mcp`` recorded (the store names its job file ``fanout mcp
ask`` or ``fanout mcp run_job``) that is still marked running, but whose process is
gone (it reads ``interrupted``), is resumed automatically, as a restarted ``fanout
serve`` resumes its own: finished subtasks are kept, unfinished ones continue from their
checkpoints, the lead where it stood (:meth:`~coordinator.engine.resume.Start.resumed_from`,
what ``fanout resume`` does). Each resumption is a warning on stderr naming the run, so
an operator sees a run change hands. A client that comes back reads it as before:
``get_report(run_id)``, ``list_runs``, and ``cancel_run`` cancels it.

- Only runs a ``fanout mcp`` made: a ``fanout run`` or ``fanout serve`` run in the same
  store is theirs to resume (``fanout resume``, a restarted service).
- Only runs whose holder is dead: a run another live ``fanout mcp`` on the same store
  executes reads ``running`` and is left alone. The claim is the store's compare-and-set,
  so two servers starting together cannot both resume one run.
- A resumed run is held to the operator's settings of today, as a new request would be:
  a ``run_job`` is read again by the door's intake, an ``ask``'s folder must still be
  served. A run that no longer passes (a folder no longer served, a model whose key is
  unset, a job today's loader refuses) is left ``interrupted``, with a warning saying
  why; ``fanout resume RUN_ID`` continues it by hand.
- Resumed runs take the door's slots (``--max-runs``) like new ones, first come.
- When this server stops in turn (its client leaves, SIGTERM), a resumed run still going
  is cut and left ``interrupted``, not cancelled as the runs its clients started are:
  no client of this server asked for it, so none leaving (an inspector that only lists
  the tools) ends it; the next start resumes it again, with what it has kept.
- Runs on Temporal are not resumed here: their workers continue them. A server started
  with ``--executor temporal`` resumes nothing in this process.
- A run a killed server still had queued, waiting for a slot, was never recorded (its
  id comes when it opens): there is nothing to resume, and its client had no id for it.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.to_thread

from coordinator.engine.executor import runs_on_temporal
from coordinator.engine.resume import Start
from coordinator.mcpserve import intake
from coordinator.mcpserve.config import STORED_FILES, ArgumentRefused, DoorConfig
from coordinator.store import RunRecorder, RunStore
from shared.clock import AnyioClock
from shared.errors import FanoutError
from shared.tokens import load_encoding

log = logging.getLogger("fanout.mcp")


@dataclass(frozen=True)
class Resumption:
    """A run claimed to continue here: where it starts again, and its recorder (the
    run's next session, held by this process from the claim on)."""

    run_id: str
    spec_text: str
    file: str
    speed: float
    start: Start
    clock: AnyioClock
    recorder: RunRecorder

    @property
    def kept(self) -> int:
        """Subtasks that had finished before the run stopped."""
        return sum(run.finished for run in self.start.runs.values())


def left_running(store: RunStore) -> list[str]:
    """Runs of a ``fanout mcp`` the store still marks queued or running, oldest first
    (candidates: those whose holder is dead read ``interrupted``). Blocking."""
    files = list(STORED_FILES.values())
    with store.backend.connection() as conn:
        rows = conn.execute(
            "SELECT id FROM runs WHERE status IN ('queued', 'running') AND file IN (?, ?) "
            "ORDER BY started_at, id", files,
        ).fetchall()
    return [r[0] for r in rows]


def claim(config: DoorConfig, store: RunStore, run_id: str) -> Resumption | None:
    """Take over run ``run_id`` if it is a dead server's and still passes today's
    settings; None (and a warning saying why, when it is ours but cannot go on) if not.
    Blocking: reads and writes the store."""
    row = store.get(run_id)
    if (row.status in ("queued", "running") and row.pid == os.getpid()
            and row.host == socket.gethostname()):
        # Recorded by a dead process that had this very pid (a restarted container is
        # often pid 1 again): the store would take it for this live one.
        store.release(run_id)
        row = store.get(run_id)
    if row.status != "interrupted":
        return None  # finished meanwhile, or another live server runs it
    if runs_on_temporal(store, run_id):
        log.info("not resuming run %s: it runs on Temporal, whose workers continue it", run_id)
        return None
    try:
        job = intake.stored_job(config, row.file, row.spec_text)
        load_encoding()  # load the encoding now, not on the run's clock
        clock = AnyioClock(speed=row.speed)
        start = Start.resumed_from(job.scenario, store, run_id, clock)
        start.planning.open()  # a model whose key is unset: refused before the claim
        recorder = store.claim_for_resume(run_id)
    except (ArgumentRefused, FanoutError) as exc:
        said = " ".join(str(exc).split())
        log.warning("not resuming run %s: %s (`fanout resume %s` continues it by hand)",
                    run_id, said, run_id)
        return None
    return Resumption(run_id, row.spec_text, row.file, row.speed, start, clock, recorder)


class Resumes(Protocol):
    """What resuming needs of the door (:class:`coordinator.mcpserve.door.Door`): its
    store, and a way to start a claimed run — a protocol, so neither imports the other."""

    store: RunStore

    def resume(self, resumed: Resumption) -> object:
        """Start ``resumed`` in a slot of the door; what tracks it."""


async def resume_left(door: Resumes, config: DoorConfig) -> list[str]:
    """Claim the runs a killed ``fanout mcp`` left going and start them in ``door``;
    the ids resumed, oldest first."""
    store = door.store
    if config.executor != "local" or not store.exists():
        return []
    resumed: list[str] = []
    for run_id in await anyio.to_thread.run_sync(left_running, store):
        try:
            resumption = await anyio.to_thread.run_sync(claim, config, store, run_id)
        except Exception:
            # A run whose stored state this release cannot restore: the server starts
            # regardless, and the run stays as it was (interrupted).
            log.exception("run %s could not be resumed", run_id)
            continue
        if resumption is None:
            continue
        # A warning: a run changing hands is worth seeing in any log (as fanout serve says).
        log.warning("resuming run %s, which a stopped fanout mcp left going: %d of %d "
                    "subtasks already finished", run_id, resumption.kept,
                    len(resumption.start.runs))
        door.resume(resumption)
        resumed.append(run_id)
    return resumed
