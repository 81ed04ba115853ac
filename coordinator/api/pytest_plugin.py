"""A pytest plugin: every scenario file is a test that replays it and checks ``expect``.

Registered through the ``pytest11`` entry point, so installing fanout is enough. A
``*.yaml``/``*.yml`` file whose top-level mapping has a ``scenario`` key, in any YAML style
(``scenario: x`` or ``{"scenario": "x", ...}``), is one test item named after its scenario
(``-k`` selects by that name): every file ``fanout replay`` would run. It replays in
virtual time and fails with each mismatch as path, expected, actual; a file that does not
load fails with its file:line: field errors. Neither shows a traceback. No YAML file in
scope is passed over without a word: those that are not scenarios, and those under
``live/``, are named in one line after the collection.

Where: under the paths given to pytest. When the ini option ``fanout_scenarios`` names
paths, scenario files are collected under those only (a project's tests may hold
deliberately broken job files), and those paths are added to a run given no arguments.
As with ``fanout replay DIR``, files under a ``live/`` directory (jobs on real MCP servers
or models) are not collected unless named on the command line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

__all__ = ["ScenarioFile", "ScenarioItem", "ScenarioMismatch"]

INI = "fanout_scenarios"
_SUFFIXES = (".yaml", ".yml")
# Looked for before a file is parsed: a file without the word cannot hold the key in any
# style, so most YAML files of a repository cost one read and no parse. (A `^scenario:`
# line was looked for once; a flow-style scenario, `{"scenario": ...}`, has none.)
_WORD = "scenario"
# The YAML files in scope that are not collected, and why: named after the collection.
_PASSED_OVER = pytest.StashKey[dict[Path, str]]()
_NOT_A_SCENARIO = "not scenarios (no top-level `scenario` key)"
_LIVE = "under live/ (jobs on real servers: name a file to run it)"


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


def _scope(file_path: Path, config: pytest.Config) -> bool | None:
    """True in scope, False out of it, None under a ``live/`` folder (in scope otherwise)."""
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

    return None if LIVE_DIR in parts else True


def _kind(file_path: Path) -> Literal["scenario", "broken", "other"]:
    """What a YAML file is: a scenario, YAML that does not parse but names one, or other."""
    import yaml

    try:
        text = file_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "other"
    if _WORD not in text:
        return "other"
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError:
        # Broken YAML that mentions a scenario: an item that fails with the loader's
        # file:line: errors (as `fanout replay` refuses it), not a collection error.
        return "broken"
    return "scenario" if isinstance(data, dict) and _WORD in data else "other"


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A scenario file in scope becomes a :class:`ScenarioFile`; another YAML file in scope
    is remembered, to be named after the collection."""
    if file_path.suffix not in _SUFFIXES:
        return None
    scope = _scope(file_path.resolve(), parent.config)
    if scope is False:
        return None
    passed_over = parent.config.stash.setdefault(_PASSED_OVER, {})
    if scope is None:
        passed_over[file_path] = _LIVE
        return None
    if _kind(file_path) == "other":
        passed_over[file_path] = _NOT_A_SCENARIO
        return None
    collector: ScenarioFile = ScenarioFile.from_parent(parent, path=file_path)
    return collector


def pytest_report_collectionfinish(
    config: pytest.Config, start_path: Path, items: Sequence[pytest.Item]
) -> list[str]:
    """One line per reason naming the YAML files in scope that are not test items."""
    passed_over = config.stash.get(_PASSED_OVER, {})
    lines = []
    for reason in (_NOT_A_SCENARIO, _LIVE):
        files = sorted(_shown(p, start_path) for p, why in passed_over.items() if why == reason)
        if files:
            lines.append(f"fanout: {len(files)} YAML file(s) not collected, {reason}: "
                         + ", ".join(files))
    return lines


def _shown(path: Path, start: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(start.resolve())) if resolved.is_relative_to(
        start.resolve()) else str(path)


class ScenarioFile(pytest.File):
    """One scenario file: one item, named after its scenario."""

    def collect(self) -> Iterator[pytest.Item]:
        """The file's scenario as an item (a file that does not load fails as one)."""
        import yaml

        try:
            data: Any = yaml.safe_load(self.path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            # Broken YAML naming a scenario: an item that fails with the loader's
            # file:line: errors, rather than a collection error with a traceback.
            data = {"scenario": self.path.stem}
        name = str(data["scenario"]) if isinstance(data, dict) and _WORD in data else (
            self.path.stem)
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
