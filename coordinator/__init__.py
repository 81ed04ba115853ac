"""fanout's coordinator: the user's Python API (docs/design.md §14).

``ask`` and ``run_file`` run a job and return its :class:`CoverageReport`;
``ask_events`` and ``run_file_events`` yield its progress events as it runs
(:class:`JobEvents`). The report's parts are exported for type hints. Everything else
(the engine, the run stores, the views, the scenario loader, replay) lives in its own
module: ``coordinator.jobfile``, ``coordinator.replay``, ``coordinator.store``,
``coordinator.views``, and so on.
"""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
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

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.api": ("JobEvents", "ask", "ask_events", "run_file", "run_file_events"),
    "coordinator.report": ("Answer", "CoverageReport", "Gap", "Section", "SubtaskOutcome"),
})
