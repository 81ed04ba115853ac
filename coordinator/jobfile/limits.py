"""What a job file's data may hold: JSON values, finite numbers, bounded depth and aliases.

YAML can say more than a job can use. A date, ``!!binary`` or a ``!!set`` cannot travel
in an envelope or a JSON report; ``.inf`` and ``.nan`` are not JSON numbers and make
times and coverage meaningless; values nested hundreds deep break serialisation; and
anchors with aliases can make a few lines expand to billions of values ("billion
laughs"). Each is reported here, with its line, before anything validates or runs.
"""

from __future__ import annotations

import math
from typing import Any

from coordinator.jobfile.yamlpos import MAX_DEPTH, ParsedYaml, collector_paused, format_path
from shared.errors import InputFileError

MAX_ALIAS_VALUES = 1_000_000
"""How many values aliases may add to a document when expanded (copies of anchors)."""

Path = tuple[str | int, ...]

_SCALARS = (str, int, float, bool, type(None))
_PLAIN = frozenset({str, int, bool, type(None)})
_KINDS = {
    "date": "a date",
    "datetime": "a date and time",
    "bytes": "binary data (!!binary)",
    "set": "a set (!!set)",
    "tuple": "ordered pairs (!!omap or !!pairs)",
}
_JSON_VALUE = (
    "a JSON value: a string, number, true, false, null, list or mapping "
    "(quote a date or time to keep it as text)"
)


def check_values(parsed: ParsedYaml, file: str) -> list[InputFileError]:
    """Every value that is not JSON-like, and a document too deep or too alias-heavy."""
    with collector_paused():  # nothing is garbage mid-walk: collections are pure cost
        if _plain(parsed.data):
            return []  # the common case, found without building a single path
        walk = _Walk(parsed.data)

    def problem(path: Path, expected: str, got: str) -> InputFileError:
        return InputFileError(
            file, parsed.line_of(path), format_path(path) or "<document>", expected, got=got
        )

    problems = [problem(*p) for p in walk.problems]
    height = walk.heights.get(id(parsed.data), 0)
    if height > MAX_DEPTH:
        problems.append(
            problem(
                walk.deepest(parsed.data),
                f"values nested at most {MAX_DEPTH} levels deep",
                f"values nested {height} levels deep",
            )
        )
    extra = walk.sizes.get(id(parsed.data), 1) - walk.written
    if extra > MAX_ALIAS_VALUES:
        problems.append(
            problem(
                walk.first_alias,
                f"aliases that add at most {MAX_ALIAS_VALUES:,} values when expanded",
                f"aliases that add {extra:,}",
            )
        )
    return problems


def _plain(data: Any) -> bool:
    """True for JSON-like data with no alias and no deep nesting (one quick pass)."""
    if type(data) is not dict and type(data) is not list:
        return _plain_scalar(data)
    plain = _PLAIN
    stack: list[Any] = [data]
    depths = [1]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        depth = depths.pop()
        if type(node) is dict:
            for key in node:
                if type(key) not in plain:
                    return False
            values: Any = node.values()
        else:
            values = node
        for value in values:
            kind = type(value)
            if kind in plain:
                continue
            if kind is float:
                if value - value != 0:  # inf - inf and nan - nan are nan
                    return False
            elif kind is dict or kind is list:
                if id(value) in seen or depth >= MAX_DEPTH:
                    return False  # an alias, or deep: the full walk decides
                seen.add(id(value))
                stack.append(value)
                depths.append(depth + 1)
            else:
                return False
    return True


def _plain_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, _SCALARS)


def _items(value: Any) -> list[tuple[str | int, Any]]:
    if isinstance(value, dict):
        return [(k if isinstance(k, str | int) else str(k), v) for k, v in value.items()]
    return list(enumerate(value))


class _Walk:
    """One iterative post-order pass over the distinct containers (shared ones once)."""

    def __init__(self, data: Any) -> None:
        self.problems: list[tuple[Path, str, str]] = []
        self.written = 1  # the root, then every slot of every distinct container
        self.first_alias: Path = ()
        self.heights: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self._items: dict[int, list[tuple[str | int, Any]]] = {}
        if not isinstance(data, dict | list):
            self._scalar((), data)
            return
        open_ids: set[int] = set()
        stack: list[tuple[Any, Path, int]] = [(data, (), 0)]
        self._enter(data, (), open_ids)
        while stack:
            node, path, index = stack[-1]
            items = self._items[id(node)]
            if index == len(items):
                stack.pop()
                open_ids.discard(id(node))
                self._done(node)
                continue
            stack[-1] = (node, path, index + 1)
            key, child = items[index]
            where = (*path, key)
            if isinstance(node, dict) and not isinstance(key, str | int):
                self._scalar(where, key)  # pragma: no cover - keys are stringified above
            if not isinstance(child, dict | list):
                self._scalar(where, child)
            elif id(child) in self._items:
                if self.first_alias == ():
                    self.first_alias = where
            else:
                self._enter(child, where, open_ids)
                stack.append((child, where, 0))

    def _enter(self, node: Any, path: Path, open_ids: set[int]) -> None:
        items = _items(node)
        if isinstance(node, dict):
            for key in node:
                if not isinstance(key, _SCALARS):
                    self._scalar((*path, str(key)), key)
        self._items[id(node)] = items
        self.written += len(items)
        open_ids.add(id(node))

    def _done(self, node: Any) -> None:
        height, size = 1, 1
        for _, child in self._items[id(node)]:
            if isinstance(child, dict | list):
                # A container inside itself (the parser reports it) counts once.
                height = max(height, 1 + self.heights.get(id(child), 0))
                size += self.sizes.get(id(child), 1)
            else:
                size += 1
        self.heights[id(node)], self.sizes[id(node)] = height, size

    def _scalar(self, path: Path, value: Any) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            self.problems.append((path, "a finite number", repr(value)))
        elif not isinstance(value, _SCALARS):
            name = type(value).__name__
            got = _KINDS.get(name, f"a {name}")
            if name in ("date", "datetime"):
                got += f" {value}"
            self.problems.append((path, _JSON_VALUE, got))

    def deepest(self, root: Any) -> Path:
        """The path where ``root`` first nests deeper than MAX_DEPTH."""
        path: Path = ()
        node = root
        for _ in range(MAX_DEPTH):
            best = max(
                (
                    (self.heights.get(id(child), 0), key, child)
                    for key, child in self._items.get(id(node), [])
                    if isinstance(child, dict | list)
                ),
                default=None,
                key=lambda entry: entry[0],
            )
            if best is None:
                break
            path, node = (*path, best[1]), best[2]
        return path
