"""Simulated tools are built once per job; each subtask keeps its own response counters."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from shared.clock import AnyioClock
from subagents.simulated.spec import SimToolSpec
from subagents.simulated.tools import SimulatedTools
from subagents.tool import CallContext, Tool

SPECS = {
    "search": SimToolSpec.model_validate(
        {
            "params": {"q": {"type": "string"}},
            "responses": [{"ok": "first"}, {"ok": "second"}],
            "when": [{"match": {"q": "special"}, "responses": [{"ok": "rule"}]}],
        }
    ),
    "other": SimToolSpec.model_validate({"responses": [{"empty": True}]}),
}


def _tools() -> SimulatedTools:
    return SimulatedTools(SPECS, AnyioClock())


async def _call(tool: Tool, scope: str, **args: Any) -> Any:
    return await tool.body(CallContext(tool.name, 1, "tr_test", "idem", scope), **args)


def test_every_subtask_gets_the_same_tools() -> None:
    """The tools are built once: one read-only mapping for every subtask."""
    sim = _tools()
    first = sim.for_subtask("a")
    assert first is sim.for_subtask("b")
    assert sorted(first) == ["other", "search"]
    with pytest.raises(TypeError):
        first["x"] = first["search"]  # type: ignore[index]


@pytest.mark.anyio
async def test_counters_belong_to_the_calling_subtask() -> None:
    """Each subtask (the call's scope) walks the responses on its own counter."""
    sim = _tools()
    search = sim.for_subtask("a")["search"]
    assert await _call(search, "a", q="x") == "first"
    assert await _call(search, "a", q="x") == "second"
    assert await _call(search, "b", q="x") == "first"
    assert await _call(search, "a", q="special") == "rule"
    assert await _call(search, "a", q="x") == "second"  # the last response repeats
    assert sim.executions[("a", "search")] == 4
    assert sim.executions[("b", "search")] == 1
    assert sim.snapshot("a") == [["search", -1, 3], ["search", 0, 1]]
    assert sim.snapshot("b") == [["search", -1, 1]]


@pytest.mark.anyio
async def test_restore_touches_only_its_own_subtask() -> None:
    """Restoring one subtask's counters leaves every other subtask's alone."""
    sim = _tools()
    search = sim.tools()["search"]
    await _call(search, "b", q="x")
    sim.restore("a", [["search", -1, 1]])
    assert await _call(search, "a", q="x") == "second"
    assert sim.snapshot("b") == [["search", -1, 1]]
    assert sim.snapshot("never-called") == []


@pytest.mark.anyio
async def test_a_subclass_building_tools_per_subtask_keeps_doing_so() -> None:
    """A subclass that overrides _tool gets tools bound to the subtask asked for."""
    built: list[str] = []

    class PerSubtask(SimulatedTools):
        def _tool(self, name: str, spec: SimToolSpec, subtask_id: str) -> Tool:
            built.append(subtask_id)
            return super()._tool(name, spec, subtask_id)

    sim = PerSubtask(SPECS, AnyioClock())
    search = sim.for_subtask("a")["search"]
    assert await _call(search, "ignored", q="x") == "first"
    assert sim.snapshot("a") == [["search", -1, 1]]
    assert sorted(set(built)) == ["a"]
    with anyio.fail_after(1):
        assert await _call(sim.for_subtask("b")["search"], "", q="x") == "first"
