"""Where a subagent's tools come from, and the one way to put several sources together.

A job's tools come from up to four places: its simulated tools (per subtask: each keeps
its own response counters), its MCP servers, the built-in research tools, and the
Python functions a caller hands ``ask()``. :func:`combine` makes one source of them;
every door and both executors build a job's tools with it, so a name clash is settled
in one place: the later source wins (the loader keeps simulated, MCP and research names
apart; a Python tool may shadow any of them, on purpose).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from subagents.tool import Tool

__all__ = ["CombinedTools", "StaticTools", "ToolSource", "combine"]


@runtime_checkable
class ToolSource(Protocol):
    """Where a subagent's tools come from (simulated, MCP, research, plain functions)."""

    def for_subtask(self, subtask_id: str) -> Mapping[str, Tool]:
        """The tools as subtask ``subtask_id`` sees them."""
        ...


SourceLike = ToolSource | Mapping[str, Tool] | Iterable[Tool]
"""What :func:`combine` takes: a source, or tools that every subtask sees alike."""


class CombinedTools:
    """Several tool sources as one: each subtask sees every source's tools, and a later
    source's tool wins a name clash."""

    def __init__(self, *sources: SourceLike) -> None:
        self.sources: tuple[ToolSource, ...] = tuple(_source(s) for s in sources)

    def for_subtask(self, subtask_id: str) -> Mapping[str, Tool]:
        """Every source's tools for ``subtask_id``, later sources first in a clash."""
        if len(self.sources) == 1:
            return self.sources[0].for_subtask(subtask_id)
        merged: dict[str, Tool] = {}
        for source in self.sources:
            merged.update(source.for_subtask(subtask_id))
        return merged


class StaticTools(CombinedTools):
    """The same tools for every subtask."""

    def __init__(self, tools: Mapping[str, Tool] | Iterable[Tool]) -> None:
        super().__init__(_Fixed(tools))
        self.tools = self.sources[0].for_subtask("")


class _Fixed:
    """Tools that every subtask sees alike, by name."""

    def __init__(self, tools: Mapping[str, Tool] | Iterable[Tool]) -> None:
        items = tools.values() if isinstance(tools, Mapping) else tools
        self.tools = {t.name: t for t in items}

    def for_subtask(self, subtask_id: str) -> Mapping[str, Tool]:
        """Every tool, whatever the subtask."""
        return self.tools


def _source(source: SourceLike) -> ToolSource:
    if isinstance(source, ToolSource):
        return source
    return _Fixed(source)


def combine(*sources: SourceLike | None) -> ToolSource:
    """One tool source of ``sources`` (None and empty mappings are skipped); a later
    source's tool wins a name clash. One source is returned as it is."""
    kept = [s for s in sources if s is not None and not (isinstance(s, Mapping) and not s)]
    if len(kept) == 1 and isinstance(kept[0], ToolSource):
        return kept[0]
    return CombinedTools(*kept)
