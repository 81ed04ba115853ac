"""Fanout from Python: ``ask()``, ``run_file()``, their event streams (DESIGN §14).

The pytest plugin for scenario files is :mod:`coordinator.api.pytest_plugin`, loaded by
pytest through its entry point.
"""

from coordinator.api.run import (
    EscalationCallback,
    EventCallback,
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
    "StoreLike",
    "ToolLike",
    "ask",
    "ask_events",
    "research_tools",
    "run_file",
    "run_file_events",
]
