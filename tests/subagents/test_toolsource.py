"""combine(): the one way a job's tool sources become one (docs/design.md §15)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from subagents.tool import Tool
from subagents.toolsource import StaticTools, ToolSource, combine


def _tool(name: str, description: str) -> Tool:
    def call(query: str) -> str:
        """Answer a query."""
        return description

    tool = Tool.from_function(call)
    return dataclasses.replace(tool, name=name, description=description)


class PerSubtask:
    """A source whose tools differ by subtask, as simulated tools' counters do."""

    def for_subtask(self, subtask_id: str) -> Mapping[str, Tool]:
        return {"search": _tool("search", f"simulated for {subtask_id}")}


def test_a_later_source_wins_a_name_clash() -> None:
    """Python tools given last shadow a simulated tool of the same name, as before."""
    python = {"search": _tool("search", "python")}
    merged = combine(PerSubtask(), None, {"other": _tool("other", "x")}, python)
    tools = merged.for_subtask("a")
    assert tools["search"].description == "python" and set(tools) == {"search", "other"}


def test_each_subtask_sees_its_own_tools_from_a_per_subtask_source() -> None:
    """A per-subtask source is asked for each subtask; fixed tools are the same for all."""
    merged = combine(PerSubtask(), [_tool("fixed", "f")])
    assert merged.for_subtask("a")["search"].description == "simulated for a"
    assert merged.for_subtask("b")["search"].description == "simulated for b"
    assert merged.for_subtask("a")["fixed"] is merged.for_subtask("b")["fixed"]


def test_one_source_is_returned_as_it_is_and_empty_ones_are_skipped() -> None:
    """combine(source) is the source (nothing merged per call); {} and None add nothing."""
    source = PerSubtask()
    assert combine(source, {}, None) is source
    assert dict(combine().for_subtask("a")) == {}


def test_static_tools_serve_the_same_tools_to_every_subtask() -> None:
    """StaticTools (the coordinator's name for it) is a source of fixed tools."""
    static = StaticTools([_tool("a", "x")])
    assert isinstance(static, ToolSource)
    assert static.for_subtask("one") is static.for_subtask("two")
    assert set(static.tools) == {"a"}
