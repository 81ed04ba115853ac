"""The README's Python section runs: its code blocks are executed as written."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import AnthropicServer
from tests.loopback.anthropic_server import message, tool_use

README = Path(__file__).resolve().parents[3] / "README.md"


@pytest.fixture
def anyio_backend() -> str:
    """A real HTTP model server on loopback: real time on asyncio."""
    return "asyncio"


pytestmark = pytest.mark.anyio


def python_blocks() -> list[str]:
    """The ```python blocks of the README's "Using it from Python" section, in order."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Using it from Python", 1)[1].split("\n## ", 1)[0]
    # The complete script at the end (`anyio.run(main)`) is run as a script by
    # tests/test_readme.py; the blocks here share one running loop.
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    return [b for b in blocks if "anyio.run(" not in b]


def test_the_python_section_opens_with_a_short_research_job_that_needs_no_key() -> None:
    """The first block is a research job of about ten lines, through ask(), with no model
    (it needed ANTHROPIC_API_KEY, and ended in a traceback without one)."""
    first = python_blocks()[0]
    assert "await ask(" in first and "model" not in first and "docs:" in first
    assert len([line for line in first.splitlines() if line.strip()]) <= 10


def lead_plan() -> dict[str, Any]:
    return tool_use(
        "plan_subtasks",
        {"subtasks": [{"id": "cells", "query": "solid-state cells", "tools": ["search"]}]},
    )


async def test_every_python_block_runs_against_a_loopback_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each block runs as written, its model's base_url on a loopback Anthropic server
    (the first needs none: it answers from examples/papers)."""
    # In a folder of its own, which has the repository's examples/: the first block's
    # document index goes into its .fanout/, not the repository's.
    (tmp_path / "examples").symlink_to(README.parent / "examples")
    monkeypatch.chdir(tmp_path)
    with AnthropicServer(api_key="test-key") as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        for _ in range(2):  # the research job, then the same job as an event stream
            server.push(
                message(tool_uses=[lead_plan()]),
                message(tool_uses=[tool_use("search", {"query": "solid-state cells"})]),
                message("QuantumScape reports 800 cycles at 25 °C (search)."),
                message("Solid-state cells reach 800 cycles [cells]."),
            )
        namespace: dict[str, Any] = {}
        model = 'model="anthropic:claude-sonnet-4-6"'
        for block in python_blocks():
            # As written, but the model's endpoint is the loopback server.
            if "model=" in block:
                assert model in block
                block = block.replace(model, f"{model}, base_url={server.base_url!r}")
            code = compile(block, str(README), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, namespace)
            if result is not None:
                await result
    out = capsys.readouterr().out
    assert "90 percent of its room-temperature capacity at -20 °C. [1]" in out
    assert "[1] Sodium-ion cells in cold weather — sodium-ion-cold.md" in out
    # The lead cited its subtask, [cells]: shown as the number of that subtask's source.
    assert "Solid-state cells reach 800 cycles [1]." in out
    assert "coverage 100%; not covered: []" in out
    assert "complete" in out
    assert namespace["report"].outcome == "complete"
