"""Load on ``fanout serve``: 50 runs submitted at once, 200 SSE clients, loopback only.

``python -m benchmarks.serve_load`` starts the real service (FastAPI on uvicorn, the same
app as ``fanout serve``) in a fresh interpreter on 127.0.0.1, submits every run at the
same moment, and opens every event stream (client *i* follows run *i* mod runs) as soon
as its run exists. It then checks that each client got each event of its run exactly
once, in order, ending with ``end``, and equal to what the store recorded.

Delivery latency is, per live event and client, the wall time from the moment the server
published the event (its run's recorder appended it; the child records ``time.time()``
there) to the moment the client had parsed it. Events a client read as history (they
happened before it connected) are checked but not timed. Peak RSS is the server
process's ``VmHWM``. Everything is bounded: ``--runs``, ``--clients`` and ``--timeout``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from benchmarks import results
from benchmarks.stats import BenchResult, Figure, Stats, Target

KEY = "serve_load"
ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "scenarios" / "research_demo.yaml"
P99_LIMIT_MS = 250.0


@dataclass
class Client:
    """One SSE client's view of its run."""

    run_id: str
    connected_at: float = 0.0
    ids: list[int] = field(default_factory=list)
    data: list[dict[str, Any]] = field(default_factory=list)
    received_at: list[float] = field(default_factory=list)
    ended: bool = False


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def _follow(http: httpx.AsyncClient, client: Client) -> None:
    current: dict[str, str] = {}
    async with http.stream("GET", f"/runs/{client.run_id}/events") as r:
        r.raise_for_status()
        client.connected_at = time.time()
        async for line in r.aiter_lines():
            if line == "":
                if current.get("event") == "end":
                    client.ended = True
                    return
                if "id" in current:
                    client.received_at.append(time.time())
                    client.ids.append(int(current["id"]))
                    client.data.append(json.loads(current["data"]))
                current = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(": ")
                current[key] = value


async def _drive(
    url: str, runs: int, clients: int, speed: float, bound_s: float
) -> dict[str, Any]:
    body = JOB.read_bytes()
    limits = httpx.Limits(max_connections=clients + runs + 10, max_keepalive_connections=50)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=bound_s) as http:
        started = time.perf_counter()

        async def submit() -> tuple[str, float]:
            t0 = time.perf_counter()
            r = await http.post("/runs", params={"speed": speed}, content=body,
                                headers={"Content-Type": "application/yaml"})
            r.raise_for_status()
            return r.json()["run_id"], time.perf_counter() - t0

        submitted = await asyncio.gather(*(submit() for _ in range(runs)))
        run_ids = [run_id for run_id, _ in submitted]
        followers = [Client(run_ids[i % runs]) for i in range(clients)]
        async with asyncio.timeout(bound_s):
            await asyncio.gather(*(_follow(http, c) for c in followers))
        wall = time.perf_counter() - started
        stored: dict[str, list[dict[str, Any]]] = {}
        for run_id in run_ids:
            # The store is the reference: a finished run's stream is read from it.
            ref = Client(run_id)
            await _follow(http, ref)
            stored[run_id] = ref.data
        statuses = [(await http.get(f"/runs/{rid}")).json()["status"] for rid in run_ids]
    return {"followers": followers, "stored": stored, "wall_s": wall, "statuses": statuses,
            "submit_s": [s for _, s in submitted]}


def run(runs: int = 50, clients: int = 200, *, speed: float = 10.0,
        timeout: float = 180.0) -> BenchResult:
    """Start the service, load it, check every stream, and return the figures."""
    result = BenchResult(
        KEY, "6 · service load",
        f"fanout serve: {runs} runs submitted at once, {clients} SSE clients (loopback)",
        {"runs": runs, "clients": clients, "speed": speed, "job": JOB.name,
         "timeout_s": timeout},
    )
    with tempfile.TemporaryDirectory() as tmp:
        port_file, times_file = Path(tmp) / "port", Path(tmp) / "published.json"
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.serve_load", "--child", str(Path(tmp) / "s.db"),
             str(port_file), str(times_file), str(runs)],
            cwd=ROOT, stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().endswith("\n")):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the service did not start")
                time.sleep(0.05)
            url = f"http://127.0.0.1:{port_file.read_text().strip()}"
            driven = asyncio.run(_drive(url, runs, clients, speed, timeout))
            peak = _peak_rss_mib(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            if proc.stderr is not None:
                proc.stderr.close()
        published: dict[str, float] = json.loads(times_file.read_text())

    latencies: list[float] = []
    delivered = lost = disorder = 0
    for c in driven["followers"]:
        ref = driven["stored"][c.run_id]
        delivered += len(c.ids)
        lost += len(ref) - len(c.ids) + (0 if c.ended else 1)
        disorder += c.ids != list(range(1, len(ref) + 1)) or c.data != ref
        for seq, at in zip(c.ids, c.received_at, strict=True):
            sent = published.get(f"{c.run_id}/{seq}")
            if sent is not None and sent >= c.connected_at:
                latencies.append((at - sent) * 1000)
    if lost or disorder or set(driven["statuses"]) != {"finished"}:
        raise AssertionError(f"streams lost {lost} events, {disorder} clients out of order, "
                             f"statuses {set(driven['statuses'])}")
    p50, p99 = _percentile(latencies, 0.5), _percentile(latencies, 0.99)
    result.figures += [
        Figure("events delivered (every client, every event, in order)", "events",
               Stats.of([float(delivered)]), note=f"{len(latencies)} live, timed; 0 lost"),
        Figure("event delivery latency p50", "ms", Stats.of([p50])),
        Figure("event delivery latency p99", "ms", Stats.of([p99]),
               Target(f"< {P99_LIMIT_MS:g} ms", p99, P99_LIMIT_MS, strict=True)),
        Figure("event delivery latency max", "ms", Stats.of([max(latencies)])),
        Figure("POST /runs latency (all at once)", "ms",
               Stats.of([s * 1000 for s in driven["submit_s"]])),
        Figure("all runs done, all streams read", "s", Stats.of([driven["wall_s"]])),
        Figure("server peak RSS (VmHWM)", "MiB", Stats.of([peak])),
    ]
    result.params["latency_mean_ms"] = round(statistics.fmean(latencies), 3)
    return result


def child(store: str, port_file: str, times_file: str, max_runs: int) -> None:
    """The service, instrumented: records when each event is published."""
    from coordinator.serve import ServeConfig, bind_socket, run_server

    published: dict[str, float] = {}

    def hook(run_id: str, seq: int) -> None:
        published[f"{run_id}/{seq}"] = time.time()

    sock = bind_socket("127.0.0.1", 0)
    config = ServeConfig(store=Path(store), max_runs=max_runs, max_streams=4096)
    Path(port_file).write_text(f"{sock.getsockname()[1]}\n")
    try:
        run_server(config, sock, log_level="warning", on_publish=hook)
    finally:
        Path(times_file).write_text(json.dumps(published))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the load test and print its table (``--child`` is the server side)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_load",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--speed", type=float, default=10.0,
                        help="job speed-up (research_demo: 74 virtual s → 7.4 s at 10)")
    parser.add_argument("--timeout", type=float, default=180.0, help="bound on the whole load")
    parser.add_argument("--quick", action="store_true", help="5 runs, 20 clients (a smoke run)")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument("--child", nargs=4, metavar=("STORE", "PORT_FILE", "TIMES", "RUNS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        store, port_file, times_file, max_runs = args.child
        child(store, port_file, times_file, int(max_runs))
        return
    if args.runs > 500 or args.clients > 2000:
        parser.error("bounded: at most 500 runs and 2000 clients")
    runs, clients = (5, 20) if args.quick else (args.runs, args.clients)
    started = time.perf_counter()
    done = run(runs, clients, speed=args.speed, timeout=args.timeout)
    results.show([done], Console(width=max(Console().width, 150)))
    if args.out:
        given = list(argv) if argv is not None else sys.argv[1:]
        command = " ".join(["python -m benchmarks.serve_load", *given])
        results.write(args.out, results.document([done], command=command,
                                                 seconds=time.perf_counter() - started))
        print(f"wrote {args.out}")
    if os.environ.get("FANOUT_BENCH_JSON"):
        print(json.dumps(done.to_json()))


if __name__ == "__main__":
    main()
