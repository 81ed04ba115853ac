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
    [("serve",), ("ask",), ("temporal", "dev"), ("worker",), ("run",)],
    ids=lambda p: " ".join(p),
)
def test_every_option_of_these_commands_is_in_the_readme(path: tuple[str, ...]) -> None:
    """serve, ask, temporal dev, worker and run (with its Temporal options) show every
    option they take."""
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
