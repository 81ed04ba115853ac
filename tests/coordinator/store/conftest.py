"""Every conformance test runs on both backends: a SQLite file and a Postgres database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.store.runs import RunStore


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        # A cluster of its own (tests/tiers.py): outside `make test-fast`.
                        pytest.param("postgres", id="postgres", marks=pytest.mark.process)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store of each kind: a file path, or a new database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "runs.sqlite")
    cluster: Any = request.getfixturevalue("postgres_cluster")
    return str(cluster.new_database())


@pytest.fixture
def store(target: str) -> Iterator[RunStore]:
    """The store at ``target``, closed after the test."""
    opened = RunStore(target)
    yield opened
    opened.close()
