"""YAML data built straight from the parser's events, checked for what PyYAML lets pass.

PyYAML's loaders compose a whole node tree (a node and two marks per value) and then
construct the data from it; at 20,000 subtasks that tree is over 100 MiB, and walking
it again for lines and duplicate keys costs as much as building it. Here the events of
libyaml's parser (or of PyYAML's pure-Python one where libyaml is absent) become dicts,
lists and scalars directly, exactly as ``SafeLoader`` would construct them, and the two
mistakes YAML itself accepts are reported on the way:

- a key repeated within a mapping (PyYAML silently keeps the last one);
- an alias inside its own anchor (a value that contains itself).

What this builder leaves to PyYAML — merge keys (``<<``), non-scalar keys, explicit
collection tags (``!!set``, ``!!omap``), tags without a constructor — makes it give up
(:class:`Unsupported`), and :func:`compose_and_check` does the classic thing instead:
compose the node tree, check it, construct it with PyYAML's own constructor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from yaml.composer import ComposerError

from shared.errors import InputFileError

FieldPath = tuple[str | int, ...]
"""A field path: mapping keys and sequence indexes from the document root."""

Formatter = Callable[[FieldPath], str]

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
MERGE_TAG = "tag:yaml.org,2002:merge"
# The scalar tags SafeConstructor builds with a plain function of the node; any other
# tag (merge, value, yaml, an application tag) goes the classic way.
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "binary", "timestamp")
)
# Immutable results worth remembering: the same `true`, `0.5` or `1` recur everywhere.
_CACHED_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float"))

SELF_CONTAINED = "a value that does not contain itself"
ENCLOSING_ALIAS = "an alias to an enclosing anchor"


class Unsupported(Exception):
    """The document uses a YAML feature this builder leaves to PyYAML's constructor."""


def duplicate_key(file: str, line: int, field: str, key: str, first: int) -> InputFileError:
    """The problem of a key written twice in one mapping."""
    got = f"{key!r} again (first at line {first}; YAML would keep this one)"
    return InputFileError(file, line, field, "each key once in a mapping", got=got)


class StreamBuilder:
    """Builds one document's data from ``loader``'s events, recording problems."""

    def __init__(self, loader: Any, file: str, fmt: Formatter) -> None:
        if loader.yaml_path_resolvers or None in loader.yaml_implicit_resolvers:
            raise Unsupported("path or wildcard resolvers")
        self.loader = loader
        self.get = loader.get_event
        self.file = file
        self.fmt = fmt
        self.resolvers: dict[Any, list[tuple[str, Any]]] = loader.yaml_implicit_resolvers
        self.constructors: dict[Any, Any] = loader.yaml_constructors
        self.problems: list[InputFileError] = []
        self.path: list[str | int] = []
        self.anchors: dict[str, tuple[Any, Any]] = {}  # anchor -> (value, mark)
        self.open: set[str] = set()  # anchors of collections still being built
        self.cache: dict[tuple[str, str], Any] = {}
        # One object per distinct string: a tool name written in every subtask's plan and
        # allowlist is then held once, not 40,000 times.
        self.strings: dict[str, str] = {}

    def document(self) -> Any:
        """The single document's data (None for an empty stream).

        Raises:
            yaml.MarkedYAMLError: the text is not YAML, or holds several documents.
            Unsupported: the document needs PyYAML's constructor.
        """
        get = self.get
        get()  # StreamStartEvent
        event = get()
        if isinstance(event, yaml.StreamEndEvent):
            return None
        root = get()  # after the DocumentStartEvent
        data = self._value(root, root.start_mark.line + 1)
        get()  # DocumentEndEvent
        event = get()
        if not isinstance(event, yaml.StreamEndEvent):
            raise ComposerError(
                "expected a single document in the stream",
                root.start_mark,
                "but found another document",
                event.start_mark,
            )
        return data

    def _value(self, event: Any, line: int) -> Any:
        kind = type(event)
        if kind is yaml.ScalarEvent:
            return self._scalar(event)
        if kind is yaml.AliasEvent:
            return self._alias(event, line)
        if kind is yaml.SequenceStartEvent:
            return self._sequence(event)
        if kind is yaml.MappingStartEvent:
            return self._mapping(event)
        raise Unsupported(f"unexpected {kind.__name__}")  # pragma: no cover - parser order

    def _anchor(self, event: Any, value: Any) -> None:
        anchor = event.anchor
        if anchor in self.anchors:
            raise ComposerError(
                f"found duplicate anchor {anchor!r}; first occurrence",
                self.anchors[anchor][1],
                "second occurrence",
                event.start_mark,
            )
        self.anchors[anchor] = (value, event.start_mark)

    def _alias(self, event: Any, line: int) -> Any:
        anchor = event.anchor
        if anchor not in self.anchors:
            raise ComposerError(None, None, f"found undefined alias {anchor!r}", event.start_mark)
        if anchor in self.open:
            field = self.fmt(tuple(self.path))
            self.problems.append(
                InputFileError(self.file, line, field, SELF_CONTAINED, got=ENCLOSING_ALIAS)
            )
        return self.anchors[anchor][0]

    def _scalar(self, event: Any) -> Any:
        value: str = event.value
        tag = event.tag
        if tag is None or tag == "!":
            tag = _STR
            if event.implicit[0]:  # plain: resolved as Resolver.resolve does
                for candidate, regexp in self.resolvers.get(value[0] if value else "", ()):
                    if regexp.match(value):
                        tag = candidate
                        break
        if tag == _STR:
            result: Any = self.strings.setdefault(value, value)
        elif tag in _CACHED_TAGS:
            key = (tag, value)
            try:
                result = self.cache[key]
            except KeyError:
                result = self.cache[key] = self._construct(tag, event)
        elif tag in _SCALAR_TAGS:
            result = self._construct(tag, event)
        else:
            raise Unsupported(tag)
        if event.anchor is not None:
            self._anchor(event, result)
        return result

    def _construct(self, tag: str, event: Any) -> Any:
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        return self.constructors[tag](self.loader, node)

    def _collection(self, event: Any, tag: str, value: Any) -> str | None:
        if event.tag not in (None, "!", tag):
            raise Unsupported(event.tag)
        anchor: str | None = event.anchor
        if anchor is not None:
            self._anchor(event, value)
            self.open.add(anchor)
        return anchor

    def _sequence(self, event: Any) -> list[Any]:
        value: list[Any] = []
        anchor = self._collection(event, _SEQ, value)
        get, path, append = self.get, self.path, value.append
        resolvers, strings = self.resolvers, self.strings
        path.append(0)
        index = 0
        while True:
            item = get()
            kind = type(item)
            if kind is yaml.SequenceEndEvent:
                break
            path[-1] = index
            if kind is yaml.ScalarEvent:
                text = item.value
                if item.tag is None and item.anchor is None and (
                    not item.implicit[0] or (text and text[0] not in resolvers)
                ):
                    append(strings.setdefault(text, text))  # a string, as _scalar finds
                else:
                    append(self._scalar(item))
            else:
                append(self._value(item, item.start_mark.line + 1))
            index += 1
        path.pop()
        if anchor is not None:
            self.open.discard(anchor)
        return value

    def _mapping(self, event: Any) -> dict[Any, Any]:
        value: dict[Any, Any] = {}
        anchor = self._collection(event, _MAP, value)
        get, path = self.get, self.path
        resolvers, strings = self.resolvers, self.strings
        seen: dict[str, int] = {}
        path.append("")
        while True:
            key_event = get()
            if type(key_event) is not yaml.ScalarEvent:
                if type(key_event) is yaml.MappingEndEvent:
                    break
                raise Unsupported("a key that is not a scalar")
            text: str = key_event.value
            # The common key, a plain word no implicit resolver claims, is its own text;
            # anything else (a number, `<<` to merge, a tag, an anchor) goes to _scalar.
            if key_event.tag is None and key_event.anchor is None and text and (
                text[0] not in resolvers
            ):
                key: Any = strings.setdefault(text, text)
            else:
                key = self._scalar(key_event)
            mark: Any = key_event.start_mark
            line = mark.line + 1
            if text in seen:
                field = self.fmt((*path[:-1], text))
                self.problems.append(duplicate_key(self.file, line, field, text, seen[text]))
            else:
                seen[text] = line
            path[-1] = text
            item = get()
            if type(item) is yaml.ScalarEvent:
                scalar = item.value
                if item.tag is None and item.anchor is None and (
                    not item.implicit[0] or (scalar and scalar[0] not in resolvers)
                ):
                    value[key] = strings.setdefault(scalar, scalar)
                else:
                    value[key] = self._scalar(item)
            else:
                value[key] = self._value(item, line)
        path.pop()
        if anchor is not None:
            self.open.discard(anchor)
        return value


def compose_and_check(loader: Any, file: str, fmt: Formatter) -> tuple[Any, list[InputFileError]]:
    """The classic way: compose the node tree, check it, construct it with PyYAML."""
    node = loader.get_single_node()
    if node is None:
        return None, []
    checker = _NodeChecker(file, fmt)
    checker.walk(node, (), node.start_mark.line + 1)
    return loader.construct_document(node), checker.problems


def key_text(node: yaml.Node) -> str:
    """A mapping key as a field path shows it (a collection key by its line)."""
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    kind = "mapping" if isinstance(node, yaml.MappingNode) else "sequence"
    return f"<{kind} key at line {node.start_mark.line + 1}>"


class _NodeChecker:
    """Duplicate keys and self-containing aliases in a node tree; each node checked once."""

    def __init__(self, file: str, fmt: Formatter) -> None:
        self.file = file
        self.fmt = fmt
        self.problems: list[InputFileError] = []
        self._active: set[int] = set()
        self._done: set[int] = set()

    def walk(self, node: yaml.Node, path: FieldPath, line: int) -> None:
        if id(node) in self._active:
            self.problems.append(
                InputFileError(self.file, line, self.fmt(path), SELF_CONTAINED, got=ENCLOSING_ALIAS)
            )
            return
        if id(node) in self._done:
            return  # an alias of a finished anchor: checked where the anchor is
        self._active.add(id(node))
        if isinstance(node, yaml.MappingNode):
            self._mapping(node, path)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self.walk(item, (*path, index), item.start_mark.line + 1)
        self._active.discard(id(node))
        self._done.add(id(node))

    def _mapping(self, node: yaml.MappingNode, path: FieldPath) -> None:
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == MERGE_TAG:
                # Merged keys may be overridden here without being duplicates.
                self.walk(value_node, path, line)
                continue
            key = key_text(key_node)
            if key in seen:
                field = self.fmt((*path, key))
                self.problems.append(duplicate_key(self.file, line, field, key, seen[key]))
            else:
                seen[key] = line
            self.walk(value_node, (*path, key), line)
