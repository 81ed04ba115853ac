"""The store conformance suite: every store operation, on SQLite and on Postgres alike."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any

import anyio
import pytest

from coordinator.serve.records import ServiceRecords
from coordinator.store.backend import EVENTS_CHANNEL
from coordinator.store.runs import (
    ResumeRefused,
    RunNotFound,
    RunStore,
    StoreError,
    new_run_id,
    run_values,
)
from coordinator.store.writer import StoreWriter, Tx
from coordinator.temporal.records import TemporalRunRef, register_run, temporal_run

REPORT = {"outcome": "complete", "coverage": 1.0, "elapsed_s": 2.5, "subtasks": [], "gaps": []}


def new_run(store: RunStore, **over: Any) -> str:
    """Record a run held by this process; its id (its recorder closed)."""
    recorder = store.create_run(job="j", query="q", file="f.yaml", spec_text="scenario: j",
                                seed="7", speed=over.get("speed", 2.0))
    recorder.close()
    return recorder.run_id


def set_holder(store: RunStore, run_id: str, pid: int | None, host: str | None,
               lease_until: float | None) -> None:
    """Point a run at another holder (a dead pid, another machine)."""
    with store.backend.connection() as conn:
        conn.execute("UPDATE runs SET pid = ?, host = ?, lease_until = ? WHERE id = ?",
                     (pid, host, lease_until, run_id))


def raw(target: str, sql: str, params: tuple[Any, ...]) -> Any:
    """Run one statement on the database itself (no fanout in between); its first row."""
    if "://" in target:
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            cur = conn.execute(sql.replace("?", "%s"), params)
            return cur.fetchone() if cur.description else None
    import sqlite3

    lite = sqlite3.connect(target, isolation_level=None)
    try:
        found = lite.execute(sql, params)
        return found.fetchone() if found.description else None
    finally:
        lite.close()


def dead_pid() -> int:
    """A pid no process has (a child that was reaped)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_new_store_is_created_at_the_current_schema(store: RunStore) -> None:
    """Opening an empty store creates every table and records the current version."""
    new_run(store)
    with store.backend.connection() as conn:
        rows = conn.execute("SELECT key, value FROM fanout_meta").fetchall()
    meta = {r[0]: r[1] for r in rows}
    assert meta == {"app": "fanout-run-store", "schema_version": str(store.backend.schema_version)}


def test_each_backend_writes_its_own_schema_version(store: RunStore) -> None:
    """The version a store records is its backend's (SQLite 3, Postgres 2 migrations), as
    runs.SCHEMA_VERSIONS says per backend; one module-wide number was SQLite's for both."""
    from coordinator.store.runs import SCHEMA_VERSIONS
    from coordinator.store.schema import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS

    new_run(store)
    with store.backend.connection() as conn:
        (written,) = conn.execute(
            "SELECT value FROM fanout_meta WHERE key = 'schema_version'").fetchone()
    mine = {"sqlite": SQLITE_MIGRATIONS, "postgresql": POSTGRES_MIGRATIONS}[store.backend.kind]
    assert int(written) == SCHEMA_VERSIONS[store.backend.kind] == len(mine)
    expected = {"sqlite": len(SQLITE_MIGRATIONS), "postgresql": len(POSTGRES_MIGRATIONS)}
    assert expected == SCHEMA_VERSIONS


def test_a_run_is_recorded_read_and_finished(store: RunStore) -> None:
    """Events, checkpoints, results and the report round-trip; the row reads finished."""
    recorder = store.create_run(job="j", query="q", file="f.yaml", spec_text="x", seed="7",
                                speed=1.5)
    recorder.event("a", "state", 0.25, {"state": "running"})
    recorder.event("b", "attempt", 0.5, {"tool": "search", "attempt": 1})
    recorder.checkpoint("a", {"step": 1})
    recorder.checkpoint("a", {"step": 2}, durable=True)
    anyio.run(recorder.commit_result, "b", {"subtask_id": "b", "ok": True}, {"step": 9})
    anyio.run(recorder.finish, REPORT, [("b", "gap", json.dumps({"subtask_id": "b"}))])
    recorder.close()
    run_id = recorder.run_id
    events = store.events(run_id)
    assert [(e["seq"], e["subtask_id"], e["kind"]) for e in events] == [
        (1, "a", "state"), (2, "b", "attempt")]
    assert events[1]["tool"] == "search" and events[1]["at"] == 0.5
    assert store.checkpoints(run_id) == {"a": {"step": 2}, "b": {"step": 9}}
    assert store.results(run_id) == {"b": {"subtask_id": "b", "ok": True}}
    assert store.last_event_at(run_id) == 0.5
    assert store.last_states(run_id) == {"a": "running"}
    assert store.events_after(run_id, 1) == events[1:]
    assert store.events_after(run_id, 0, 1) == events[:1]
    row = store.get(run_id)
    assert (row.status, row.outcome, row.coverage, row.speed) == ("finished", "complete", 1.0, 1.5)
    assert row.report == REPORT and row.pid is None
    with store.backend.connection() as conn:
        routes = conn.execute("SELECT subtask_id, route FROM escalations").fetchall()
    assert [tuple(r) for r in routes] == [("b", "gap")]


def test_runs_are_listed_newest_first_and_latest_is_the_newest(store: RunStore) -> None:
    """``runs`` lists newest first; ``get('latest')`` is the newest; unknown ids are refused."""
    first = new_run(store)
    second = new_run(store)
    ids = [r.id for r in store.runs()]
    assert set(ids) == {first, second} and ids[0] == max(first, second)
    assert store.get("latest").id == ids[0]
    with pytest.raises(RunNotFound, match="no run '20990101-000000-ffff'"):
        store.get("20990101-000000-ffff")


def test_a_run_with_no_runs_is_not_found(store: RunStore) -> None:
    """``latest`` in an empty store says there are no runs yet."""
    store.backend.migrate()
    with pytest.raises(RunNotFound, match="no runs recorded yet"):
        store.get("latest")


@pytest.mark.process
def test_the_holder_decides_whether_a_run_is_running(store: RunStore) -> None:
    """Running while its holder lives (pid here, lease elsewhere); else interrupted."""
    run_id = new_run(store)
    assert store.get(run_id).status == "running"
    set_holder(store, run_id, dead_pid(), socket.gethostname(), time.time() + 60)
    assert store.get(run_id).status == "interrupted"  # a dead pid here: at once
    set_holder(store, run_id, 4242, "another-machine", time.time() + 60)
    assert store.get(run_id).status == "running"  # another machine's unexpired lease
    set_holder(store, run_id, 4242, "another-machine", time.time() - 1)
    assert store.get(run_id).status == "interrupted"
    store.release(run_id)  # not ours: nothing changes
    set_holder(store, run_id, os.getpid(), socket.gethostname(), None)
    store.release(run_id)
    assert store.get(run_id).status == "interrupted"


def test_resume_is_refused_for_finished_and_held_runs(store: RunStore) -> None:
    """A finished run and one a live process holds cannot be claimed."""
    held = new_run(store)
    with pytest.raises(ResumeRefused, match="is being run by process"):
        store.claim_for_resume(held)
    recorder = store.create_run(job="j", query="q", file="f", spec_text="x", seed="1", speed=1)
    anyio.run(recorder.finish, REPORT, [])
    recorder.close()
    with pytest.raises(ResumeRefused, match="already finished"):
        store.claim_for_resume(recorder.run_id)


def test_an_interrupted_run_is_claimed_once_by_racing_resumers(target: str) -> None:
    """Eight threads with their own store objects race to claim: exactly one wins."""
    first = RunStore(target)
    run_id = new_run(first)
    set_holder(first, run_id, 4242, "gone-machine", time.time() - 1)
    wins: list[int] = []
    refusals: list[str] = []
    barrier = threading.Barrier(8)

    def claim() -> None:
        mine = RunStore(target)
        barrier.wait()
        try:
            recorder = mine.claim_for_resume(run_id)
        except ResumeRefused as exc:
            refusals.append(str(exc))
        else:
            wins.append(recorder.session)
            recorder.close()
        finally:
            mine.close()

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins == [2] and len(refusals) == 7
    row = first.get(run_id)
    assert (row.status, row.sessions, row.pid) == ("running", 2, os.getpid())
    first.close()


def test_concurrent_writers_number_one_runs_events_without_collisions(target: str) -> None:
    """Two writers (two connections) appending to one run at once get 1..400, no gaps."""
    store = RunStore(target)
    run_id = new_run(store)
    writers = [StoreWriter(RunStore(target).backend) for _ in range(2)]

    def write(writer: StoreWriter, who: str) -> None:
        for i in range(200):
            writer.event(run_id, 1, who, "state", float(i), {"state": "running"})

    threads = [threading.Thread(target=write, args=(w, f"s{n}")) for n, w in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in writers:
        w.close()
        w.backend.close()
    events = store.events(run_id)
    assert [e["seq"] for e in events] == list(range(1, 401))
    assert sorted(e["subtask_id"] for e in events) == ["s0"] * 200 + ["s1"] * 200
    store.close()


def test_events_numbered_in_one_transaction_follow_each_other_and_given_numbers(
    store: RunStore,
) -> None:
    """Events queued together are numbered in one transaction (the run's number read
    once), after any number a caller gave, and a later transaction goes on from there."""
    run_id = new_run(store)
    writer = StoreWriter(store.backend)
    try:
        gate = threading.Event()
        writer.submit(lambda tx: gate.wait(10))  # what follows queues into one batch
        for kind in ("a", "b"):
            writer.event(run_id, 1, "s", kind, 0.0, {})
        writer.event(run_id, 1, "s", "given", 0.0, {}, seq=10)
        writer.event(run_id, 1, "s", "c", 0.0, {})
        gate.set()
        writer.call(lambda tx: None)
        writer.event(run_id, 1, "s", "d", 0.0, {})
        writer.call(lambda tx: None)
    finally:
        writer.close()
    assert [(e["seq"], e["kind"]) for e in store.events(run_id)] == [
        (1, "a"), (2, "b"), (10, "given"), (11, "c"), (12, "d")]


def test_concurrent_first_openings_migrate_once(target: str) -> None:
    """Six processes' worth of stores opening an empty store at once all succeed."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def open_one() -> None:
        store = RunStore(target)
        barrier.wait()
        try:
            store.backend.migrate()
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_store_at_the_previous_version_is_migrated_with_its_runs(target: str) -> None:
    """A store an older fanout wrote (one migration behind) is upgraded; its runs stay."""
    old = RunStore(target)
    version = old.backend.schema_version
    old.backend.migrate_to(version - 1)
    old.close()
    # Written as the older fanout wrote it: straight to the database, no migration first.
    assert raw(target, "INSERT INTO runs (id, job, query, file, spec_text, seed, speed, "
               "started_at, status, outcome, coverage, elapsed_s, report_json) "
               "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
               ("20250101-000000-abcd", "old", "q", "f", "x", "1", 1.0,
                "2025-01-01T00:00:00+00:00", "finished", "complete", 1.0, 3.0,
                json.dumps(REPORT))) is None
    meta = raw(target, "SELECT value FROM fanout_meta WHERE key = 'schema_version'", ())
    assert meta == (str(version - 1),)
    store = RunStore(target)
    row = store.get("20250101-000000-abcd")
    assert (row.job, row.status, row.report) == ("old", "finished", REPORT)
    new_run(store)  # the new columns are there
    with store.backend.connection() as conn:
        meta = conn.execute("SELECT value FROM fanout_meta WHERE key = 'schema_version'")
        assert meta.fetchone()[0] == str(version)
    store.close()


def test_a_store_from_a_newer_fanout_is_refused(store: RunStore) -> None:
    """A schema version above ours is a clear error naming the upgrade."""
    store.backend.migrate()
    with store.backend.connection() as conn:
        conn.execute("UPDATE fanout_meta SET value = '999' WHERE key = 'schema_version'")
    fresh = RunStore(store.target)  # the tests' URLs hold no password
    if fresh.backend.kind == "sqlite":
        from coordinator.store import sqlite

        sqlite._MIGRATED.clear()
    with pytest.raises(StoreError, match="newer fanout"):
        fresh.runs()
    fresh.close()


def test_service_records_keys_cancels_and_states(store: RunStore) -> None:
    """Submissions (one per key, whoever takes it first), cancels and status moves."""
    records = ServiceRecords(store)
    writer = StoreWriter(store.backend)
    try:
        def values(status: str = "queued") -> tuple[Any, ...]:
            return run_values(new_run_id() + str(len(store.runs()) % 10), job="j", query="q",
                              file="POST /runs", spec_text="x", seed="1", speed=1.0,
                              status=status)  # type: ignore[arg-type]

        first = values()
        made = writer.call(records.submission(first, "key-1", "sha-a"))
        assert made.run_id == first[0]
        again = values()
        taken = writer.call(records.submission(again, "key-1", "sha-b"))
        assert (taken.run_id, taken.request_sha256) == (first[0], "sha-a")
        with pytest.raises(RunNotFound):
            store.get(again[0])  # nothing recorded for the loser
        assert records.by_key("key-1") is not None and records.by_key("nope") is None
        assert store.get(first[0]).status == "queued"
        writer.call(records.status_op(first[0], "running"))
        assert store.get(first[0]).status == "running"
        assert records.left_running() == [first[0]]
        assert not records.cancel_requested(first[0])
        writer.call(records.cancel_op(first[0]))
        assert records.cancel_requested(first[0])
        assert records.cancels_among([first[0], "x"]) == [first[0]]
    finally:
        writer.close()


def test_temporal_runs_are_registered(store: RunStore) -> None:
    """The workflow behind a Temporal run is found again; a local run has none."""
    run_id = new_run(store)
    assert temporal_run(store, run_id) is None
    ref = TemporalRunRef(run_id, "fanout-x", "127.0.0.1:7233", "default", "fanout")
    register_run(store, ref)
    register_run(store, ref)
    assert temporal_run(store, run_id) == ref


def test_a_failed_write_is_raised_to_the_caller_that_waits(store: RunStore) -> None:
    """A transaction that fails raises StoreError where the caller waits for it."""
    writer = StoreWriter(store.backend)
    try:
        def broken(tx: Tx) -> None:
            tx.execute("INSERT INTO no_such_table VALUES (1)")

        with pytest.raises(StoreError, match="writing the run store failed"):
            writer.call(broken)
        assert writer.call(lambda tx: 7) == 7  # the writer goes on
    finally:
        writer.close()


def test_a_failed_write_fails_alone_in_its_transaction(store: RunStore) -> None:
    """Writes queued together commit together, but one that fails (a run id taken) is
    undone alone: the other submission and the events beside it are committed."""
    records = ServiceRecords(store)
    writer = StoreWriter(store.backend)
    try:
        def values(run_id: str) -> tuple[Any, ...]:
            return run_values(run_id, job="j", query="q", file="POST /runs", spec_text="x",
                              seed="1", speed=1.0, status="queued")

        taken = new_run_id()
        writer.call(records.submission(values(taken), None, "sha-0"))
        fresh = new_run_id() + "0"
        gate = threading.Event()
        writer.submit(lambda tx: gate.wait(10))  # the next three queue behind it: one batch
        clash = writer.enqueue(records.submission(values(taken), None, "sha-1"))
        writer.event(taken, 1, "a", "started", 0.0, {})
        made = writer.enqueue(records.submission(values(fresh), None, "sha-2"))
        gate.set()
        with pytest.raises(StoreError, match="writing the run store failed"):
            clash.result(10)
        assert made.result(10).run_id == fresh
        assert store.get(fresh).status == "queued"
        assert [e["kind"] for e in store.events(taken)] == ["started"]
    finally:
        writer.close()


def test_a_write_failing_mid_operation_fails_alone(store: RunStore) -> None:
    """The error of a waited-for write may surface in the middle of it (on Postgres a
    pipelined statement's error is read when a later one is sent, or at a read): it is
    still undone alone, and the writes queued with it commit. (CI once saw the other
    submission fail with "pipeline aborted": the savepoint's rollback was sent into the
    aborted pipeline.)"""
    writer = StoreWriter(store.backend)
    try:
        run_id = new_run(store)
        gate = threading.Event()

        def clash(tx: Tx) -> None:
            row = "INSERT INTO events VALUES (?, 1, 0, 'a', ?, 0.0, '{}')"
            tx.execute(row, (run_id, "started"))
            tx.execute(row, (run_id, "again"))  # the same (run, seq): refused
            tx.execute("SELECT COUNT(*) FROM events").fetchone()  # the error surfaces here
            tx.execute("SELECT 1").fetchone()

        writer.submit(lambda tx: gate.wait(10))  # the next two queue behind it: one batch
        failed = writer.enqueue(clash)
        made = writer.enqueue(lambda tx: tx.execute("SELECT 41 + 1").fetchone()[0])
        gate.set()
        with pytest.raises(StoreError, match="writing the run store failed"):
            failed.result(10)
        assert made.result(10) == 42
        assert store.events(run_id) == []
        assert writer.call(lambda tx: 7) == 7  # the writer goes on
    finally:
        writer.close()


def test_committed_events_wake_listeners_where_the_backend_notifies(store: RunStore) -> None:
    """Postgres notifies a listener of the run whose events were committed; SQLite
    cannot, and says so."""
    run_id = new_run(store)
    if not store.backend.notifies:
        with pytest.raises(NotImplementedError, match="poll instead"):
            store.backend.listen([EVENTS_CHANNEL], lambda c, p: None, threading.Event())
        return
    heard: list[tuple[str, str]] = []
    got, stop, listening = threading.Event(), threading.Event(), threading.Event()

    def on_message(channel: str, payload: str) -> None:
        heard.append((channel, payload))
        got.set()

    def listen() -> None:
        listening.set()
        store.backend.listen([EVENTS_CHANNEL], on_message, stop)

    thread = threading.Thread(target=listen)
    thread.start()
    listening.wait()
    writer = StoreWriter(store.backend)
    try:
        deadline = time.monotonic() + 10
        while not got.is_set() and time.monotonic() < deadline:
            # Until the LISTEN is in place a notification can pass unheard: write again.
            writer.event(run_id, 1, "a", "state", 0.0, {"state": "running"})
            writer.call(lambda tx: None)
            got.wait(0.2)
    finally:
        writer.close()
        stop.set()
        thread.join()
    assert heard and heard[0] == (EVENTS_CHANNEL, run_id)
