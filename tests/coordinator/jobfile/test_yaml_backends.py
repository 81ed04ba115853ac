"""Both YAML backends (libyaml and pure Python) give the same data, lines and errors."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import yaml

from coordinator.jobfile.loader import load_scenario
from coordinator.jobfile.yamlpos import (
    available_backends,
    collector_paused,
    current_backend,
    parse_yaml,
    yaml_backend,
)
from shared.errors import InputFileError, InputFileErrors

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parents[1]
MALFORMED = sorted((HERE / "malformed").glob("*.yaml"))
VALID = sorted((ROOT / "scenarios").rglob("*.yaml")) + sorted((HERE / "data").glob("*.yaml"))

BACKENDS = [
    pytest.param(
        "c",
        id="libyaml",
        marks=pytest.mark.skipif("c" not in available_backends(), reason="no libyaml"),
    ),
    pytest.param("python", id="pure-python"),
]


def _expectation(path: Path) -> tuple[int, str]:
    line, field, _ = path.read_text(encoding="utf-8").splitlines()[0][len("# expect: "):].split(
        " ", 2
    )
    return int(line), field


def _errors(path: Path) -> list[InputFileError]:
    with pytest.raises(InputFileErrors) as info:
        load_scenario(path)
    return info.value.errors


def test_libyaml_is_the_default_when_pyyaml_has_it() -> None:
    """Files are parsed by libyaml's composer wherever PyYAML was built with it."""
    expected = "c" if getattr(yaml, "__with_libyaml__", False) else "python"
    assert current_backend() == expected


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in MALFORMED])
def test_errors_keep_file_line_and_field_on_each_backend(backend: str, path: Path) -> None:
    """Each malformed file's one error names the same file, line and field on either backend."""
    line, field = _expectation(path)
    with yaml_backend(backend):  # type: ignore[arg-type]
        errors = _errors(path)
    assert [(e.file, e.line, e.field) for e in errors] == [(str(path), line, field)]


@pytest.mark.skipif(len(available_backends()) < 2, reason="needs both backends")
@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in MALFORMED])
def test_both_backends_describe_an_error_alike(path: Path) -> None:
    """libyaml's syntax errors are told as the pure-Python parser tells them."""
    with yaml_backend("c"):
        fast = [e.describe() for e in _errors(path)]
    with yaml_backend("python"):
        slow = [e.describe() for e in _errors(path)]
    assert fast == slow


@pytest.mark.skipif(len(available_backends()) < 2, reason="needs both backends")
@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in VALID])
def test_both_backends_load_a_valid_file_alike(path: Path) -> None:
    """Every scenario of the library loads to the same model on either backend."""
    with yaml_backend("c"):
        fast = load_scenario(path)
    with yaml_backend("python"):
        slow = load_scenario(path)
    assert fast == slow


TRICKY = {
    "merge keys": "base: &b {x: 1, y: [1, 2]}\nuse:\n  <<: *b\n  y: 3\n",
    "merged list": "a: &a {p: 1}\nb: &b {p: 2, q: 2}\nc:\n  <<: [*a, *b]\n",
    "shared anchor": "a: &n [1, {k: v}]\nb: *n\n",
    "core scalars": "a: 0o17\nb: 010\nc: 1_000\nd: .inf\ne: ~\nf: 0x1f\ng: 1:30\nh: yes\n"
    "i: 2001-12-14\nj: ''\nk: !!str 5\nl: !!int '7'\nm: 1e3\nn: -.5\no:\n",
    "collection tags": "a: !!set {x, y}\nb: !!omap [x: 1]\nc: !!binary aGVsbG8=\n",
    "quoted look-alikes": "a: 'true'\nb: \"12\"\nc: '<<'\nd: '~'\n",
    "flow and block": "- [a, {b: c}]\n- ? d\n  : e\n- f: - g\n",
    "empty": "",
    "only a comment": "# nothing\n",
    "a scalar": "hello\n",
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("text", [pytest.param(t, id=k) for k, t in TRICKY.items()])
def test_data_is_what_safe_load_gives(backend: str, text: str) -> None:
    """The data built from the parser's events equals PyYAML's safe_load of the same text."""
    try:
        expected = yaml.safe_load(text)
    except yaml.YAMLError:
        with yaml_backend(backend), pytest.raises(InputFileError):  # type: ignore[arg-type]
            parse_yaml(text, "t.yaml")
        return
    with yaml_backend(backend):  # type: ignore[arg-type]
        assert parse_yaml(text, "t.yaml").data == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_lines_follow_keys_items_and_merges(backend: str) -> None:
    """A path's line is its key's (or item's), a merged key's is where it is written."""
    text = (
        "scenario: x\n"  # 1
        "base: &b\n"  # 2
        "  q: 1\n"  # 3
        "job:\n"  # 4
        "  <<: *b\n"  # 5
        "  subtasks:\n"  # 6
        "    - id: a\n"  # 7
        "    - id: b\n"  # 8
        "      plan: [{call: t}]\n"  # 9
    )
    with yaml_backend(backend):  # type: ignore[arg-type]
        parsed = parse_yaml(text, "t.yaml")
    assert parsed.line_of(()) == 1
    assert parsed.line_of(("job", "subtasks", 1, "id")) == 8
    assert parsed.line_of(("job", "subtasks", 1, "plan", 0, "call")) == 9
    assert parsed.line_of(("job", "q")) == 3  # merged from base
    assert parsed.line_of(("job", "subtasks", 7, "id")) == 6  # nearest written ancestor
    assert parsed.line_of(("job", "nope", "deeper")) == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_problems_are_found_without_a_line_map(backend: str) -> None:
    """Repeated keys and self-containing aliases are reported with their own lines."""
    text = "a: 1\nb:\n  c: 2\n  c: 3\nd: &d [x, *d]\n"
    with yaml_backend(backend):  # type: ignore[arg-type]
        problems = [(p.line, p.field, p.expected) for p in parse_yaml(text, "t.yaml").problems]
    assert problems == [
        (4, "b.c", "each key once in a mapping"),
        (5, "d[1]", "a value that does not contain itself"),
    ]


def test_collector_pause_restores_what_it_found() -> None:
    """The collector pause nests and leaves the collector as it was (on or off)."""
    assert gc.isenabled()
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_unknown_backend_is_refused() -> None:
    """Asking for a backend this PyYAML lacks is a clear error, not a silent fallback."""
    with pytest.raises(ValueError), yaml_backend("rust"):  # type: ignore[arg-type]
        pass
