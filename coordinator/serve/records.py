"""What the service keeps in the run store besides the runs (keys, cancels), and what it
shows of a stored run (progress, coverage so far, gaps, report).

The ``served_runs`` table (schema migration 2) marks the runs submitted through the
service, with the ``Idempotency-Key`` that made each and a cancel request that must
survive a restart. The reads of a run work for every run in the store, whoever ran it:
this server, ``fanout run``, or a killed process. Everything here blocks on the
database: call it from a worker thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from coordinator.engine.resume import interrupted_report, planned_scenario
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.report import CoverageReport, subtask_status
from coordinator.serve.refusals import SUBMITTED
from coordinator.serve.schemas import Progress, SubtaskInfo
from coordinator.store.runs import RunRow, RunStore, insert_run
from coordinator.store.writer import Tx, now_iso
from shared.errors import InputFileError
from subagents.result import SubagentResult

# The format of coordinator.store.runs.new_run_id (UTC time and eight hex digits; four
# in runs made before, which stay readable). A path segment that is not one is a
# 404 before anything is looked up.
RUN_ID: Final = re.compile(r"\d{8}-\d{6}-[0-9a-f]{4}(?:[0-9a-f]{4})?")


def valid_run_id(text: str) -> bool:
    """True when ``text`` has the shape of a run id the store makes."""
    return RUN_ID.fullmatch(text) is not None


class NotCancellable(Exception):
    """The run has ended (finished, or interrupted with no holder to tell)."""

    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(f"run {run_id} is {status}: there is nothing to cancel")
        self.status = status


class QueueFull(Exception):
    """Every slot is taken and ``max_queued`` runs wait already (503, Retry-After)."""

    def __init__(self, waiting: int, retry_after_s: int) -> None:
        super().__init__(f"{waiting} runs are waiting for a slot here; try again shortly")
        self.retry_after_s = retry_after_s


class KeyReused(Exception):
    """An Idempotency-Key already made a run from a different request."""

    def __init__(self, key: str, run_id: str, file: str = SUBMITTED) -> None:
        super().__init__(f"Idempotency-Key {key!r} already made run {run_id} from another body")
        self.key = key
        self.run_id = run_id
        self.file = file  # the request that reused it (POST /runs, POST /ask)


@dataclass(frozen=True, slots=True)
class KeyedRun:
    """The run an Idempotency-Key made, and the digest of the request that made it."""

    run_id: str
    request_sha256: str


class ServiceRecords:
    """The service's reads and writes of the run store (blocking: call from a thread)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    def by_key(self, key: str) -> KeyedRun | None:
        """The run ``key`` made before, if any."""
        with self.store.backend.connection() as conn:
            row = conn.execute(
                "SELECT run_id, request_sha256 FROM served_runs WHERE idempotency_key = ?",
                (key,),
            ).fetchone()
        return None if row is None else KeyedRun(row[0], row[1])

    @staticmethod
    def submission(
        values: tuple[Any, ...], key: str | None, request_sha256: str
    ) -> Callable[[Tx], KeyedRun]:
        """The writer operation that records a submitted run (row made by ``run_values``)
        and its key; with a key another submission took first (here or on another
        server), nothing is recorded and the earlier run is the result."""
        run_id = values[0]

        def op(tx: Tx) -> KeyedRun:
            if key is not None:
                earlier = tx.execute(
                    "SELECT run_id, request_sha256 FROM served_runs WHERE idempotency_key = ?",
                    (key,),
                ).fetchone()
                if earlier is not None:
                    return KeyedRun(earlier[0], earlier[1])
            insert_run(tx, values)
            tx.execute(
                "INSERT INTO served_runs (run_id, idempotency_key, request_sha256, "
                "submitted_at) VALUES (?,?,?,?)",
                (run_id, key, request_sha256, now_iso()),
            )
            return KeyedRun(run_id, request_sha256)

        return op

    def register(self, run_id: str, key: str | None, request_sha256: str) -> None:
        """Mark ``run_id`` as submitted through the service (with its key, if any)."""
        with self.store.backend.connection() as conn:
            conn.execute(
                "INSERT INTO served_runs (run_id, idempotency_key, request_sha256, "
                "submitted_at) VALUES (?,?,?,?)",
                (run_id, key, request_sha256, now_iso()),
            )

    @staticmethod
    def cancel_op(run_id: str) -> Callable[[Tx], None]:
        """The writer operation that records a cancel (and wakes the run's holder)."""

        def op(tx: Tx) -> None:
            tx.execute(
                "UPDATE served_runs SET cancel_requested_at = COALESCE(cancel_requested_at, ?) "
                "WHERE run_id = ?",
                (now_iso(), run_id),
            )
            tx.cancels_of.add(run_id)

        return op

    def cancel_requested(self, run_id: str) -> bool:
        """True once a cancel of ``run_id`` was recorded."""
        with self.store.backend.connection() as conn:
            row = conn.execute(
                "SELECT cancel_requested_at FROM served_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        return row is not None and row[0] is not None

    def cancels_among(self, run_ids: list[str]) -> list[str]:
        """Which of ``run_ids`` someone cancelled (on this server or another)."""
        if not run_ids:
            return []
        marks = ",".join("?" * len(run_ids))
        with self.store.backend.connection() as conn:
            rows = conn.execute(
                f"SELECT run_id FROM served_runs WHERE run_id IN ({marks}) "
                "AND cancel_requested_at IS NOT NULL",
                run_ids,
            ).fetchall()
        return [r[0] for r in rows]

    def left_running(self) -> list[str]:
        """Served runs the store still marks queued or running, oldest first (candidates
        to resume: those whose holder is dead read ``interrupted``)."""
        with self.store.backend.connection() as conn:
            rows = conn.execute(
                "SELECT r.id FROM runs r JOIN served_runs s ON s.run_id = r.id "
                "WHERE r.status IN ('queued', 'running') ORDER BY r.started_at, r.id"
            ).fetchall()
        return [r[0] for r in rows]

    def last_seq(self, run_id: str) -> int:
        """The sequence number of run ``run_id``'s newest stored event (0: none yet)."""
        with self.store.backend.connection() as conn:
            row = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?", (run_id,)
            ).fetchone()
        return int(row[0])

    def release(self, run_id: str) -> None:
        """Give up this process's claim on an unfinished run: it reads ``interrupted``.

        Done when the server stops (SIGTERM) and at start for runs whose recorded owner
        is this very pid (a restarted container is often pid 1 again): the store would
        otherwise take the dead server for a live one and refuse to resume them.
        """
        self.store.release(run_id)

    @staticmethod
    def status_op(run_id: str, status: str) -> Callable[[Tx], None]:
        """The writer operation that moves a held run between ``queued`` and ``running``
        (a queued run got its slot; a resumed one waits for one)."""

        def op(tx: Tx) -> None:
            tx.execute(
                "UPDATE runs SET status = ? WHERE id = ? AND status IN ('queued', 'running')",
                (status, run_id),
            )

        return op

    def last_states(self, run_id: str) -> dict[str, str]:
        """Each subtask's latest state event (queued, running, retrying, done, escalated)."""
        return self.store.last_states(run_id)

    def events_after(
        self, run_id: str, after: int, upto: int | None = None
    ) -> list[dict[str, Any]]:
        """The run's events with ``after < seq <= upto``, in order, as ``store.events``."""
        return self.store.events_after(run_id, after, upto)


# -- what the service shows of a stored run ----------------------------------------------

# Every other state (running, retrying, thinking: waiting on its model) is at work.
_COUNTED = frozenset({"queued", "done", "escalated"})


def scenario_of(store: RunStore, row: RunRow) -> Scenario | None:
    """The job a run was started with, with the subtasks its lead planned if it was
    decomposed (None if today's loader no longer reads it)."""
    try:
        return planned_scenario(load_scenario_text(row.spec_text, row.file), store, row.id)
    except InputFileError:
        return None


def subtasks_of(scenario: Scenario | None) -> list[SubtaskInfo]:
    """The subtasks as the job declares them."""
    if scenario is None:
        return []
    return [SubtaskInfo(id=s.id, query=s.query, weight=s.weight) for s in scenario.job.subtasks]


def progress_of(records: ServiceRecords, row: RunRow, subtask_ids: list[str]) -> Progress:
    """How many subagents are queued, at work (running, retrying, thinking), done and
    escalated."""
    states = records.last_states(row.id)
    counts = {"queued": 0, "running": 0, "done": 0, "escalated": 0}
    for sid in dict.fromkeys([*subtask_ids, *states]):
        state = states.get(sid, "queued")
        counts[state if state in _COUNTED else "running"] += 1
    return Progress(**counts)


def coverage_so_far(store: RunStore, row: RunRow, scenario: Scenario | None) -> float:
    """The weighted share of subtasks whose committed result covers them."""
    if row.report is not None:
        return float(row.report["coverage"])
    if scenario is None:
        return 0.0
    results = store.results(row.id)
    weights = {s.id: s.weight for s in scenario.job.subtasks}
    total = sum(weights.values()) or 1.0
    covered = 0.0
    for sid, raw in results.items():
        if subtask_status(SubagentResult.model_validate(raw)) in ("complete", "empty"):
            covered += weights.get(sid, 0.0)
    return covered / total


def report_of(store: RunStore, row: RunRow, scenario: Scenario | None) -> CoverageReport:
    """The finished run's report, or what an unfinished one has (``fanout report``'s)."""
    if row.report is not None:
        return CoverageReport.model_validate(row.report)
    if scenario is None:
        raise ValueError(f"run {row.id}: its job file no longer loads")
    hint = (
        "the run was interrupted before this subtask finished; a restarted `fanout serve` "
        f"resumes runs submitted to it, `fanout resume {row.id}` any other"
        if row.status == "interrupted"
        else "still running: this subtask has not finished yet"
    )
    return interrupted_report(scenario, store, row.id, resume_hint=hint)


def gaps_so_far(store: RunStore, row: RunRow, scenario: Scenario | None) -> list[dict[str, Any]]:
    """The gaps of the report, or, while the run goes on, those of finished subtasks."""
    if row.report is not None:
        return list(row.report["gaps"])
    if scenario is None:
        return []
    report = report_of(store, row, scenario)
    gaps = [g.model_dump(mode="json", by_alias=True) for g in report.gaps]
    if row.status == "interrupted":
        return gaps  # what the run lacks until it is resumed, as `fanout gaps` shows
    finished = set(store.results(row.id))
    return [g for g in gaps if g["subtask_id"] in finished]
