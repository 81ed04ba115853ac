"""YAML parsed with its positions: the data, a line for every field path, duplicate keys.

PyYAML's loaders return plain data and forget where each value came from, and a
mapping that repeats a key silently keeps the last one. Here the document is composed
into nodes first, so every field path (``("job", "subtasks", 1, "id")``) maps to the
1-based line where it is written, and repeated keys are reported instead of dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from shared.errors import InputFileError

Path = tuple[str | int, ...]
"""A field path: mapping keys and sequence indexes from the document root."""

_MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class ParsedYaml:
    """A YAML document's data with the line of every field path and the problems found."""

    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    problems: list[InputFileError] = field(default_factory=list)

    def line_of(self, path: Iterable[str | int]) -> int | None:
        """The line of ``path``, or of its nearest ancestor written in the file."""
        parts = tuple(_path_key(p) for p in path)
        while True:
            if parts in self.lines:
                return self.lines[parts]
            if not parts:
                return None
            parts = parts[:-1]


def format_path(path: Iterable[str | int]) -> str:
    """A field path for people: ``job.subtasks[1].plan[0].args``, ``tools["a.b"].params``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            text += f".{part}" if text else part
        else:
            text += f'["{part}"]'
    return text


def parse_yaml(text: str, file: str) -> ParsedYaml:
    """Parse one YAML document, keeping lines; a syntax error is the only problem then.

    Raises:
        InputFileError: the text is not YAML (the line is the one YAML reports).
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return ParsedYaml(data=None)
        walker = _Walker(file)
        walker.lines[()] = node.start_mark.line + 1
        walker.walk(node, ())
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, text, file) from None
    except yaml.YAMLError as exc:  # pragma: no cover - every PyYAML error we meet is marked
        raise InputFileError(file, None, "<yaml>", "valid YAML", got=str(exc)) from None
    finally:
        loader.dispose()
    return ParsedYaml(data=data, lines=walker.lines, problems=walker.problems)


def _syntax_error(exc: yaml.MarkedYAMLError, text: str, file: str) -> InputFileError:
    mark = exc.problem_mark or exc.context_mark
    if mark is not None and mark.index >= len(text.rstrip()) and exc.context_mark is not None:
        # Found only at the end of the stream (an unclosed quote or bracket): the line
        # where the unclosed construct starts is where a person has to look.
        mark = exc.context_mark
    last_line = max(1, len(text.splitlines()))
    line = min(mark.line + 1, last_line) if mark is not None else None
    if "single document" in (exc.context or ""):
        got = "a second document (a '---' line starts one)"
        return InputFileError(file, line, "<yaml>", "a single YAML document", got=got)
    problem = exc.problem or "a syntax error"
    if exc.context and exc.context_mark is not None:
        problem += f" ({exc.context} at line {exc.context_mark.line + 1})"
    elif exc.context:
        problem += f" ({exc.context})"
    return InputFileError(file, line, "<yaml>", "valid YAML", got=problem)


def _path_key(part: Any) -> str | int:
    if isinstance(part, int) and not isinstance(part, bool):
        return part
    return str(part)


class _Walker:
    """Records the line of every path and reports keys repeated within a mapping."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[Path, int] = {}
        self.problems: list[InputFileError] = []
        self._active: set[int] = set()

    def walk(self, node: yaml.Node, path: Path) -> None:
        if id(node) in self._active:
            # An alias inside its own anchor makes a value that contains itself: nothing
            # downstream (arguments, JSON reports) can hold that.
            self.problems.append(
                InputFileError(
                    self.file,
                    self.lines.get(path),
                    format_path(path),
                    "a value that does not contain itself",
                    got="an alias to an enclosing anchor",
                )
            )
            return
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                self._mapping(node, path)
            elif isinstance(node, yaml.SequenceNode):
                for index, item in enumerate(node.value):
                    self.lines.setdefault((*path, index), item.start_mark.line + 1)
                    self.walk(item, (*path, index))
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Path) -> None:
        seen: dict[str, int] = {}
        merged: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.append(value_node)
                continue
            key = _key_text(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                self.problems.append(
                    InputFileError(
                        self.file,
                        line,
                        format_path((*path, key)),
                        "each key once in a mapping",
                        got=f"{key!r} again (first at line {seen[key]}; YAML would keep this one)",
                    )
                )
            else:
                seen[key] = line
            # The later value is the one PyYAML keeps, so its lines are the ones to use.
            self.lines[(*path, key)] = line
            self.walk(value_node, (*path, key))
        # `<<: *defaults` merges: keys written here override merged ones, without being
        # duplicates, so merged mappings only fill the lines not known yet.
        for value_node in merged:
            many = isinstance(value_node, yaml.SequenceNode)
            for source in value_node.value if many else [value_node]:
                if isinstance(source, yaml.MappingNode):
                    self._merged(source, path)

    def _merged(self, node: yaml.MappingNode, path: Path) -> None:
        for key_node, value_node in node.value:
            key = _key_text(key_node)
            if (*path, key) not in self.lines:
                self.lines[(*path, key)] = key_node.start_mark.line + 1
                self.walk(value_node, (*path, key))


def _key_text(node: yaml.Node) -> str:
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    kind = "mapping" if isinstance(node, yaml.MappingNode) else "sequence"
    return f"<{kind} key at line {node.start_mark.line + 1}>"


def show(value: Any) -> str:
    """A short rendering of a YAML value for an error message, as a person wrote it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, list | tuple):
        return "a list" if value else "an empty list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
