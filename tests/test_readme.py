"""The README says what the code does: its Python snippet runs, its CLI options are whole."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _python_snippet() -> str:
    """The section's complete script (the one-tool example after "One tool, by hand")."""
    section = README.split("## Using it from Python", 1)[1].split("One tool, by hand", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.process
def test_the_python_snippet_is_a_script_that_runs() -> None:
    """The snippet parses as a module (no top-level await), imports what it uses from
    the packages that define it, and prints the validation envelope it promises."""
    code = _python_snippet()
    ast.parse(code)  # top-level `await` is a SyntaxError in a script
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "'errorCategory': 'validation'" in proc.stdout and "'field': 'limit'" in proc.stdout


def _subparser(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


@pytest.mark.parametrize(
    "path",
    [("serve",), ("ask",), ("mcp",), ("temporal", "dev"), ("worker",), ("run",)],
    ids=lambda p: " ".join(p),
)
def test_every_option_of_these_commands_is_in_the_readme(path: tuple[str, ...]) -> None:
    """serve, ask, mcp, temporal dev, worker and run (with its Temporal options) show
    every option they take."""
    missing = [
        option
        for action in _subparser(*path)._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help" and option not in README
    ]
    assert missing == [], f"fanout {' '.join(path)}: {missing} not in README.md"


def test_the_readme_says_how_fanout_gets_on_path_and_where_the_store_is() -> None:
    """A newcomer learns that fanout lives in .venv/bin and that the store path is
    relative to the directory fanout runs in."""
    assert ".venv/bin/fanout" in README and "source .venv/bin/activate" in README
    assert "relative to the directory" in README


def _block_after(marker: str) -> str:
    """The fenced block that follows ``marker`` in the README."""
    rest = README.split(marker, 1)[1]
    return rest.split("```", 2)[1].split("\n", 1)[1]


def test_the_demos_answer_is_what_the_demo_answers() -> None:
    """The answer excerpt after "ends with the lead's answer" lists every gap of
    scenarios/research_lead.yaml's report and every source its answer cites, with the
    numbers it has (the excerpt lacked the third gap and elided the sources)."""
    from coordinator.jobfile.loader import load_scenario
    from coordinator.replay import replay

    report = replay(load_scenario(ROOT / "scenarios" / "research_lead.yaml")).report
    excerpt = _block_after("ends with the lead's answer:")
    shown = excerpt.split("Not covered", 1)[1]
    for gap in report["gaps"]:
        assert f"• {gap['subtask_id']}: {gap['trigger']}" in shown, gap["subtask_id"]
    for source in report["answer"]["sources"]:
        assert f"[{source['n']}] {source['title']}  ({source['subtask']})" in excerpt
    assert "…" not in excerpt


@pytest.mark.process
def test_the_trace_tree_is_the_demos_trace() -> None:
    """The trace tree in the README is what docs/trace_tree.py prints for the demo
    (it showed coverage 0.7 for the run's 0.9 and lacked the follow-up subagents)."""
    proc = subprocess.run(
        [sys.executable, "docs/trace_tree.py", "scenarios/research_lead.yaml"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=True,
    )
    assert "invoke_agent patents_web" in proc.stdout and "coverage=0.9" in proc.stdout
    assert _block_after("prints it from the exported spans; ✗ is status ERROR):") == proc.stdout


def test_the_service_section_shows_an_ask_with_curl() -> None:
    """`Run it as a service` has a curl example of POST /ask with a JSON question."""
    section = README.split("## Run it as a service", 1)[1].split("\n## ", 1)[0]
    asks = [block for block in section.split("curl ")[1:] if '"$S/ask"' in block]
    assert asks and '"question":' in asks[0] and "application/json" in asks[0]
