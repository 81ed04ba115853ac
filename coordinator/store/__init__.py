"""The run store: one interface, SQLite and Postgres backends, the writer, resume."""

from coordinator.store.backend import Backend, open_backend, redact
from coordinator.store.recorder import RunRecorder
from coordinator.store.runner import interrupted_report, restored_runs, run_recorded
from coordinator.store.runs import RunRow, RunStatus, RunStore, new_run_id, store_path
from coordinator.store.schema import ResumeRefused, RunNotFound, StoreError
from coordinator.store.writer import StoreWriter

__all__ = [
    "Backend",
    "ResumeRefused",
    "RunNotFound",
    "RunRecorder",
    "RunRow",
    "RunStatus",
    "RunStore",
    "StoreError",
    "StoreWriter",
    "interrupted_report",
    "new_run_id",
    "open_backend",
    "redact",
    "restored_runs",
    "run_recorded",
    "store_path",
]
