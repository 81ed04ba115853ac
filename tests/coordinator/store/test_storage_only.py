"""The run store is storage only (docs/design.md §15): it imports none of the wings that run jobs,
and its base module imports neither database's backend (no circle through open_backend)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

STORE = Path(__file__).resolve().parents[3] / "coordinator" / "store"
RUNNING = ("lead", "api", "serve", "cli", "temporal", "engine", "fanout")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (lazy imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(STORE.glob("*.py")), ids=lambda p: p.name)
def test_the_store_imports_no_wing_that_runs_jobs(path: Path) -> None:
    """No store module imports lead/, api/, serve/, cli/, temporal/, engine/ or fanout."""
    wrong = {
        name for name in imported_modules(path)
        if name.split(".")[:2] in (["coordinator", wing] for wing in RUNNING)
    }
    assert not wrong, f"{path.name} imports {sorted(wrong)}"


def test_the_base_backend_imports_neither_database() -> None:
    """backend.py is the base: sqlite.py and postgres.py import it, never the reverse."""
    imported = imported_modules(STORE / "backend.py")
    assert not imported & {"coordinator.store.sqlite", "coordinator.store.postgres"}
