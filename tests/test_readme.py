"""The README says what the code does: its Python snippet runs, its CLI options are whole."""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.cli import build_parser
from coordinator.views.words import gap_words

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


def _python_blocks() -> list[str]:
    """The ```python blocks of "Using it from Python", in order."""
    section = README.split("## Using it from Python", 1)[1].split("\n## ", 1)[0]
    return [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]


# A block with top-level `await`, run as a notebook or `python -m asyncio` runs it.
_TOP_LEVEL_AWAIT = """\
import ast, asyncio, sys
code = compile(sys.argv[1], "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
async def main():
    result = eval(code, {})
    if result is not None:
        await result
asyncio.run(main())
"""


def _keyless(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run as a newcomer runs it: no key of any provider, in a folder of its own
    that has the repository's examples/ (the index it builds goes there)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run([sys.executable, "-c", _TOP_LEVEL_AWAIT, code], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=env, check=False)


@pytest.mark.process
def test_the_first_python_example_runs_as_written_without_a_key(tmp_path: Path) -> None:
    """The section's first example needs no key and no model: run verbatim it prints the
    best passages of examples/papers, cited, and their sources (it ended in a traceback
    for want of ANTHROPIC_API_KEY)."""
    proc = _keyless(tmp_path, _python_blocks()[0])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "at -20 °C. [1]" in proc.stdout
    assert "[1] Sodium-ion cells in cold weather — sodium-ion-cold.md" in proc.stdout


@pytest.mark.process
def test_the_model_example_without_its_key_ends_in_one_clear_line(tmp_path: Path) -> None:
    """The example that needs ANTHROPIC_API_KEY, run without it: MissingModelKey, its
    one-line message naming the variable, raised from ask() (the traceback went through
    a screenful of fanout's insides)."""
    example = next(b for b in _python_blocks() if 'model="anthropic:' in b)
    proc = _keyless(tmp_path, example)
    assert proc.returncode == 1
    last = proc.stderr.rstrip().splitlines()[-1]
    assert last.startswith("subagents.models.factory.MissingModelKey: ")
    assert "ANTHROPIC_API_KEY, which is not set (export ANTHROPIC_API_KEY=" in last
    ours = re.findall(r'File "([^"]*)"', proc.stderr)
    inside = [f for f in ours if f.startswith(str(ROOT)) and "README.md" not in f]
    assert inside == [str(ROOT / "coordinator" / "api" / "run.py")], ours


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
        # In plain words: an open gap is not covered, the one a follow-up filled is.
        words = gap_words(gap["errorCategory"], gap["trigger"])
        where = shown.split("Covered by a follow-up", 1)[int(bool(gap.get("filled_by")))]
        assert f"• {gap['subtask_id']}: {words}" in where, gap["subtask_id"]
    sources = report["answer"]["sources"]
    assert [s["n"] for s in sources] == list(range(1, len(sources) + 1))  # no holes
    for source in sources:
        assert f"[{source['n']}] {source['title']}  ({source['subtask']})" in excerpt
    assert report["answer"]["text"].split()[:8] == " ".join(
        line.strip("│ ") for line in excerpt.split("Sources", 1)[0].splitlines()[1:]).split()[:8]
    assert "…" not in excerpt and "[market]" not in excerpt


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
