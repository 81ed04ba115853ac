"""Start-up: what a ``fanout`` command costs before it does anything, as whole processes.

Each command runs as a user runs it, ``python -m coordinator.cli ...`` (what the
``fanout`` script runs), with its output sent to /dev/null, beside a bare ``python -c
pass`` on the same interpreter; each is timed from outside, whole: wall, and the child's
user + system CPU from ``os.wait4``. Repetitions interleave the commands, so drift on a
shared machine hits each alike; the first round is not counted (the page cache, the
bytecode). The commands:

- ``fanout --version``: the parser alone;
- ``fanout replay scenarios/permission_denied.yaml``: one small scenario, loaded, run in
  virtual time, checked and shown;
- ``fanout ask QUESTION --docs DIR`` with no model: a retrieval-only answer over a folder
  indexed beforehand (``fanout index``; a small generated corpus), recorded in the store;
  with the ``semantic`` extra the search is hybrid, and the index's refresh has left the
  checked copy of the model's weights that the ask's own load reads
  (``subagents/research/modelcopy.py``);
- ``pytest --version``: the yardstick the issue compared with (it loads fanout's pytest
  plugin too).

Beside the times, how many modules each command imports (``python -X importtime``): the
figure that says whether a command imports what it uses.

``python -m benchmarks.startup --tree DIR`` runs another checkout's CLI on this
interpreter: that is how the tree before the change was measured.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.docs_corpus import make_corpus
from benchmarks.replay_cli import Replayed, timed_process
from benchmarks.stats import BenchResult, Figure, Stats, Target, ratios

KEY = "startup"
ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "scenarios/permission_denied.yaml"
VERSION_CPU_S = 0.2
REPLAY_CPU_S = 0.5
ASK_WALL_S = 1.0


def _fanout(*args: str) -> list[str]:
    return [sys.executable, "-m", "coordinator.cli", *args]


def _env(tree: Path) -> dict[str, str]:
    """The tree's packages first; no web search or traces from the caller's environment
    (the ask must stay retrieval-only over its folder). Bytecode is written, as an
    installed package has it: with ``PYTHONDONTWRITEBYTECODE`` inherited, every module
    changed since its last cached bytecode would be compiled again in every repetition
    (60 ms of a replay when seven were), and the uncounted first round warms nothing."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("FANOUT_SEARCH", "PYTHONDONTWRITEBYTECODE")
           and not k.startswith("OTEL_")}
    return {**env, "PYTHONPATH": str(tree)}


def modules_imported(command: list[str], *, cwd: Path, env: dict[str, str]) -> int:
    """How many modules ``command`` (a Python one) imports, by ``-X importtime``."""
    argv = [command[0], "-X", "importtime", *command[1:]]
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=True)
    return sum(1 for line in done.stderr.splitlines()
               if line.startswith("import time:") and "[us]" not in line)


def run(repeat: int = 9, tree: Path = ROOT, docs_fillers: int = 24) -> BenchResult:
    """Each command ``repeat`` times, interleaved, after one uncounted round."""
    result = BenchResult(
        KEY, "9 · start-up",
        "`fanout` commands and a bare `python -c pass`, each a whole process timed from "
        "outside (CPU: the child's user + system time)",
        {"repeat": repeat, "tree": str(tree), "scenario": SCENARIO,
         "docs_fillers": docs_fillers},
    )
    env = _env(tree)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        docs, store = work / "docs", work / "runs.sqlite"
        question = make_corpus(docs, fillers=docs_fillers, big_mib=0)[0].question
        commands: dict[str, tuple[list[str], Path]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], work),
            "fanout --version": (_fanout("--version"), tree),
            f"fanout replay {Path(SCENARIO).name}": (_fanout("replay", SCENARIO), tree),
            "fanout ask --docs (retrieval only, indexed)": (
                _fanout("ask", question, "--docs", str(docs), "--store", str(store)), work),
            "pytest --version": ([sys.executable, "-m", "pytest", "--version"], work),
        }
        timed_process(_fanout("index", str(docs), "--store", str(store)), cwd=work, env=env,
                      what="fanout index")
        runs: dict[str, list[Replayed]] = {name: [] for name in commands}
        for round_ in range(repeat + 1):
            for name, (command, cwd) in commands.items():
                took = timed_process(command, cwd=cwd, env=env, what=name)
                if round_:  # the first round warms the page cache and the bytecode
                    runs[name].append(took)
        imported = {name: modules_imported(command, cwd=cwd, env=env)
                    for name, (command, cwd) in commands.items() if "fanout" in name}
    bare = [r.cpu_s for r in runs["python -c pass"]]
    for name, done in runs.items():
        cpu = Stats.of([r.cpu_s for r in done])
        wall = Stats.of([r.wall_s for r in done])
        target = None
        if name == "fanout --version":
            target = Target(f"≤ {VERSION_CPU_S:g} s", cpu.median, VERSION_CPU_S)
        elif name.startswith("fanout replay"):
            target = Target(f"≤ {REPLAY_CPU_S:g} s", cpu.median, REPLAY_CPU_S)
        result.figures.append(Figure(f"{name}: CPU", "s", cpu, target))
        if name.startswith("fanout ask"):
            result.figures.append(Figure(
                f"{name}: wall", "s", wall, Target(f"≤ {ASK_WALL_S:g} s", wall.median,
                                                  ASK_WALL_S),
                note="on a quiet machine; a loaded one waits for its turn"))
        if name != "python -c pass":
            result.figures.append(Figure(
                f"{name}: CPU ÷ python -c pass", "×",
                ratios([r.cpu_s for r in done], bare), note="per repetition"))
        if name in imported:
            result.figures.append(Figure(f"{name}: modules imported", "modules",
                                         Stats.of([imported[name]])))
    return result


def main(argv: Sequence[str] | None = None) -> None:
    """Run this benchmark alone, on this checkout or another (``--tree``)."""
    from benchmarks import results

    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose CLI runs")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--out", type=Path, help="also write a results document here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    done = run(repeat=args.repeat, tree=args.tree.resolve())
    results.show([done])
    if args.out:
        command = " ".join(["python -m benchmarks.startup", *(argv or sys.argv[1:])])
        doc = results.document([done], command=command, seconds=time.perf_counter() - started)
        results.write(args.out, doc)


if __name__ == "__main__":
    main()
