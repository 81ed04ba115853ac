"""The run store: one interface, SQLite and Postgres backends, the writer (storage only:
running, resuming and recording a run live in :mod:`coordinator.engine`)."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
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

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.store.backend": ("Backend", "redact"),
    "coordinator.store.recorder": ("RunRecorder",),
    "coordinator.store.runs": ("RunRow", "RunStatus", "RunStore", "new_run_id", "store_path"),
    "coordinator.store.schema": ("ResumeRefused", "RunNotFound", "StoreError"),
    "coordinator.store.targets": ("open_backend",),
    "coordinator.store.writer": ("StoreWriter",),
})
