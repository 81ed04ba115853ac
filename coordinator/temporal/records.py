"""Recording a Temporal run in the run store, from whichever worker runs its subagents.

A Temporal run is written by every worker that runs one of its rounds, through the
store's one writer (:class:`~coordinator.store.writer.StoreWriter`, as a local run's
recorder): its events are given no sequence number, so each takes the run's next one
inside its transaction (several workers never collide), and ``claim`` names the worker
that last started one of the run's rounds, with a lease, so ``fanout runs`` shows it
running while a live worker holds it, on any machine.

The ``temporal_runs`` table names the workflow behind each Temporal run, so ``fanout
resume`` can refuse a run that Temporal owns. Everything else (results, checkpoints, the
final report) is written exactly as a local run writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coordinator.routing import RoutingTable
from coordinator.store.runs import RunStore
from coordinator.store.writer import StoreWriter
from coordinator.temporal.payloads import FinishInput

__all__ = ["StoreWriter", "TemporalRunRef", "events_after", "record_report", "register_run",
           "temporal_run"]


@dataclass(frozen=True, slots=True)
class TemporalRunRef:
    """Where a Temporal run's workflow lives."""

    run_id: str
    workflow_id: str
    address: str
    namespace: str
    task_queue: str


def register_run(store: RunStore, ref: TemporalRunRef) -> None:
    """Note that run ``ref.run_id`` runs on Temporal."""
    with store.backend.connection() as conn:
        conn.execute(
            "INSERT INTO temporal_runs VALUES (?,?,?,?,?) ON CONFLICT (run_id) DO UPDATE SET "
            "workflow_id = excluded.workflow_id, address = excluded.address, "
            "namespace = excluded.namespace, task_queue = excluded.task_queue",
            (ref.run_id, ref.workflow_id, ref.address, ref.namespace, ref.task_queue),
        )


def temporal_run(store: RunStore, run_id: str) -> TemporalRunRef | None:
    """The workflow behind run ``run_id``, or None for a local run."""
    if not store.exists():
        return None
    with store.backend.connection() as conn:
        row = conn.execute(
            "SELECT run_id, workflow_id, address, namespace, task_queue FROM temporal_runs "
            "WHERE run_id = ?",
            (run_id,),
        ).fetchone()
    return None if row is None else TemporalRunRef(*tuple(row))


async def record_report(writer: StoreWriter, inp: FinishInput) -> None:
    """Close the run with its report, as a local run's recorder does."""
    routing = RoutingTable(inp.routing)
    escalations = [
        (e.subtask_id, routing.route(e).route, e.model_dump_json(by_alias=True))
        for e in inp.report.escalations
    ]
    await writer.finish(inp.run_id, inp.report.to_wire(), escalations)


def events_after(store: RunStore, run_id: str, seq: int) -> list[dict[str, Any]]:
    """The run's trace events after sequence number ``seq``, in order (for a live view)."""
    return store.events_after(run_id, seq)
