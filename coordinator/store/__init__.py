"""The SQLite run store: schema and migrations, the recorder, the reader, resume."""

from coordinator.store.recorder import RunRecorder
from coordinator.store.runner import interrupted_report, restored_runs, run_recorded
from coordinator.store.runs import RunRow, RunStore, new_run_id, store_path
from coordinator.store.schema import ResumeRefused, RunNotFound, StoreError

__all__ = [
    "ResumeRefused",
    "RunNotFound",
    "RunRecorder",
    "RunRow",
    "RunStore",
    "StoreError",
    "interrupted_report",
    "new_run_id",
    "restored_runs",
    "run_recorded",
    "store_path",
]
