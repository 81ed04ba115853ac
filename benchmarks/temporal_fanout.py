"""Benchmark: one 1,000-subtask fan-out locally and on Temporal with 1, 2 and 4 workers.

Every subtask makes one call to a simulated tool with 50 ms of latency; the job runs
at concurrency 100, and each worker takes up to 100 rounds at once. The contenders:

- **local**: ``run_job`` in this process (anyio on asyncio), no run store;
- **fanout on Temporal**: the same job as :class:`~coordinator.temporal.FanoutWorkflow`
  on W worker processes (no run store either, so both sides do the same work);
- **bare Temporal**: a workflow with the same 100 FIFO lanes over 1,000 *no-op*
  activities on the same workers, in the same run — Temporal's own cost per activity.

Reported: wall time and throughput of each, and fanout's overhead per subagent on top
of Temporal's own activity cost, two ways: in wall time, ``(fanout − bare − the 50 ms
latency floor) / N`` (the floor is ``ceil(N / 100) × 50 ms``, what the latency alone
costs at concurrency 100), and in the workers' CPU time per subagent, fanout's minus
bare's (read from ``/proc``). The dev server runs in memory, on the same 2 cores.

Run: ``.venv/bin/python -m benchmarks.temporal_fanout [--subtasks 1000] [--repeat 3]
[--workers 1 2 4] [--out FILE]``. Each worker is ``python -m benchmarks.temporal_fanout
--worker ...``: a fanout worker that also serves the bare workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow

# The bare workflow below is imported into Temporal's sandbox with this module.
with workflow.unsafe.imports_passed_through():
    from benchmarks import results
    from benchmarks.stats import BenchResult, Figure, Stats

KEY = "temporal_fanout"
LATENCY_S = 0.05
CONCURRENCY = 100
WORKER_SLOTS = 100
ROOT = Path(__file__).parent.parent  # no resolve(): the sandbox refuses it at import


@activity.defn(name="bench.noop")
async def noop(i: int) -> int:
    """The bare activity: nothing but Temporal's own round trip."""
    return i


@workflow.defn(name="bench.bare_fanout")
class BareFanout:
    """``n`` no-op activities through ``concurrency`` FIFO lanes, as fanout schedules."""

    @workflow.run
    async def run(self, n: int, concurrency: int) -> int:
        """Run them all; return how many ran."""
        queue = deque(range(n))
        done = 0

        async def lane() -> None:
            nonlocal done
            while queue:
                await workflow.execute_activity(
                    noop, queue.popleft(), start_to_close_timeout=timedelta(seconds=60)
                )
                done += 1

        await asyncio.gather(*(lane() for _ in range(min(concurrency, n))))
        return done


def scenario(n: int) -> Any:
    """The job: ``n`` subtasks, one 50 ms simulated call each, at concurrency 100."""
    from coordinator.job import JobSpec
    from coordinator.jobfile.scenario import Scenario
    from subagents.simulated.spec import SimToolSpec
    from subagents.spec import CallStep, SubtaskSpec

    tool = SimToolSpec.model_validate(
        {"params": {"i": {"type": "integer"}}, "latency_s": LATENCY_S,
         "responses": [{"ok": {"results": ["a result"]}}]}
    )
    job = JobSpec(
        query="benchmark fan-out on Temporal",
        concurrency=CONCURRENCY,
        subtasks=[
            SubtaskSpec(id=f"s{i}", query=f"item {i}", tools=["lookup"],
                        plan=[CallStep(call="lookup", args={"i": i})])
            for i in range(n)
        ],
    )
    return Scenario(scenario="temporal-bench", seed=1, job=job, tools={"lookup": tool})


def run_local(n: int, repeat: int) -> list[float]:
    """Wall seconds of ``run_job`` on the job, in this process, ``repeat`` times."""
    from benchmarks.stats import timed_in_loop
    from coordinator.fanout import run_job
    from shared.clock import AnyioClock
    from subagents.simulated.tools import SimulatedTools

    sc = scenario(n)

    async def once() -> None:
        clock = AnyioClock()
        report = await run_job(sc.job, SimulatedTools(sc.tools, clock), clock=clock, seed=1)
        assert report.outcome == "complete"

    timed_in_loop(once)  # warm-up: the token encoding, pydantic's validators
    return [timed_in_loop(once) for _ in range(repeat)]


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class WorkerProcesses:
    """``count`` benchmark worker processes on one task queue."""

    def __init__(self, address: str, task_queue: str, count: int) -> None:
        self.procs = []
        for _ in range(count):
            proc = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.temporal_fanout", "--worker",
                 "--address", address, "--task-queue", task_queue],
                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT, text=True,
            )
            self.procs.append(proc)
        for proc in self.procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                self.stop()
                raise RuntimeError("a benchmark worker did not start")

    def cpu_s(self) -> float:
        """The workers' CPU seconds so far, together."""
        return sum(_cpu_s(p.pid) for p in self.procs)

    def stop(self) -> None:
        """SIGTERM each worker and reap it."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(20)
            if proc.stdout is not None:
                proc.stdout.close()


async def measure_temporal(
    address: str, n: int, repeat: int, counts: Sequence[int]
) -> dict[int, dict[str, list[float]]]:
    """For each worker count: wall and worker-CPU seconds of bare and fanout runs."""
    from coordinator.temporal import JobInput, connect, start_job

    client = await connect(address)
    sc = scenario(n)
    out: dict[int, dict[str, list[float]]] = {}
    for count in counts:
        queue = f"bench-{count}"
        workers = WorkerProcesses(address, queue, count)
        try:
            async def bare(k: int, q: str = queue) -> None:
                done = await client.execute_workflow(
                    BareFanout.run, args=[k, CONCURRENCY], id=f"bare-{q}-{time.time_ns()}",
                    task_queue=q,
                )
                assert done == k

            async def fanout(k: int, q: str = queue) -> None:
                job = scenario(k) if k != n else sc
                inp = JobInput.of(job, run_id=f"{q}-{time.time_ns()}")
                report = await (await start_job(client, inp, task_queue=q)).result()
                assert report.outcome == "complete"

            await bare(50)  # warm-up: workflow caches, sandbox, connections
            await fanout(50)
            figures: dict[str, list[float]] = {k: [] for k in
                                               ("bare", "fanout", "bare_cpu", "fanout_cpu")}
            for _ in range(repeat):
                for name, body in (("bare", bare), ("fanout", fanout)):
                    cpu, started = workers.cpu_s(), time.perf_counter()
                    await body(n)
                    figures[name].append(time.perf_counter() - started)
                    figures[f"{name}_cpu"].append(workers.cpu_s() - cpu)
            out[count] = figures
        finally:
            workers.stop()
    return out


def run(n: int = 1_000, repeat: int = 3, counts: Sequence[int] = (1, 2, 4)) -> BenchResult:
    """Measure everything; the figures as a :class:`BenchResult`."""
    from coordinator.temporal.dev import free_port, start_dev_server

    result = BenchResult(
        KEY, "6 · Temporal",
        f"{n:,} subtasks × one {LATENCY_S * 1000:g} ms call, concurrency {CONCURRENCY}: "
        "local against Temporal workers",
        {"subtasks": n, "repeat": repeat, "workers": list(counts), "latency_s": LATENCY_S,
         "concurrency": CONCURRENCY, "worker_slots": WORKER_SLOTS},
    )
    local = run_local(n, repeat)
    floor = math.ceil(n / CONCURRENCY) * LATENCY_S
    result.figures += [
        Figure("local: wall time", "s", Stats.of(local), note=f"latency floor {floor:g} s"),
        Figure("local: throughput", "subagents/s", Stats.of([n / v for v in local])),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        server = start_dev_server(port=free_port(), db_file=None, log=Path(tmp) / "dev.log")
        try:
            measured = asyncio.run(measure_temporal(server.address, n, repeat, counts))
        finally:
            server.stop()
    for count, f in measured.items():
        tag = f"{count} worker{'s' if count > 1 else ''}"
        fan, bare = f["fanout"], f["bare"]
        result.figures += [
            Figure(f"{tag}: fanout wall time", "s", Stats.of(fan)),
            Figure(f"{tag}: fanout throughput", "subagents/s", Stats.of([n / v for v in fan])),
            Figure(f"{tag}: bare Temporal, no-op activities", "s", Stats.of(bare)),
            Figure(f"{tag}: fanout overhead / subagent (wall)", "ms", Stats.of(
                [(a - b - floor) * 1000 / n for a, b in zip(fan, bare, strict=True)]),
                note="(fanout − bare − latency floor) / N"),
            Figure(f"{tag}: worker CPU / subagent, fanout", "ms",
                   Stats.of([c * 1000 / n for c in f["fanout_cpu"]])),
            Figure(f"{tag}: worker CPU / activity, bare", "ms",
                   Stats.of([c * 1000 / n for c in f["bare_cpu"]])),
        ]
    return result


async def _serve(address: str, task_queue: str) -> None:
    # Run as ``-m``, this file is ``__main__``; the workflow must come from its real name.
    from benchmarks.temporal_fanout import BareFanout, noop
    from coordinator.temporal import connect, fanout_worker

    client = await connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with fanout_worker(client, task_queue=task_queue, concurrency=WORKER_SLOTS,
                             workflows=[BareFanout], activities=[noop]):
        print("ready", flush=True)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark (or, with ``--worker``, be one of its workers)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.temporal_fanout")
    parser.add_argument("--subtasks", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--out", type=Path, help="also write the results document here")
    parser.add_argument("--markdown", action="store_true", help="also print Markdown")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--task-queue", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        asyncio.run(_serve(args.address, args.task_queue))
    else:
        started = time.perf_counter()
        done = run(args.subtasks, args.repeat, args.workers)
        results.show([done])
        if args.markdown:
            print(results.markdown([done]))
        if args.out is not None:
            command = "python -m benchmarks.temporal_fanout " + " ".join(argv or sys.argv[1:])
            doc = results.document([done], command=command.strip(),
                                   seconds=time.perf_counter() - started)
            results.write(args.out, doc)
            print(f"wrote {args.out}")
    # temporalio's native threads can abort a finalizing interpreter
    # (temporalio/sdk-python#300): everything is printed, leave without finalizing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
