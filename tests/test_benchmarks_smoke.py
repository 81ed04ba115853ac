"""The benchmarks still run: every one at a tiny size. Not a timed test: no figure is judged."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
from pathlib import Path

import pytest

from benchmarks import readme_table, results
from benchmarks.baseline_tree import BaselineTree, encode_params
from benchmarks.registry import MODES, REGISTRY, Entry, _missing_fails, failures, keys, run_all
from benchmarks.stats import BenchResult, Figure, Stats

ROOT = Path(__file__).resolve().parents[1]


# Every benchmark for real, the service and a Temporal dev server included: about a
# minute on an idle 2-core machine, several on a loaded one (the default is 120 s).
@pytest.mark.process
@pytest.mark.timeout(600)
def test_every_benchmark_runs_at_a_tiny_size() -> None:
    """Each benchmark produces its figures and the results document is valid JSON."""
    done = run_all("quick")
    assert [r.key for r in done] == keys()
    for result in done:
        assert result.figures, result.key
        for figure in result.figures:
            # Only an optional baseline or benchmark that is not installed may lack one.
            assert figure.stats is not None or "not installed" in figure.note or (
                "timer's resolution" in figure.note), figure.label
    doc = results.document(done, command="smoke", seconds=0.0)
    for result in done:  # what a benchmark run in its own interpreter hands back
        again = BenchResult.from_json(result.key, doc["benchmarks"][result.key])
        assert again.to_json() == result.to_json(), result.key
    assert set(doc) >= {"machine", "versions", "benchmarks"}
    assert doc["versions"]["fanout"] is not None
    json.dumps(doc)
    assert "fan-out overhead" in results.markdown(done)


@pytest.mark.process
@pytest.mark.timeout(300)
def test_a_bench_run_measures_each_benchmark_in_an_interpreter_of_its_own() -> None:
    """The current tree's figures come from a fresh ``--here`` run at the run's size
    (``make bench``'s, or ``make bench-full``'s), read back whole."""
    from benchmarks.__main__ import _in_own_interpreter

    entry = next(e for e in REGISTRY if e.key == "context_gate")
    for mode in ("bench", "full"):
        got = _in_own_interpreter("context_gate", mode)
        assert got.key == "context_gate" and not failures([got])
        # The registry's size for that mode, not the smoke run's (no figure is judged).
        assert got.params["repeat"] == entry.params(mode)["repeat"], mode
        assert all(f.stats is not None for f in got.figures)


def test_every_benchmark_has_three_sizes_its_run_accepts() -> None:
    """Each entry gives quick, bench and full parameters, and its module's ``run`` takes
    every one of them (a misspelt size fails here, not ten minutes into `make bench`)."""
    assert set(MODES) == {"quick", "bench", "full"}
    for entry in REGISTRY:
        assert entry.bench, f"{entry.key} has no bench size"
        run = importlib.import_module(entry.module).run
        for mode in MODES:
            inspect.signature(run).bind(**entry.params(mode))


def test_baseline_parameters_travel_as_json_rooted_in_either_tree() -> None:
    """Tuples travel as lists and a path inside this tree as its place in the tree, so
    the baseline tree reads its own copy of a file (its scenarios, not ours)."""
    encoded = json.loads(encode_params({"root": ROOT / "scenarios", "sizes": (10, 20),
                                        "elsewhere": Path("/tmp"), "n": 3}))
    assert encoded == {"root": {"__path__": "scenarios"}, "sizes": [10, 20],
                       "elsewhere": {"__path__": "/tmp"}, "n": 3}


def test_figures_meet_their_baselines_by_key_and_label() -> None:
    """A figure gets the median of the same benchmark's same label as its baseline."""
    done = run_all("quick", only=["context_gate"])
    label = done[0].figures[0].label
    before = {"benchmarks": {"context_gate": {"figures": [{"label": label, "median": 2.0}]}}}
    results.with_baselines(done, before)
    first = done[0].figures[0]
    assert first.baseline == 2.0
    assert first.vs_baseline == first.stats.median / 2.0  # type: ignore[union-attr]
    assert all(f.baseline is None for f in done[0].figures[1:])
    assert "÷ baseline" in results.markdown(done)


def test_a_benchmark_without_its_extra_is_a_row_saying_so() -> None:
    """In a smoke run an entry whose package is missing is a row saying so."""
    entry = Entry("absent", "benchmarks.absent", needs=("no_such_package_here",))
    result = entry.run("quick")
    (figure,) = result.figures
    assert figure.stats is None and "no_such_package_here" in figure.note
    assert failures([result]) == []


def test_a_missing_competitor_fails_its_row_in_a_full_run() -> None:
    """In `make bench` a contender whose package is absent fails its rows (and the run),
    instead of its comparison quietly vanishing from the table."""
    entry = Entry("absent", "benchmarks.absent", needs=("no_such_package_here",))
    assert failures([_missing_fails(entry.run("bench"))]) == ["absent"]
    partial = BenchResult("overhead", "1", "t", {}, [
        Figure("bare", "µs", Stats.of([1.0])),
        Figure("LangGraph Send, N=10", "µs", None, note="not installed"),
    ])
    failed = _missing_fails(partial)
    assert failures([failed]) == ["overhead"]
    assert failed.figures[0].stats is not None
    assert "not installed" in failed.figures[1].note and "bench extra" in failed.figures[1].note


@pytest.mark.process
@pytest.mark.timeout(300)
def test_the_baseline_tree_runs_side_by_side_in_the_same_run() -> None:
    """The baseline is the same benchmark of an earlier tree (here HEAD, git archive), run
    now at this run's size: each figure gets that run's median, not a stored one."""
    params = {"late": 40, "repeat": 2}  # neither tree's registry has this size
    with BaselineTree("HEAD") as tree:
        assert not tree.unavailable, tree.unavailable
        assert tree.path is not None and (tree.path / "benchmarks").is_dir()
        now = [Entry("context_gate", "benchmarks.context_gate", bench=params).run("bench")]
        got = tree.run("context_gate", params)
        assert isinstance(got, dict), got
        assert got["params"]["late_step"] == 40 and got["params"]["repeat"] == 2
        results.with_baselines(now, {"benchmarks": {"context_gate": got}})
        assert "has no no_such_benchmark" in str(tree.run("no_such_benchmark", {}))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()
    assert tree.commit == head
    medians = {f["label"]: f["median"] for f in got["figures"]}
    for figure in now[0].figures:
        assert figure.baseline == medians[figure.label]
    assert tree.describe()["benchmarks"]["context_gate"] == got


@pytest.mark.process
def test_an_unknown_baseline_ref_says_so() -> None:
    """A ref git does not know leaves every benchmark without a baseline, saying why."""
    with BaselineTree("no-such-ref-anywhere") as tree:
        assert "unavailable" in tree.unavailable
        assert "unavailable" in str(tree.run("context_gate", {}))


def test_the_tables_say_which_run_they_come_from() -> None:
    """A results document records its mode, and both tables under it name that run."""
    (done,) = run_all("quick", only=["context_gate"])
    doc = results.document([done], command="python -m benchmarks", seconds=1.0, mode="bench")
    doc["baseline"] = None
    assert doc["mode"] == "bench"
    assert "`make bench`" in readme_table.headline(doc)
    assert "`make bench`" in results.markdown_from_json(doc)
    doc["mode"] = "full"
    assert "`make bench-full`" in readme_table.headline(doc)
    del doc["mode"]
    assert "sizes not recorded" in readme_table.headline(doc)


def test_the_readme_tables_are_generated_from_results_json(tmp_path: Path) -> None:
    """README.md's performance table is the one results.json generates (a hand-typed
    figure fails this), and the generator rewrites only its marked block."""
    doc = json.loads((ROOT / "benchmarks" / "results.json").read_text(encoding="utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(readme_table.START, 1)[1].split(readme_table.END, 1)[0]
    assert block.strip() == readme_table.headline(doc).strip()
    sizes = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    block = sizes.split(readme_table.SIZES_START, 1)[1].split(readme_table.SIZES_END, 1)[0]
    assert block.strip() == readme_table.sizes(doc).strip()  # the registry's sizes, too
    copy = tmp_path / "README.md"
    copy.write_text(f"before\n{readme_table.START}\nold\n{readme_table.END}\nafter\n")
    assert readme_table.rewrite(copy, "new")
    assert copy.read_text() == f"before\n{readme_table.START}\nnew\n{readme_table.END}\nafter\n"


def test_every_registered_module_names_its_key() -> None:
    """Each entry's module exists and its KEY is the entry's key (checked when it runs)."""
    assert len(set(keys())) == len(REGISTRY)
    assert Figure("x", "s", Stats.of([1.0])).vs_baseline is None


@pytest.mark.process
def test_the_replay_ratio_divides_whole_processes_timed_alike() -> None:
    """Benchmarks 6 and 6b time `fanout replay` and the bare task group the same way, as a
    user does: each a whole process of its own (the floor imports nothing of fanout), the
    marginal from each size's fastest run, and the table says so. The floor was timed
    inside the harness's own loop: 6.67× where a stopwatch said 10.1×."""
    from benchmarks import replay_cli

    floor = replay_cli.bare_once(10)
    assert floor.wall_s > 0 and floor.cpu_s > 0
    assert "coordinator" not in replay_cli._BARE_CHILD
    assert "benchmarks" not in replay_cli._BARE_CHILD
    (done,) = run_all("quick", only=["replay_full"])
    ratios = [f.label for f in done.figures if "÷ bare anyio" in f.label]
    assert any("whole processes" in label and "least disturbed" in label for label in ratios)
    assert all("whole processes" in label or "CPU" in label for label in ratios), ratios
    assert any("own process" in f.label and "bare anyio" in f.label for f in done.figures)
