"""What a newcomer meets first: a folder for a file, a closed pipe, Ctrl-C, a missing flag."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from coordinator.cli import build_parser, main
from coordinator.cli.main import EXIT_BROKEN_PIPE
from coordinator.store.runs import RunStore
from coordinator.views.terminal import runs_table, trace_entries, trace_table

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios"
DESIGN = Path(__file__).resolve().parents[1] / "data" / "design_example.yaml"


def _fanout(*args: str, **kwargs: object) -> list[str]:
    return [sys.executable, "-m", "coordinator.cli", *args]


@pytest.mark.process
@pytest.mark.parametrize("command", ["run", "tools"])
def test_a_folder_where_one_job_file_is_expected_is_exit_2(
    command: str, tmp_path: Path
) -> None:
    """`fanout run DIR` and `fanout tools DIR` refuse the folder, naming its job files,
    exit 2, no traceback (run read the folder as a file; tools described its first)."""
    proc = subprocess.run(
        _fanout(command, str(SCENARIOS), "--store", str(tmp_path / "s.sqlite"))
        if command == "run"
        else _fanout(command, str(SCENARIOS)),
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "is a directory" in proc.stderr and f"fanout {command}" in proc.stderr
    assert "allowlist_violation.yaml" in proc.stderr  # a job file it could have named
    assert not (tmp_path / "s.sqlite").exists() or not RunStore(tmp_path / "s.sqlite").runs()


@pytest.mark.process
def test_a_closed_pipe_ends_quietly_with_141() -> None:
    """`fanout replay scenarios/ --json | head -1`: no BrokenPipeError traceback, and
    the exit status a Unix tool gives when its reader goes away (128 + SIGPIPE)."""
    proc = subprocess.Popen(
        _fanout("replay", str(SCENARIOS), "--json"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )
    with proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().strip() == b"{"
        proc.stdout.close()  # what `head -1` does once it has its line
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_ask_without_a_model_names_the_option_not_a_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`fanout ask Q` with no --model and no model block: the error is about the command
    and names --model; it does not say "cannot run this file" when no file was given."""
    tools = Path(__file__).resolve().parents[3] / "docs" / "simulated_research_tools.yaml"
    assert main(["ask", "what is new?", "--tools", str(tools)]) == 2
    err = capsys.readouterr().err
    assert "cannot run this file" not in err
    assert "cannot run this command" in err and "--model PROVIDER:NAME" in err


def _ctrl_c_heard() -> None:
    """In the child before it runs: SIGINT back to its default. A suite started as a
    background job of a script (``cmd &`` without job control) runs with SIGINT ignored,
    which every child inherits, and a `fanout` that never hears the Ctrl-C cannot be
    tested for what it does then."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ended(proc: subprocess.Popen[str], timeout_s: float = 60, *, out: bool = False) -> str:
    """``proc``'s remaining stderr once it ends; one that has not ended ``timeout_s``
    after its Ctrl-C is aborted, and the test fails with every thread's stack (its
    faulthandler's), rather than waiting past the suite's own limit."""
    try:
        return proc.communicate(timeout=timeout_s)[0 if out else 1]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        stacks = proc.communicate(timeout=30)[0 if out else 1]
        pytest.fail(f"still running {timeout_s:g} s after Ctrl-C:\n{stacks}")


@pytest.mark.process
def test_ctrl_c_on_run_says_how_to_resume(tmp_path: Path) -> None:
    """Ctrl-C during `fanout run` keeps the run and prints `fanout resume ID`, exit 130."""
    store = tmp_path / "runs.sqlite"
    proc = subprocess.Popen(
        _fanout("run", str(DESIGN), "--speed", "0.05", "--store", str(store)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        # faulthandler: a run that does not end on Ctrl-C shows where it stands (below).
        env={**os.environ, "COLUMNS": "120", "PYTHONFAULTHANDLER": "1"},
        preexec_fn=_ctrl_c_heard,
    )
    with proc:
        assert proc.stderr is not None
        # Wait for the event, not a time: the line that says the run is recorded.
        line = proc.stderr.readline()
        match = re.search(r"run (\S+) recorded in", line)
        assert match, line
        run_id = match.group(1)
        proc.send_signal(signal.SIGINT)
        rest = _ended(proc)
        assert proc.returncode == 130, rest
    assert f"fanout resume {run_id}" in rest, rest
    assert "Traceback" not in rest
    assert RunStore(store).get(run_id).status == "interrupted"


@pytest.mark.process
def test_ctrl_c_with_output_piped_starts_its_message_on_a_line_of_its_own(
    tmp_path: Path,
) -> None:
    """stdout and stderr into one pipe (`fanout run JOB 2>&1 | tee log`): the live
    display's last line ends before `interrupted:` (it read `18.0sinterrupted:`)."""
    proc = subprocess.Popen(
        _fanout("run", str(DESIGN), "--speed", "0.05", "--store", str(tmp_path / "r.sqlite")),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        env={**os.environ, "COLUMNS": "100", "PYTHONFAULTHANDLER": "1"},
        preexec_fn=_ctrl_c_heard,
    )
    with proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the run is recorded: the live display is on
        assert "recorded in" in line, line
        proc.send_signal(signal.SIGINT)
        rest = _ended(proc, out=True)
        assert proc.returncode == 130, rest
    said = [text for text in rest.splitlines() if "interrupted:" in text]
    assert said and all(text.startswith("interrupted:") for text in said), rest


def _stored_run(tmp_path: Path) -> RunStore:
    store_file = tmp_path / "runs.sqlite"
    assert main(["run", str(DESIGN), "--json", "--speed", "1000", "--store", str(store_file)]) == 0
    return RunStore(store_file)


def _render(renderable: object, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text().splitlines()


def test_runs_and_trace_read_at_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At 80 columns `runs` keeps each run on one line with its id, outcome, coverage and
    time whole (the right-hand columns were cut off), and `trace` keeps subtask, tool,
    outcome readable by dropping the trace id and session columns."""
    store = _stored_run(tmp_path)
    capsys.readouterr()
    rows = store.runs()
    lines = _render(runs_table(rows, width=80), 80)
    assert all(len(line) <= 80 for line in lines)
    [line] = [line for line in lines if rows[0].id in line]
    assert "partial" in line and "50%" in line and line.rstrip().endswith("s │")
    wide = "\n".join(_render(runs_table(rows, width=140), 140))
    assert "finished" in wide and "started" in wide
    entries = trace_entries(store.events(rows[0].id))
    trace = "\n".join(_render(trace_table(rows[0].id, entries, width=80), 80))
    assert "trace id" not in trace and "permission: forbidden" in trace
    assert all(len(line) <= 80 for line in trace.splitlines())
    assert "market" in trace and "patents" in trace
    wide = "\n".join(_render(trace_table(rows[0].id, entries, width=160), 160))
    assert "trace id" in wide and "session" in wide
    assert json.dumps(entries)  # --json keeps every field


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _parsers(child)
    return found


def test_no_parser_takes_an_abbreviation() -> None:
    """Every parser, subcommands' included, has allow_abbrev off: `--doc` is not `--docs`."""
    parsers = _parsers(build_parser())
    assert len(parsers) > 15
    assert [p.prog for p in parsers if p.allow_abbrev] == []


@pytest.mark.parametrize(("argv", "usage"), [
    pytest.param(["ask", "q?", "--doc", "papers"], "usage: fanout ask", id="ask-doc"),
    pytest.param(["replay", "scenarios", "--jsn"], "usage: fanout replay", id="replay-typo"),
    pytest.param(["serve", "--prot", "80"], "usage: fanout serve", id="serve-typo"),
    pytest.param(["temporal", "dev", "--bogus"], "usage: fanout temporal dev", id="nested"),
])
def test_a_misspelled_option_is_exit_2_with_the_subcommands_usage(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown or abbreviated option is refused by the subcommand, which shows its own
    usage (it was the top-level `usage: fanout [-h] COMMAND ...`)."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage), err
    assert "unrecognized arguments" in err


@pytest.mark.parametrize(("argv", "hint"), [
    pytest.param(["ask", "q?", "--doc", "papers"], "(did you mean --docs?)", id="ask-doc"),
    pytest.param(["runs", "--jsno"], "(did you mean --json?)", id="runs-json"),
    pytest.param(["serve", "--prot", "80"], "(did you mean --port?)", id="serve-port"),
    pytest.param(["rnu", "job.yaml"], "(did you mean 'run'?)", id="command"),
    pytest.param(["report", "--format", "htm"], "(did you mean 'html'?)", id="choice"),
])
def test_a_misspelled_option_or_command_is_told_the_nearest_one(
    argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """difflib over the command's own options (or the choices argparse names) adds "did
    you mean"; an option like none of them gets no guess."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith(hint)
    with pytest.raises(SystemExit):
        main(["runs", "--zzzzzz"])
    assert "did you mean" not in capsys.readouterr().err


def test_the_hint_of_an_ask_without_a_model_fits_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fanout ask --docs DIR` without a model says so on stderr in lines of at most 78
    columns (one 120-column line wrapped mid-word in an 80-column terminal)."""
    code = main(["ask", "How much capacity do sodium-ion cells keep at -20 °C?", "--docs",
                 str(ROOT / "examples" / "papers"), "--store", str(tmp_path / "runs.sqlite")])
    assert code == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "model" in line]
    assert said and all(len(line) <= 78 for line in said), said
    assert any("--model PROVIDER:NAME" in line for line in said)


def test_the_index_summary_reads_whole_at_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fanout index` in 80 columns: every heading of its summary whole (they were cut to
    "unchan…", "passag…")."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["index", str(ROOT / "examples" / "papers"),
                 "--store", str(tmp_path / "runs.sqlite")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    [head] = [line for line in lines if "added" in line]
    assert head.split() == ["added", "updated", "removed", "unchanged", "skipped",
                            "documents", "passages", "size"]
    assert "…" not in "\n".join(lines)


def test_fanout_version_prints_the_installed_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`fanout --version` prints `fanout X.Y.Z` (the installed distribution's) and exits 0."""
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"fanout {version('fanout')}"


@pytest.mark.process
@pytest.mark.parametrize("columns", [pytest.param("80", id="80-columns"),
                                     pytest.param(None, id="piped"),
                                     pytest.param("50", id="50-columns")])
def test_replay_at_80_columns_or_piped_keeps_every_column_whole(columns: str | None) -> None:
    """`fanout replay scenarios/` in 80 columns or into a pipe: results, outcomes and
    numbers whole (they were cut to "p…", "c…"), long names folded; narrower, a line each."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    proc = subprocess.run(_fanout("replay", str(SCENARIOS)), capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    width = int(columns or 80)
    lines = proc.stdout.splitlines()
    assert all(len(line) <= width for line in lines)
    assert "…" not in proc.stdout
    for whole in ("pass", "partial", "complete", "100%", "coverage" if width >= 64 else "ms"):
        assert whole in proc.stdout, whole
    rows = [line for line in lines if "deadline-retry-round" in line]
    assert rows and "pass" in rows[0] and "partial" in rows[0] and "50%" in rows[0], rows


SLOW_JOB = """\
scenario: slow-resume
job:
  query: q
  defaults: {tool_timeout_s: 5000}
  subtasks:
    - {id: a, query: a, tools: [slow], plan: [{call: slow, args: {}}]}
tools:
  slow: {params: {}, latency_s: 3000, responses: [{ok: {answer: 1}}]}
"""


def _interrupted(tmp_path: Path, speed: float) -> tuple[Path, str]:
    """A run of SLOW_JOB whose holder is gone before it ran anything: interrupted."""
    job = tmp_path / "slow.yaml"
    job.write_text(SLOW_JOB)
    store = tmp_path / "runs.sqlite"
    made = subprocess.run(
        [sys.executable, "-c",
         "import sys; from coordinator.store.runs import RunStore\n"
         "r = RunStore(sys.argv[1]).create_run(job='slow-resume', query='q', file=sys.argv[2],"
         " spec_text=open(sys.argv[2]).read(), seed='0', speed=float(sys.argv[3]))\n"
         "print(r.run_id)", str(store), str(job), str(speed)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=True,
    )
    run_id = made.stdout.strip()
    assert RunStore(store).get(run_id).status == "interrupted"
    return store, run_id


@pytest.mark.parametrize(("started_at", "flags"), [
    pytest.param(1.0, ["--speed", "100000"], id="resume-speed"),
    pytest.param(100000.0, [], id="the-runs-own-speed"),
])
@pytest.mark.process
def test_resume_runs_at_its_speed_flag_or_at_the_runs_own(
    tmp_path: Path, started_at: float, flags: list[str]
) -> None:
    """`fanout resume ID --speed X` scales simulated time like `run --speed` (a 3,000
    virtual-second tool call at speed 1 would outlast the test); without it, the run's own
    speed."""
    store, run_id = _interrupted(tmp_path, started_at)
    done = subprocess.run(_fanout("resume", run_id, "--json", "--store", str(store), *flags),
                          capture_output=True, text=True, timeout=90, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "complete" and report["elapsed_s"] >= 3000


@pytest.mark.process
def test_resume_refuses_a_speed_that_is_not_positive(tmp_path: Path) -> None:
    """`fanout resume ID --speed 0` is exit 2, as `run --speed 0` is."""
    store, run_id = _interrupted(tmp_path, 1.0)
    assert main(["resume", run_id, "--speed", "0", "--store", str(store)]) == 2
