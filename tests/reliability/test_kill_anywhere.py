"""Kill anywhere: `fanout run` SIGKILLed at 20 points across a job, each followed by
`fanout resume`.

Four chains of five kills: a run is killed, its resume is killed in turn, and so on,
until a last resume finishes it; so kills land in first sessions and resumed ones alike.
Most come from outside, once the session has written a chosen number of events (spread
over the job, several inside the retry round): the process stops itself as the commit
holding its Nth event ends (``FANOUT_TEST_STOP_AFTER_EVENTS``; its other threads are
wherever they are), and the test, told so by waitpid, SIGKILLs it. (It polled the store
and killed once the count was reached, a race the run could win under load, and one
that needed the run slow to lose.) The rest come from inside, the process killing
itself in the middle of its Nth store write (``FANOUT_TEST_KILL_AT_WRITE``: after the
write's statement, before its commit). Each chain ends with the uninterrupted run's
report (statuses, attempts, findings, gaps); no finished subtask runs again; and no
booking (a non-idempotent tool with side effects) has its effect twice across the
chain's processes: a subtask killed during one escalates unknown_state instead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from coordinator.jobfile.loader import load_scenario
from coordinator.routing import RoutingTable
from coordinator.store.runs import RunStore
from shared.escalation import Escalation
from tests.reliability.counts import count

# The CLI, killed anywhere, as subprocesses.
pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("data") / "kill_job.yaml"
SPEED = "10"
BOOKINGS = {"book", "book_flaky"}
VOLATILE = {"trace_id", "trace_ids", "started_s", "ended_s", "elapsed_s"}
ROUTES = RoutingTable(load_scenario(JOB).job.routing)
KILLS_PER_CHAIN = 5


def normalized(value: Any) -> Any:
    """A report without what differs between runs of one job: trace ids and times."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


Kill = tuple[str, int]
"""("event", N): SIGKILL once the session has added N events to the store;
("write", N): the process kills itself inside its Nth store write."""
HOOKS = {"event": "FANOUT_TEST_STOP_AFTER_EVENTS", "write": "FANOUT_TEST_KILL_AT_WRITE"}


@dataclass
class Chain:
    """One run killed again and again, each kill followed by `fanout resume`."""

    name: str
    kills: list[Kill]
    store: Path
    log: Path

    def env(self, kill: Kill | None = None) -> dict[str, str]:
        """The environment of the chain's processes (the kill hook ``kill`` needs)."""
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FANOUT_EXEC_LOG": str(self.log)}
        for hook in HOOKS.values():
            env.pop(hook, None)
        if kill is not None:
            env[HOOKS[kill[0]]] = str(kill[1])
        return env

    def argv(self, *args: str) -> list[str]:
        """``fanout ARGS`` with tool executions logged (tests/reliability/logged_cli.py)."""
        return [sys.executable, "-m", "tests.reliability.logged_cli", *args, "--store",
                str(self.store)]


def session(chain: Chain, args: list[str], kill: Kill | None) -> tuple[int, str]:
    """One `fanout` process of the chain, killed as ``kill`` says; (exit code, stdout)."""
    out, err = chain.log.with_suffix(".out"), chain.log.with_suffix(".err")
    with open(out, "wb") as stdout, open(err, "ab") as stderr:
        proc = subprocess.Popen(chain.argv(*args), cwd=ROOT, env=chain.env(kill),
                                stdout=stdout, stderr=stderr)
        try:
            if kill is not None and kill[0] == "event":
                # The event to wait for: the process stopped itself at its Nth event (or
                # ended first, which the caller reports as a session without its kill).
                _, status = os.waitpid(proc.pid, os.WUNTRACED)
                if os.WIFSTOPPED(status):
                    proc.send_signal(signal.SIGKILL)
                else:
                    proc.returncode = os.waitstatus_to_exitcode(status)
            proc.wait(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "Traceback" not in err.read_text(errors="replace"), err.read_text()[-2000:]
    return proc.returncode, out.read_text()


def final_results(store: RunStore, run_id: str) -> set[str]:
    """Subtasks whose committed result is final (a round-one result routed retry_later is
    committed too, and runs again by design)."""
    return {
        sid
        for sid, result in store.results(run_id).items()
        if result["escalation"] is None
        or result["rounds"] >= 2
        or ROUTES.route(Escalation.model_validate(result["escalation"])).route != "retry_later"
    }


def effects(log: Path) -> dict[str, int]:
    """Per subtask, the bookings whose effect may have happened, over every process."""
    out: dict[str, int] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        ex = json.loads(line)
        if ex["tool"] in BOOKINGS and (
            ex["kind"] != "error" or ex["error"] in ("timeout", "connection_reset", "crash")
        ):
            out[ex["subtask"]] = out.get(ex["subtask"], 0) + 1
    return out


@dataclass
class Outcome:
    """What one chain did and ended with."""

    chain: Chain
    report: dict[str, Any]
    kills: list[Kill]
    during: set[str]
    rerun: set[str]
    in_retry_round: int


def in_the_retry_round(store: RunStore, run_id: str, this: list[dict[str, Any]]) -> bool:
    """Whether the killed session had begun the retry round: it has events of a subtask
    after that subtask's round-one result was routed retry_later."""
    results = store.results(run_id)
    again = {sid for sid in results if sid not in final_results(store, run_id)}
    again |= {sid for sid, r in results.items() if r["rounds"] >= 2}
    for sid in again:
        mine = [e for e in this if e["subtask_id"] == sid]
        ends = [i for i, e in enumerate(mine) if e["kind"] == "state"
                and e.get("state") == "escalated"]
        if mine[ends[0] + 1:] if ends else mine:
            return True
    return False


def run_chain(chain: Chain) -> Outcome:
    """Run, kill, resume, kill, ..., and resume to the end."""
    args = ["run", str(JOB), "--speed", SPEED, "--json"]
    made: list[Kill] = []
    during: set[str] = set()
    rerun: set[str] = set()
    finished: set[str] = set()
    in_retry_round = 0
    run_id: str | None = None
    pending = list(chain.kills)
    while True:
        kill = pending.pop(0) if pending else None
        code, stdout = session(chain, args, kill)
        store = RunStore(chain.store)
        run_id = run_id or store.get("latest").id
        row = store.get(run_id)
        this = [e for e in store.events(run_id) if e["session"] == row.sessions]
        rerun |= {e["subtask_id"] for e in this if e["kind"] == "start"} & finished
        if code == 0:
            assert row.status == "finished"
            return Outcome(chain, json.loads(stdout), made, during, rerun, in_retry_round)
        assert code == -signal.SIGKILL and kill is not None, (chain.name, kill, code)
        made.append(kill)
        assert row.status == "interrupted", (chain.name, row.status)
        saved = store.checkpoints(run_id)
        if in_the_retry_round(store, run_id, this):
            in_retry_round += 1
        during |= {
            sid
            for sid, s in saved.items()
            if s["run"].get("in_flight") and s["run"]["state"] not in ("done", "escalated")
        }
        finished = final_results(store, run_id)
        args = ["resume", run_id, "--json"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], int, int]:
    """The uninterrupted run's report, its event count, and where its retry round begins."""
    tmp = tmp_path_factory.mktemp("reference")
    chain = Chain("reference", [], tmp / "runs.sqlite", tmp / "exec.log")
    code, stdout = session(chain, ["run", str(JOB), "--speed", SPEED, "--json"], None)
    assert code == 0
    store = RunStore(chain.store)
    trace = store.events(store.get("latest").id)
    queued: dict[str, int] = {}
    retry_round = len(trace)
    for index, event in enumerate(trace):
        if event["kind"] == "state" and event.get("state") == "queued":
            queued[event["subtask_id"]] = queued.get(event["subtask_id"], 0) + 1
            if queued[event["subtask_id"]] == 2:
                retry_round = min(retry_round, index + 1)
    assert retry_round < len(trace), "the job has a retry round"
    assert all(n <= 1 for n in effects(chain.log).values())
    return json.loads(stdout), len(trace), retry_round


def chains(tmp: Path, total: int, retry_round: int) -> list[Chain]:
    """Twenty kill points in four chains: spread, late (the retry round), in writes, mixed."""
    step = max(2, total // 7)
    plans: dict[str, list[Kill]] = {
        "spread": [("event", step)] * KILLS_PER_CHAIN,
        "late": [("event", retry_round + 1), *[("event", 3)] * (KILLS_PER_CHAIN - 1)],
        "writes": [("write", n) for n in (4, 11, 18, 25, 32)],
        "mixed": [("write", 9), ("event", 2 * step), ("write", 3), ("event", step),
                  ("write", 20)],
    }
    return [Chain(name, kills, tmp / f"{name}.sqlite", tmp / f"{name}.log")
            for name, kills in plans.items()]


# A margin for what cannot run in virtual time: 24 fanout processes, each ~1.8 s of CPU
# (importing fanout is half of it): about 45 s of CPU, which two busy cores shared with
# other work stretch past the suite's 120 s. No step waits on a wall-clock guess.
@pytest.mark.timeout(360)
def test_a_run_killed_anywhere_resumes_to_the_uninterrupted_report(
    tmp_path: Path, reference: tuple[dict[str, Any], int, int]
) -> None:
    """Twenty SIGKILLs, each resumed: the uninterrupted run's statuses, attempts, findings
    and gaps; finished subtasks never run again; no booking happens twice."""
    clean, total, retry_round = reference
    planned = chains(tmp_path, total, retry_round)
    assert sum(len(c.kills) for c in planned) == 20
    with ThreadPoolExecutor(max_workers=len(planned)) as pool:
        done = list(pool.map(run_chain, planned))
    want_lines = {s["id"]: normalized(s) for s in clean["subtasks"]}
    want_gaps = {g["subtask_id"]: normalized(g) for g in clean["gaps"]}
    for outcome in done:
        name = outcome.chain.name
        count("kills", len(outcome.kills))
        count("kills:store_write", sum(kind == "write" for kind, _ in outcome.kills))
        count("kills:during_effect", len(outcome.during))
        assert outcome.kills == outcome.chain.kills, f"{name}: a session ended before its kill"
        assert outcome.rerun == set(), f"{name}: finished subtasks ran again: {outcome.rerun}"
        assert all(n <= 1 for n in effects(outcome.chain.log).values()), name
        if not outcome.during:
            assert normalized(outcome.report) == normalized(clean), name
            continue
        lines = {s["id"]: normalized(s) for s in outcome.report["subtasks"]}
        gaps = {g["subtask_id"]: g for g in outcome.report["gaps"]}
        for sid in outcome.during:
            assert (gaps[sid]["trigger"], gaps[sid]["route"]) == ("unknown_state", "escalate")
        for sid, line in want_lines.items():
            if sid not in outcome.during:
                assert lines[sid] == line, (name, sid)
                assert normalized(gaps.get(sid)) == want_gaps.get(sid), (name, sid)
    in_retry_round = sum(o.in_retry_round for o in done)
    count("kills:retry_round", in_retry_round)
    assert in_retry_round >= 3, "kills inside the retry round"
