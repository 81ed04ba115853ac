"""The scenario loader: valid files load merged, malformed ones name line, field and fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coordinator.loader import load_scenario, load_scenario_text, scenario_json_schema
from coordinator.scenario import Scenario
from shared.errors import InputFileError, InputFileErrors

HERE = Path(__file__).parent
MALFORMED = sorted((HERE / "malformed").glob("*.yaml"))
DESIGN_EXAMPLE = HERE / "data" / "design_example.yaml"
_HEADER = re.compile(r"^# expect: (\d+) (\S+) (.+)$")


def _expectation(path: Path) -> tuple[int, str, str]:
    match = _HEADER.match(path.read_text(encoding="utf-8").splitlines()[0])
    assert match, f"{path.name} must start with '# expect: LINE FIELD FRAGMENT'"
    return int(match[1]), match[2], match[3]


def _errors(path: Path) -> list[InputFileError]:
    with pytest.raises(InputFileErrors) as info:
        load_scenario(path)
    return info.value.errors


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in MALFORMED])
def test_malformed_file_reports_its_one_problem(path: Path) -> None:
    """Each malformed file yields exactly its one error: the line, the field and the fix."""
    line, field, fragment = _expectation(path)
    errors = _errors(path)
    described = [e.describe() for e in errors]
    assert len(errors) == 1, described
    (error,) = errors
    assert (error.file, error.line, error.field) == (str(path), line, field), described
    assert fragment in error.describe(), described
    assert error.describe().startswith(f"{path}:{line}: {field}: expected ")


def test_corpus_is_large_enough() -> None:
    """The malformed corpus covers at least fifteen distinct problems."""
    assert len(MALFORMED) >= 15
