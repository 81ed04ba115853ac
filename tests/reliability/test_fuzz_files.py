"""Fuzzed scenario files: every mutation of the library loads, or fails naming file, line, field.

In-process for speed (the loader and, when a mutant still loads, its replay, each bounded
in wall time), plus a handful of real ``fanout replay`` subprocesses (exit 2, no
traceback, bounded time and memory) for the inputs that only a process can show:
invalid UTF-8 on disk, NUL bytes, deep nesting, and an exponential alias bomb.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import resource
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.cli import main
from coordinator.jobfile.loader import load_scenario
from shared.errors import InputFileErrors
from tests.reliability.bounds import bounded
from tests.reliability.counts import count
from tests.reliability.mutations import MUTATIONS, laughs
from tests.reliability.profiles import scaled

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = {p.relative_to(ROOT / "scenarios").as_posix(): p.read_bytes()
           for p in sorted((ROOT / "scenarios").rglob("*.yaml"))}
CASE_SECONDS = 20.0


@st.composite
def mutants(draw: st.DrawFn) -> tuple[str, bytes, list[str]]:
    """A library file with one to three mutations."""
    name = draw(st.sampled_from(sorted(LIBRARY)))
    data = LIBRARY[name]
    applied = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(sorted(MUTATIONS)))
        data = MUTATIONS[kind](data, draw)
        applied.append(kind)
    return name, data, applied


def load_and_replay(path: Path) -> str:
    """Load the file at ``path``, then ``fanout replay --json`` it in this process.

    Raises AssertionError for a broken promise: a loader error without its file, line or
    field, an exit code other than 0, 1 or 2, a report that is not one JSON document, a
    crashed subagent. Any other exception is a traceback.
    """
    # YAML breaks lines at \r\n, \n, \r, NEL, LS and PS: a line number can be that high.
    text = path.read_bytes().decode("utf-8", "replace")
    lines = len(re.split("\r\n|[\n\r\x85\u2028\u2029]", text))
    try:
        load_scenario(path)
    except InputFileErrors as exc:
        for error in exc.errors:
            described = error.describe()
            assert error.file == str(path), described
            assert error.field and error.expected, described
            # The file exists and is a file: every problem is somewhere in it.
            assert error.line is not None and 1 <= error.line <= lines, described
            assert described.startswith(f"{path}:{error.line}: {error.field}: "), described
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["replay", str(path), "--json"])
    assert code in (0, 1, 2), (code, err.getvalue()[-1000:])
    if code == 2:
        assert f"{path}:" in err.getvalue() or "replay" in err.getvalue(), err.getvalue()
        return "exit 2"
    document = json.loads(out.getvalue())
    # One JSON document: no NaN, no infinity, nothing unserialisable.
    json.dumps(document, allow_nan=False)
    for scenario in document["scenarios"]:
        for gap in scenario["report"]["gaps"]:
            # A crash of fanout itself is a traceback in disguise, whatever the file says.
            assert not gap["message"].startswith("subagent crashed"), gap["message"]
    return f"exit {code}"


def check_file(path: Path, data: bytes) -> str:
    """Write ``data`` at ``path`` and run :func:`load_and_replay` bounded in time and memory."""
    path.write_bytes(data)
    count("files")
    outcome = bounded(functools.partial(load_and_replay, path), seconds=CASE_SECONDS)
    assert outcome.failure is None, outcome.failure
    assert outcome.value is not None
    return outcome.value


@pytest.fixture(scope="module")
def scratch() -> Path:
    """A directory for the fuzzed files (module-scoped: hypothesis runs many per test)."""
    return Path(tempfile.mkdtemp(prefix="fanout-fuzz-"))


@pytest.mark.process
@scaled(5)
@given(mutants())
def test_a_mutated_library_file_never_ends_in_a_traceback(
    scratch: Path, mutant: tuple[str, bytes, list[str]]
) -> None:
    """Deleted lines, swapped types, misspelt keys, bad indentation, control characters,
    invalid UTF-8, huge numbers, deep nesting, alias bombs: exit 0/1, or file:line: field."""
    name, data, applied = mutant
    check_file(scratch / Path(name).name, data)
    for kind in applied:
        count(f"mutation:{kind}")


def _document(value: bytes) -> bytes:
    """A small valid scenario whose one tool answers ``value`` (YAML text)."""
    return b"\n".join([
        b"scenario: fuzz",
        b"job:",
        b"  query: q",
        b"  subtasks:",
        b"    - id: a",
        b"      query: q",
        b"      tools: [t]",
        b"      plan: [{call: t}]",
        b"tools:",
        b"  t:",
        b"    responses:",
        b"      - ok: " + value,
        b"",
    ])


SPECIAL = {
    "timestamp": _document(b"{when: 2024-12-01, at: 2024-12-01T10:00:00Z}"),
    "binary": _document(b"!!binary /w=="),
    "set": _document(b"!!set {a, b}"),
    "deep-list": _document(b"[" * 300 + b"1" + b"]" * 300),
    "deep-map": _document(b"{a: " * 300 + b"1" + b"}" * 300),
    "very-deep": _document(b"[" * 100_000 + b"]" * 100_000),
    "laughs": _document(laughs(7)),
    "nul": _document(b'"a\x00b"'),
    "invalid-utf8": _document(b'"caf\xe9"'),
    "bom": b"\xef\xbb\xbf" + _document(b"1"),
    "huge-int": _document(b"9" * 5000),
    # Catastrophic backtracking: the argument check must give up, not hang the process.
    "redos": _document(b"1").replace(
        b"plan: [{call: t}]", b'plan: [{call: t, args: {q: "' + b"a" * 40 + b'!"}}]'
    ).replace(b"    responses:", b'    params: {q: {type: string, pattern: "^(a+)+$"}}\n'
              b"    responses:"),
    "args-timestamp": _document(b"1").replace(
        b"plan: [{call: t}]", b"plan: [{call: t, args: {d: 2024-01-01}}]"
    ).replace(b"    responses:", b"    params: {d: {type: string}}\n    responses:"),
}
_OK = b"      - ok: 1"
_LIMITED = b"      - error: rate_limited\n        retry_after_s: "
NUMBERS = {
    "weight-inf": (b"      query: q\n", b"      query: q\n      weight: .inf\n"),
    "weights-overflow": (b"      query: q\n", b"      query: q\n      weight: 1.0e+308\n"),
    "retry-after-huge": (_OK, _LIMITED + b"1.0e+308"),
    "retry-after-inf": (_OK, _LIMITED + b".inf"),
    "latency-nan": (b"    responses:", b"    latency_s: .nan\n    responses:"),
    "timeout-tiny": (b"      query: q\n", b"      query: q\n      tool_timeout_s: 4.9e-324\n"),
    "attempts-huge": (_OK, b"      - error: unavailable"),
    "deadline-inf": (b"  query: q\n", b"  query: q\n  deadline_s: .inf\n"),
}


def _numbers(name: str) -> bytes:
    old, new = NUMBERS[name]
    doc = _document(b"1")
    if name == "weights-overflow":
        # Two subtasks of weight 1e308: the total overflows to infinity.
        doc = doc.replace(b"tools:\n", b"    - id: b\n      query: q\n      weight: 1.0e+308\n"
                          b"      tools: [t]\n      plan: [{call: t}]\ntools:\n")
    if name == "attempts-huge":
        doc = doc.replace(
            b"  subtasks:",
            b"  defaults:\n    retry: {max_attempts: 100000000, initial_backoff_s: 0,"
            b" max_backoff_s: 0}\n  subtasks:",
        )
    assert old in doc, name
    return doc.replace(old, new, 1)


@pytest.mark.process
@pytest.mark.parametrize(
    "data",
    [pytest.param(v, id=k) for k, v in SPECIAL.items()]
    + [pytest.param(_numbers(k), id=k) for k in NUMBERS],
)
def test_hostile_values_are_refused_or_run(scratch: Path, data: bytes) -> None:
    """YAML-only types, deep nesting, alias bombs, NUL, bad UTF-8, infinite or overflowing
    numbers: a clear error with file, line and field, or a run with a JSON report."""
    check_file(scratch / "hostile.yaml", data)


# What the loader must answer each hostile number with: refused at (line, field), or
# loaded (None). "Refused or run" alone could not tell a refusal lost in a refactor.
REFUSED_AT: dict[str, tuple[int, str] | None] = {
    "weight-inf": (7, "job.subtasks[0].weight"),
    "weights-overflow": (7, "job.subtasks[0].weight"),
    "retry-after-huge": (13, "tools.t.responses[0].retry_after_s"),
    "retry-after-inf": (13, "tools.t.responses[0].retry_after_s"),
    "latency-nan": (11, "tools.t.latency_s"),
    "timeout-tiny": None,  # tiny but positive and finite: it runs and times out
    "attempts-huge": (5, "job.defaults.retry.max_attempts"),
    "deadline-inf": (4, "job.deadline_s"),
}


@pytest.mark.parametrize("name", sorted(REFUSED_AT))
def test_hostile_numbers_get_the_answer_pinned_for_them(scratch: Path, name: str) -> None:
    """NaN latency, infinite weight, deadline or retry-after, overflowing totals: each is
    refused at its own line and field (or, for the one that can run, loads)."""
    assert set(REFUSED_AT) == set(NUMBERS)
    path = scratch / f"{name}.yaml"
    path.write_bytes(_numbers(name))
    expected = REFUSED_AT[name]
    if expected is None:
        load_scenario(path)
        return
    with pytest.raises(InputFileErrors) as caught:
        load_scenario(path)
    assert (caught.value.errors[0].line, caught.value.errors[0].field) == expected
    assert "finite" in caught.value.errors[0].expected or "≤" in caught.value.errors[0].expected


def _limit_memory() -> None:  # pragma: no cover - runs in the child before exec
    # 2 GiB of address space: an alias bomb that expands must fail, not swap the machine.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


CLI_CASES = {
    "laughs": _document(laughs(9)),
    "very-deep": SPECIAL["very-deep"],
    "invalid-utf8": SPECIAL["invalid-utf8"],
    "nul": SPECIAL["nul"],
    "tab": _document(b"1").replace(b"    - id: a", b"\t- id: a"),
    "timestamp": SPECIAL["args-timestamp"],
}


@pytest.mark.process
@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_fanout_replay_exits_2_without_a_traceback(tmp_path: Path, name: str) -> None:
    """The real CLI on a hostile file: exit 2 naming file:line: field, no traceback,
    within 60 s and 2 GiB."""
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(CLI_CASES[name])
    count("files")
    count("files:cli")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "fanout"), "replay", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        preexec_fn=_limit_memory,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    assert re.search(rf"{re.escape(str(path))}:\d+: \S+", proc.stderr), proc.stderr
