"""The run store: one interface, SQLite and Postgres backends, the writer (storage only:
running, resuming and recording a run live in :mod:`coordinator.engine`)."""

from coordinator.store.backend import Backend, redact
from coordinator.store.recorder import RunRecorder
from coordinator.store.runs import RunRow, RunStatus, RunStore, new_run_id, store_path
from coordinator.store.schema import ResumeRefused, RunNotFound, StoreError
from coordinator.store.targets import open_backend
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
    "new_run_id",
    "open_backend",
    "redact",
    "store_path",
]
