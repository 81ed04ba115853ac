"""A pytest plugin: every scenario file is a test that replays it and checks ``expect``.

Registered through the ``pytest11`` entry point, so installing fanout is enough. A
``*.yaml``/``*.yml`` file whose top-level mapping has a ``scenario`` key is one test item
named after its scenario (``-k`` selects by that name); other YAML files are left alone.
It replays in virtual time and fails with each mismatch as path, expected, actual; a
file that does not load fails with its file:line: field errors. Neither shows a traceback.

Where: under the paths given to pytest. When the ini option ``fanout_scenarios`` names
paths, scenario files are collected under those only (a project's tests may hold
deliberately broken job files), and those paths are added to a run given no arguments.
As with ``fanout replay DIR``, files under a ``live/`` directory (jobs on real MCP servers
or models) are not collected unless named on the command line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ScenarioFile", "ScenarioItem", "ScenarioMismatch"]

INI = "fanout_scenarios"
_SUFFIXES = (".yaml", ".yml")
# A top-level `scenario:` key, looked for before the file is parsed: most YAML files of a
# repository are not scenarios and cost one read, no YAML parse.
_TOP_LEVEL_SCENARIO = re.compile(r"^scenario\s*:", re.MULTILINE)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the ini option naming where scenario files live."""
    parser.addini(
        INI,
        type="paths",
        default=[],
        help="paths holding fanout scenario files (replayed as tests; only these when set)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """A run given no paths also collects the ``fanout_scenarios`` paths."""
    paths: list[Path] = config.getini(INI)
    if not paths or config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    for path in paths:
        if str(path) not in config.args and path.exists():
            config.args.append(str(path))


def _in_scope(file_path: Path, config: pytest.Config) -> bool:
    roots: list[Path] = config.getini(INI)
    named = any(Path(a.split("::")[0]).resolve() == file_path for a in config.args)
    if named:
        return True
    if roots and not any(file_path.is_relative_to(r.resolve()) for r in roots):
        return False
    # The live-job rule of `fanout replay DIR`, relative to the root searched.
    base = next((r.resolve() for r in roots if file_path.is_relative_to(r.resolve())), None)
    parts = file_path.relative_to(base).parts[:-1] if base else file_path.parts[:-1]
    from coordinator.replay import LIVE_DIR

    return LIVE_DIR not in parts


def _is_scenario(file_path: Path) -> bool:
    try:
        text = file_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return _TOP_LEVEL_SCENARIO.search(text) is not None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A scenario file in scope becomes a :class:`ScenarioFile`; anything else is left."""
    if file_path.suffix not in _SUFFIXES or not _in_scope(file_path.resolve(), parent.config):
        return None
    if not _is_scenario(file_path):
        return None
    collector: ScenarioFile = ScenarioFile.from_parent(parent, path=file_path)
    return collector


class ScenarioFile(pytest.File):
    """One scenario file: one item, named after its scenario."""

    def collect(self) -> Iterator[pytest.Item]:
        """The file's scenario as an item (a file that does not load fails as one)."""
        import yaml

        try:
            data: Any = yaml.safe_load(self.path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            # Broken YAML with a `scenario:` line: an item that fails with the loader's
            # file:line: errors, rather than a collection error with a traceback.
            data = {"scenario": self.path.stem}
        if not isinstance(data, dict) or "scenario" not in data:
            # The `scenario:` line was not the document's top-level key (inside a block
            # scalar, say): not a scenario file after all.
            return
        name = str(data["scenario"])
        yield ScenarioItem.from_parent(self, name=name)


class ScenarioMismatch(Exception):
    """The replay's report did not meet ``expect``, or the file did not load."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class ScenarioItem(pytest.Item):
    """Replays the scenario in virtual time and checks its ``expect`` block."""

    def runtest(self) -> None:
        """Load, replay, compare; raise :class:`ScenarioMismatch` on any difference."""
        from coordinator.jobfile.loader import load_scenario
        from coordinator.replay import replay
        from shared.errors import InputFileErrors

        assert self.path is not None
        try:
            scenario = load_scenario(self.path)
        except InputFileErrors as exc:
            raise ScenarioMismatch(
                ["the scenario file does not load:", *exc.describe().splitlines()]
            ) from None
        result = replay(scenario)
        if not result.passed:
            lines = [f"{len(result.mismatches)} expectation(s) not met:"]
            for m in result.mismatches:
                lines.append(f"  {m.path}: expected {m.expected!r}, got {m.actual!r}")
            raise ScenarioMismatch(lines)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        """The mismatches, one per line, without a traceback."""
        if isinstance(excinfo.value, ScenarioMismatch):
            return "\n".join([f"scenario {self.name!r} ({self.path}):", *excinfo.value.lines])
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where the item comes from, as the summary line shows it."""
        assert self.path is not None
        return self.path, None, f"scenario: {self.name}"
