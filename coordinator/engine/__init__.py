"""One engine (docs/design.md §15): a run opened in one place, run by either executor.

- ``run``: :class:`RunRequest` (what a door parsed), :func:`open_run` (the job's tools,
  recorder and trace ids) and the frozen :class:`Run` it yields; :class:`Hooks`, what
  the door hears.
- ``resume``: :class:`Start`, where a run starts (fresh, or resumed from the store), and
  the reads of a stored run the doors share (:func:`interrupted_report`).
- ``recorded``: :func:`drive`, an open run run here, recorded as it goes.
- ``executor``: :class:`LocalExecutor` and :class:`TemporalExecutor` behind one
  :class:`Executor` interface.
- ``follow``: a run another process records, heard from the store.
- ``recording``: a stored run written out as a scenario that replays it.

The job a question runs (``fanout ask``, ``POST /ask``, ``ask()``) is built by one
module, :mod:`coordinator.jobfile.ask`, before any of this.
"""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from coordinator.engine.executor import (
        Executor,
        LocalExecutor,
        TemporalExecutor,
        TemporalTarget,
    )
    from coordinator.engine.recorded import drive
    from coordinator.engine.resume import Start, interrupted_report, restored_runs
    from coordinator.engine.run import Hooks, Run, RunRequest, open_run

__all__ = [
    "Executor",
    "Hooks",
    "LocalExecutor",
    "Run",
    "RunRequest",
    "Start",
    "TemporalExecutor",
    "TemporalTarget",
    "drive",
    "interrupted_report",
    "open_run",
    "restored_runs",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.engine.executor": (
        "Executor", "LocalExecutor", "TemporalExecutor", "TemporalTarget",
    ),
    "coordinator.engine.recorded": ("drive",),
    "coordinator.engine.resume": ("Start", "interrupted_report", "restored_runs"),
    "coordinator.engine.run": ("Hooks", "Run", "RunRequest", "open_run"),
})
