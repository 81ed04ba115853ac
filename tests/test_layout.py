"""The house rules of DESIGN §1: imports flow one way, and no module or folder outgrows itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("shared", "subagents", "coordinator")
# What each package may import of the others: shared → nothing; subagents → shared only.
ALLOWED = {
    "shared": {"shared"},
    "subagents": {"shared", "subagents"},
    "coordinator": {"shared", "subagents", "coordinator"},
}
MAX_MODULE_LINES = 450
MAX_FOLDER_MODULES = 12


def imported_packages(source: str) -> set[str]:
    """The top-level names of everything a module imports, at any depth (lazy imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def forbidden_imports(package: str, source: str) -> set[str]:
    return (imported_packages(source) & set(PACKAGES)) - ALLOWED[package]


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_flow_one_way(path: Path) -> None:
    """shared imports neither other package, and subagents never imports coordinator."""
    package = path.relative_to(ROOT).parts[0]
    assert not forbidden_imports(package, path.read_text(encoding="utf-8")), path


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_passes_the_line_limit(path: Path) -> None:
    """A module over 450 lines is asking to be split into a wing of its own."""
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)} has {lines} lines"


def test_no_folder_holds_too_many_modules() -> None:
    """A folder of more than 12 modules (its __init__ aside) wants wings."""
    folders = {p.parent for p in modules()}
    for folder in folders:
        count = sum(1 for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
        assert count <= MAX_FOLDER_MODULES, f"{folder.relative_to(ROOT)} has {count} modules"


@pytest.mark.parametrize(
    ("package", "source", "bad"),
    [
        pytest.param(
            "shared",
            "from subagents.loop import run_subagent\n",
            {"subagents"},
            id="shared-subagents",
        ),
        pytest.param(
            "shared", "def f():\n    import coordinator.cli\n", {"coordinator"}, id="shared-lazy"
        ),
        pytest.param(
            "subagents",
            "from coordinator.report import Gap\n",
            {"coordinator"},
            id="subagents-coordinator",
        ),
        pytest.param(
            "subagents", "from shared.envelope import ToolResult\n", set(), id="subagents-shared"
        ),
        pytest.param(
            "coordinator", "import subagents\nimport shared\n", set(), id="coordinator-both"
        ),
    ],
)
def test_the_import_rule_catches_a_violation(package: str, source: str, bad: set[str]) -> None:
    """The checker itself flags a wrong-way import, even one hidden inside a function."""
    assert forbidden_imports(package, source) == bad
