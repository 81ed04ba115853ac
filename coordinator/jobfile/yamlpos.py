"""YAML parsed with its positions: the data, the line of any field path, duplicate keys.

PyYAML's loaders return plain data and forget where each value came from, and a
mapping that repeats a key silently keeps the last one. Here the data is built from
the parser's events, repeated keys and self-containing aliases are reported, and the
line of a field path (``("job", "subtasks", 1, "id")``) is looked up only when an error
needs one: most files have none, and a line map of every path cost more than the data
itself.

Building from events (:class:`StreamBuilder`) skips PyYAML's node tree (a node and two
marks per value): at 20,000 subtasks that tree is over 100 MiB, and walking it again for
lines and duplicate keys cost as much as building it. The events become dicts, lists
and scalars directly, exactly as ``SafeLoader`` would construct them. What the builder
leaves to PyYAML — merge keys (``<<``), non-scalar keys, explicit collection tags
(``!!set``, ``!!omap``), tags without a constructor — makes it give up
(:class:`Unsupported`), and :func:`compose_and_check` does the classic thing instead:
compose the node tree, check it, construct it with PyYAML's own constructor.

Parsing runs on libyaml (``yaml.CSafeLoader``) and falls back to PyYAML's pure-Python
parser only where libyaml is absent; :func:`yaml_backend` picks one explicitly (the
tests run both). Both give the same data, the same lines and the same messages: a
syntax error found by libyaml is described as the pure-Python parser describes it.
"""

from __future__ import annotations

import gc
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

import yaml
from yaml.composer import ComposerError

from shared.errors import InputFileError

FieldPath = tuple[str | int, ...]
"""A field path: mapping keys and sequence indexes from the document root."""

Backend = Literal["c", "python"]

MAX_DEPTH = 100
"""How deep values may nest (a file's own structure is under ten levels). Defined here,
below :mod:`coordinator.jobfile.limits`, which checks it: a document the parser itself
cannot nest into is reported against the same limit."""

LOADERS: dict[str, type[Any]] = {"python": yaml.SafeLoader}
if getattr(yaml, "__with_libyaml__", False):
    LOADERS["c"] = yaml.CSafeLoader

_backend: ContextVar[str] = ContextVar("yaml_backend", default="c" if "c" in LOADERS else "python")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def available_backends() -> tuple[Backend, ...]:
    """The YAML backends this interpreter has: ``c`` (libyaml) when built with it, ``python``."""
    names: tuple[Backend, ...] = ("c", "python")
    return tuple(name for name in names if name in LOADERS)


def current_backend() -> Backend:
    """The backend :func:`parse_yaml` uses here."""
    return "c" if _backend.get() == "c" else "python"


@contextmanager
def yaml_backend(name: Backend) -> Iterator[None]:
    """Parse with ``name`` (``c`` or ``python``) inside the block.

    Raises:
        ValueError: ``c`` was asked for and PyYAML has no libyaml here.
    """
    if name not in LOADERS:
        raise ValueError(f"no {name!r} YAML backend here (PyYAML without libyaml)")
    token = _backend.set(name)
    try:
        yield
    finally:
        _backend.reset(token)


class ParsedYaml:
    """A YAML document's data, the problems found, and the line of any field path."""

    def __init__(
        self,
        data: Any,
        problems: list[InputFileError] | None = None,
        *,
        text: str = "",
        backend: Backend = "python",
    ) -> None:
        self.data = data
        self.problems: list[InputFileError] = problems or []
        self._text = text
        self._backend = backend
        self._lines: _LineIndex | None = None

    def line_of(self, path: Iterable[str | int]) -> int | None:
        """The line of ``path``, or of its nearest ancestor written in the file."""
        if self._lines is None:
            # Only errors ask for lines: compose the node tree now, once, and keep it.
            loader = LOADERS[self._backend](self._text) if self._text else None
            try:
                root = loader.get_single_node() if loader is not None else None
            finally:
                if loader is not None:
                    loader.dispose()
            self._lines = _LineIndex(root)
        return self._lines.line_of(tuple(_path_key(p) for p in path))


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
    """Parse one YAML document; its repeated keys and self-containing aliases are problems.

    Raises:
        InputFileError: the text is not YAML (the line is the one YAML reports).
    """
    backend = current_backend()
    try:
        data, problems = _parse(text, file, LOADERS[backend])
    except yaml.MarkedYAMLError as exc:
        if backend != "python":
            exc = _as_python_tells_it(text, file, exc)
        raise _syntax_error(exc, text, file) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (NUL, ...)
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character
        code = ord(char) if isinstance(char, str) and len(char) == 1 else char
        got = f"the control character U+{code:04X}" if isinstance(code, int) else exc.reason
        raise InputFileError(file, line, "<yaml>", "printable characters", got=got) from None
    except yaml.YAMLError as exc:  # pragma: no cover - every PyYAML error we meet is marked
        raise InputFileError(file, None, "<yaml>", "valid YAML", got=str(exc)) from None
    except (RecursionError, ValueError) as exc:
        # Nesting deeper than the parser can recurse, or an integer longer than Python
        # converts (4300 digits): said with the line where it happens, not a traceback.
        raise _too_big(text, file, backend, exc) from None
    return ParsedYaml(data, problems, text=text, backend=backend)


def _too_big(text: str, file: str, backend: str, exc: Exception) -> InputFileError:
    """The error of a document too deeply nested, or with too long a number, and its line."""
    deep = isinstance(exc, RecursionError)
    depth, line, digits = 0, 1, 0
    try:
        for event in yaml.parse(text, Loader=LOADERS[backend]):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if deep and depth > MAX_DEPTH and event.start_mark is not None:
                    line = event.start_mark.line + 1
                    break
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif not deep and isinstance(event, yaml.ScalarEvent) and len(event.value) > 4300:
                mark = event.start_mark
                line, digits = (mark.line + 1 if mark is not None else 1), len(event.value)
                break
    except yaml.YAMLError:  # pragma: no cover - the document parsed as far as it failed
        pass
    if deep:
        expected = f"values nested at most {MAX_DEPTH} levels deep"
        return InputFileError(file, line, "<yaml>", expected, got="deeper nesting")
    got = f"a number of {digits} digits" if digits else str(exc)
    return InputFileError(file, line, "<yaml>", "a number of at most 4300 digits", got=got)


def _parse(text: str, file: str, loader_class: type[Any]) -> tuple[Any, list[InputFileError]]:
    with collector_paused():
        loader = loader_class(text)
        try:
            builder = StreamBuilder(loader, file)
            return builder.document(), builder.problems
        except Unsupported:
            pass
        finally:
            loader.dispose()
        loader = loader_class(text)
        try:
            return compose_and_check(loader, file)
        finally:
            loader.dispose()


def _as_python_tells_it(text: str, file: str, exc: yaml.MarkedYAMLError) -> yaml.MarkedYAMLError:
    """The pure-Python parser's account of a syntax error libyaml found, if it finds it too.

    libyaml's messages are terser ("did not find expected key" where PyYAML says
    "expected <block end>, but found '<block mapping start>'"); parsing again costs
    time only on a file that cannot run anyway, and keeps messages the same everywhere.
    """
    try:
        _parse(text, file, yaml.SafeLoader)
    except yaml.MarkedYAMLError as python_exc:
        return python_exc
    except RecursionError:
        return exc  # nested deeper than the pure-Python parser recurses: libyaml's account
    return exc  # pragma: no cover - the two parsers agree on every file we know


_pause_lock = threading.Lock()
_pause_depth = 0
_pause_resumes = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a document becomes data and models.

    Loading allocates a dozen containers per subtask, none of which can be garbage
    until the load is done, so every collection pass over them is pure cost: with the
    collector running, libyaml's composer took 3–4× its own time. Nested and
    concurrent pauses count; the collector resumes (if it was running) when the last ends.
    """
    global _pause_depth, _pause_resumes
    with _pause_lock:
        if _pause_depth == 0:
            _pause_resumes = gc.isenabled()
            gc.disable()
        _pause_depth += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pause_depth -= 1
            if _pause_depth == 0 and _pause_resumes:
                gc.enable()


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


class _LineIndex:
    """Field path → line, by walking the node tree along the path (no map of every path).

    A mapping key's line is where the key is written; a list item's, where the item
    starts. A key written twice counts where it is written last (the value YAML keeps);
    keys merged in with ``<<`` count where they are written in the merged mapping,
    unless written here too. Each mapping is indexed once, on first use.
    """

    def __init__(self, root: yaml.Node | None) -> None:
        self.root = root
        self._keys: dict[int, dict[str, tuple[int, yaml.Node]]] = {}

    def line_of(self, path: FieldPath) -> int | None:
        node = self.root
        if node is None:
            return None
        line: int = node.start_mark.line + 1
        for part in path:
            if isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                if not 0 <= part < len(node.value):
                    break
                node = node.value[part]
                line = node.start_mark.line + 1
            elif isinstance(node, yaml.MappingNode) and isinstance(part, str):
                entry = self._index(node).get(part)
                if entry is None:
                    break
                line, node = entry
            else:
                break
        return line

    def _index(self, node: yaml.MappingNode) -> dict[str, tuple[int, yaml.Node]]:
        index = self._keys.get(id(node))
        if index is not None:
            return index
        index = {}
        merged: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                merged.append(value_node)
            else:
                index[key_text(key_node)] = (key_node.start_mark.line + 1, value_node)
        for value_node in merged:
            many = isinstance(value_node, yaml.SequenceNode)
            for source in value_node.value if many else [value_node]:
                if isinstance(source, yaml.MappingNode):
                    for key_node, item in source.value:
                        index.setdefault(key_text(key_node), (key_node.start_mark.line + 1, item))
        self._keys[id(node)] = index
        return index


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

# --- the data, built from the parser's events -------------------------------------------

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

    def __init__(self, loader: Any, file: str) -> None:
        if loader.yaml_path_resolvers or None in loader.yaml_implicit_resolvers:
            raise Unsupported("path or wildcard resolvers")
        self.loader = loader
        self.get = loader.get_event
        self.file = file
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
            field = format_path(tuple(self.path))
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
                field = format_path((*path[:-1], text))
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


def compose_and_check(loader: Any, file: str) -> tuple[Any, list[InputFileError]]:
    """The classic way: compose the node tree, check it, construct it with PyYAML."""
    node = loader.get_single_node()
    if node is None:
        return None, []
    checker = _NodeChecker(file)
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

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[InputFileError] = []
        self._active: set[int] = set()
        self._done: set[int] = set()

    def walk(self, node: yaml.Node, path: FieldPath, line: int) -> None:
        if id(node) in self._active:
            self.problems.append(InputFileError(
                self.file, line, format_path(path), SELF_CONTAINED, got=ENCLOSING_ALIAS))
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
                field = format_path((*path, key))
                self.problems.append(duplicate_key(self.file, line, field, key, seen[key]))
            else:
                seen[key] = line
            self.walk(value_node, (*path, key), line)
