"""One engine (DESIGN §15): a run opened in one place, run by either executor.

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

from coordinator.engine.executor import Executor, LocalExecutor, TemporalExecutor, TemporalTarget
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
