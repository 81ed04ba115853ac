"""Fanout from Python: ``ask()``, ``run_file()``, their event streams (docs/design.md §14).

The pytest plugin for scenario files is :mod:`coordinator.api.pytest_plugin`, loaded by
pytest through its entry point.
"""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from coordinator.api.run import (
        EscalationCallback,
        EventCallback,
        PlanCallback,
        StoreLike,
        ask,
        run_file,
    )
    from coordinator.api.stream import JobEvents, ask_events, run_file_events
    from coordinator.api.tools import ToolLike, research_tools

__all__ = [
    "EscalationCallback",
    "EventCallback",
    "JobEvents",
    "PlanCallback",
    "StoreLike",
    "ToolLike",
    "ask",
    "ask_events",
    "research_tools",
    "run_file",
    "run_file_events",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.api.run": ("EscalationCallback", "EventCallback", "PlanCallback", "StoreLike",
                            "ask", "run_file"),
    "coordinator.api.stream": ("JobEvents", "ask_events", "run_file_events"),
    "coordinator.api.tools": ("ToolLike", "research_tools"),
})
