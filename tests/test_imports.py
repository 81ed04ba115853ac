"""No import circles among fanout's modules (issue #32 "The house").

A circle is a set of modules that import each other, directly or through others: each
import below counts, at module level, inside a function or under ``if TYPE_CHECKING:``
(a late import hides a circle from Python, a TYPE_CHECKING one from the interpreter too,
but neither from a reader or from mypy: the two modules still know each other). The
import of a package's ``__init__`` that Python makes on the way to a submodule is not an
edge; an explicit ``from coordinator.serve import X`` is (an edge to
``coordinator.serve``, unless ``X`` is a submodule).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("shared", "subagents", "coordinator")

# Circles known and owned elsewhere, each to be removed from this list with its fix (none
# is left: the store's went with its one opener, the lead's with its prompts' own module).
ALLOWED: set[frozenset[str]] = set()


def module_files(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Every module of the packages by dotted name: its file, and whether it is a package."""
    found: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth (TYPE_CHECKING blocks included)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def imported_modules(
    name: str, source: str, is_package: bool, known: Mapping[str, object]
) -> set[str]:
    """The modules of ``known`` that the module ``name`` imports."""

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _imports(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        found.update(m for t in targets if (m := resolve(t)) is not None)
    found.discard(name)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module and the modules it imports."""
    files = module_files(root)
    return {name: imported_modules(name, path.read_text(encoding="utf-8"), is_package, files)
            for name, (path, is_package) in files.items()}


def circles(graph: Mapping[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.add(frozenset(component))
    return found


@functools.cache
def project_circles() -> frozenset[frozenset[str]]:
    """The circles of this tree (parsing every module takes seconds: done once)."""
    return frozenset(circles(import_graph()))


def test_no_import_circle_beyond_the_known_ones() -> None:
    """No two modules of shared/, subagents/ and coordinator/ import each other, by any path."""
    new = project_circles() - ALLOWED
    assert not new, "import circles: " + "; ".join(" ↔ ".join(sorted(c)) for c in new)


def test_every_allowed_circle_still_exists() -> None:
    """A circle that was broken leaves the allow-list, so it cannot come back unseen."""
    gone = ALLOWED - project_circles()
    assert not gone, "broken, so remove from ALLOWED: " + "; ".join(
        " ↔ ".join(sorted(c)) for c in gone)


def _write(root: Path, files: Mapping[str, str]) -> None:
    """Each module (``shared.a``; ``shared.__init__`` for the package) with its source."""
    for dotted, text in files.items():
        path = root.joinpath(*dotted.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param({"shared.a": "from shared.b import x\n",
                      "shared.b": "def f():\n    from shared import a\n"},
                     {frozenset({"shared.a", "shared.b"})}, id="late-import"),
        pytest.param({"shared.a": "from . import b\n", "shared.b": "import shared.c\n",
                      "shared.c": "from .a import x\n"},
                     {frozenset({"shared.a", "shared.b", "shared.c"})}, id="relative-three"),
        pytest.param({"shared.a": "from shared.b import x\n",
                      "shared.b": "from typing import TYPE_CHECKING\n"
                                     "if TYPE_CHECKING:\n    from shared.a import y\n"},
                     {frozenset({"shared.a", "shared.b"})}, id="type-checking"),
        pytest.param({"shared.__init__": "from shared.a import x\n",
                      "shared.a": "from shared.b import y\n", "shared.b": "x = 1\n"},
                     set(), id="parent-package-is-no-edge"),
    ],
)
def test_the_finder_sees_a_circle_however_it_is_written(
    tmp_path: Path, files: dict[str, str], expected: set[frozenset[str]]
) -> None:
    """Late, relative and TYPE_CHECKING imports make circles; a parent package does not."""
    _write(tmp_path, {"subagents.__init__": "", "coordinator.__init__": "",
                      "shared.__init__": "", **files})
    assert circles(import_graph(tmp_path)) == expected
