"""fanout's coordinator: the user's Python API (DESIGN §14).

``ask`` and ``run_file`` run a job and return its :class:`CoverageReport`;
``ask_events`` and ``run_file_events`` yield its progress events as it runs
(:class:`JobEvents`). The report's parts are exported for type hints. Everything else
(the engine, the run stores, the views, the scenario loader, replay) lives in its own
module: ``coordinator.jobfile``, ``coordinator.replay``, ``coordinator.store``,
``coordinator.views``, and so on.
"""

from coordinator.api import (
    JobEvents,
    ask,
    ask_events,
    run_file,
    run_file_events,
)
from coordinator.report import (
    Answer,
    CoverageReport,
    Gap,
    Section,
    SubtaskOutcome,
)

__all__ = [
    "Answer",
    "CoverageReport",
    "Gap",
    "JobEvents",
    "Section",
    "SubtaskOutcome",
    "ask",
    "ask_events",
    "run_file",
    "run_file_events",
]
