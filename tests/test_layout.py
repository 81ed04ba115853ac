"""The house rules of docs/design.md §1: imports flow one way, between packages and down the layers.

A module is a concept, however long, and a folder holds what its concept needs: there is
no cap on lines or modules (a cap splits a concept at a number, not at a seam).
"""

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


# --- the layers inside coordinator/ (README "Architecture", the table of layers) -------

README = ROOT / "README.md"


def layer_table(document: Path = README) -> dict[str, tuple[int, set[str]]]:
    """Each part of ``coordinator/`` (a wing, or a top-level module) → (its layer, the
    parts of its own layer it may import), read from the README's table of layers."""
    text = document.read_text(encoding="utf-8")
    start = text.index("| layer | parts of `coordinator/` |")
    table: dict[str, tuple[int, set[str]]] = {}
    for line in text[start:].splitlines()[2:]:
        line = line.strip()
        if not line.startswith("|"):
            break
        layer, parts, beside = (cell.strip() for cell in line.strip("|").split("|")[:3])
        names = {p.strip(" `/") for p in parts.split(",")}
        same = {p.strip(" `/") for p in beside.split(",") if p.strip() not in ("", "—")}
        for name in names:
            table[name] = (int(layer), same)
    return table


def coordinator_part(module: str) -> str | None:
    """``coordinator.store.runs`` → ``store``; ``coordinator.fanout`` → ``fanout``."""
    parts = module.split(".")
    if parts[0] != "coordinator" or len(parts) == 1:
        return None
    return parts[1]


def part_imports(source: str) -> set[str]:
    """The parts of ``coordinator/`` a module imports, at any depth (lazy imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names = (
            [a.name for a in node.names] if isinstance(node, ast.Import)
            else [node.module] if isinstance(node, ast.ImportFrom) and node.module
            and node.level == 0 else []
        )
        found.update(p for n in names if (p := coordinator_part(n)) is not None)
    return found


def layer_violations(part: str, imports: set[str], table: dict[str, tuple[int, set[str]]]
                     ) -> set[str]:
    """What ``part`` imports against the table: a higher layer, or its own layer unlisted."""
    layer, beside = table[part]
    bad = set()
    for other in imports - {part}:
        other_layer = table[other][0]
        if other_layer > layer or (other_layer == layer and other not in beside):
            bad.add(other)
    return bad


def coordinator_modules() -> list[Path]:
    top = ROOT / "coordinator"
    return sorted(p for p in top.rglob("*.py") if p.parent != top or p.name != "__init__.py")


def test_every_part_of_the_coordinator_has_a_layer() -> None:
    """The README's table names every wing and top-level module of ``coordinator/``."""
    table = layer_table()
    parts = {p.relative_to(ROOT / "coordinator").parts[0].removesuffix(".py")
             for p in coordinator_modules()}
    assert parts - set(table) == set(), "add them to the README's table of layers"
    assert set(table) - parts == set(), "the README's table names parts that do not exist"


@pytest.mark.parametrize("path", coordinator_modules(),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_coordinator_imports_down_its_layers(path: Path) -> None:
    """A part imports lower layers, and of its own layer only what the table allows."""
    table = layer_table()
    part = path.relative_to(ROOT / "coordinator").parts[0].removesuffix(".py")
    imports = part_imports(path.read_text(encoding="utf-8"))
    assert not layer_violations(part, imports, table), path


def test_the_architecture_document_shows_the_same_layers() -> None:
    """docs/architecture.md's copy of the table of layers says what the README's does, the
    one the import check reads: the design the code cites stays true."""
    assert layer_table(ROOT / "docs" / "architecture.md") == layer_table()


def test_the_layer_rule_catches_a_violation() -> None:
    """The checker flags an upward import, even a lazy one, and a sideways one unlisted."""
    table = {"report": (0, set()), "job": (0, {"report"}), "store": (1, set()),
             "lead": (2, set()), "cli": (5, set())}
    lazy = "def f():\n    from coordinator.cli.main import main\n"
    assert layer_violations("store", part_imports(lazy), table) == {"cli"}
    assert layer_violations("report", part_imports("import coordinator.job\n"), table) == {"job"}
    assert layer_violations("job", part_imports("from coordinator.report import Gap\n"),
                            table) == set()
    assert layer_violations("lead", part_imports("from coordinator.store import x\n"),
                            table) == set()
