"""`fanout temporal dev`, `fanout worker`, and `--executor temporal` of `fanout run` and
`fanout ask` (docs/design.md §9, §15): the run goes to the engine's TemporalExecutor.

Their options are in :mod:`coordinator.cli.parser`, built without importing the Temporal
SDK (it is the optional ``fanout[temporal]`` extra, and every other command would pay for
loading it); the handlers import :mod:`coordinator.temporal` when they run.

Who records what: ``fanout run --executor temporal`` registers the run in the store
and starts the workflow; the workers record everything after that — each subagent
round's trace events, checkpoints and result as it runs, and the report at the end
(the workflow's last activity). So a detached run is in the store, finished, whether
or not anyone waits for it, and ``fanout report RUN_ID`` shows it once it is done.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from rich.console import Console
from rich.live import Live
from rich.markup import escape

from coordinator.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    check_store,
    dump,
    load_all,
    open_store,
    outcome_exit,
    print_report,
    research_policy,
)
from coordinator.cli.person import TerminalPerson, reviewed, wall_now
from coordinator.engine.run import Hooks, RunRequest
from coordinator.people import Desk
from coordinator.store.runs import ResumeRefused, RunStore
from shared.clock import AnyioClock

if TYPE_CHECKING:
    from coordinator.engine.executor import TemporalExecutor
    from coordinator.jobfile.scenario import Scenario
    from coordinator.report import CoverageReport
    from coordinator.temporal import JobHandle

EXIT_UNREACHABLE = 2


def cmd_temporal_dev(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run the Temporal dev server in the foreground until Ctrl-C."""
    from coordinator.temporal.dev import (
        LOOPBACK,
        DevServerFailed,
        TemporalUnavailable,
        start_dev_server,
    )

    db = Path(args.db_file)
    try:
        server = start_dev_server(port=args.port, db_file=db)
    except (TemporalUnavailable, DevServerFailed) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    out.print(f"Temporal dev server on [bold]{server.address}[/] (history in {db})")
    out.print(f"  workers: fanout worker --address {server.address}")
    out.print(f"  jobs:    fanout run JOB.yaml --executor temporal --address {server.address}")
    out.print(f"  bound to {LOOPBACK} only; Ctrl-C stops it")
    sys.stdout.flush()  # the address is what a log or a script waits for

    def stop(signum: int, frame: object) -> None:
        raise _Stopped

    # The server runs in a session of its own: a signal meant for this command reaches
    # it only through stop(), so SIGTERM and SIGINT (even one a shell set to ignore for
    # a background job) both end it, and no server outlives this command.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    try:
        code = server.process.wait()
    except _Stopped:
        return EXIT_OK
    finally:
        server.stop()
    err.print(f"[bold red]the dev server exited[/] (code {code})")
    return EXIT_BAD_INPUT


class _Stopped(Exception):
    """SIGINT or SIGTERM reached ``fanout temporal dev``."""


def cmd_worker(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run a worker until SIGINT or SIGTERM (rounds under way get a few seconds to end)."""
    from coordinator.temporal.worker import serve_worker

    if args.concurrency < 1:
        err.print("[bold red]error:[/] --concurrency: expected a positive number")
        return EXIT_BAD_INPUT
    own_store = args.store or os.environ.get("FANOUT_STORE") or None
    if own_store is not None:
        check_store(own_store)  # an unusable store is exit 2 now, not at the first round

    async def main() -> None:
        ready = asyncio.Event()

        async def announce() -> None:
            await ready.wait()
            err.print(
                f"worker on task queue [bold]{escape(args.task_queue)}[/] at {args.address} "
                f"(namespace {escape(args.namespace)}), up to {args.concurrency} rounds at "
                "once; Ctrl-C stops it"
            )

        told = asyncio.create_task(announce())
        try:
            await serve_worker(args.address, namespace=args.namespace,
                               task_queue=args.task_queue, concurrency=args.concurrency,
                               ready=ready, store=own_store)
        finally:
            told.cancel()

    try:
        asyncio.run(main())
    except RuntimeError as exc:  # temporalio's "failed client connect"
        err.print(f"[bold red]error:[/] {_unreachable(args.address, exc)}")
        return _finish(EXIT_UNREACHABLE)
    return _finish(EXIT_OK)


def _finish(code: int) -> int:
    """Leave at once when this process is the ``fanout`` command itself.

    temporalio's Rust threads can abort the interpreter while it finalizes ("Fatal
    Python error: PyGILState_Release", temporalio/sdk-python#300), or hold it for
    seconds; a command that used a client has nothing left to clean up but its output,
    so it flushes that and skips finalization. Called in-process (tests), it returns.
    """
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", "") or ""
    if Path(sys.argv[0]).name == "fanout" or name.startswith("coordinator.cli"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _unreachable(address: str, exc: Exception) -> str:
    return (
        f"cannot reach Temporal at {escape(address)} ({escape(str(exc))}); start a dev "
        "server with `fanout temporal dev` or pass --address"
    )


def _warn_of_missing_docs(scenario: Scenario, err: Console) -> None:
    """Say so when the job's documents folder is not on this machine: the workers read it
    at the path it resolves to here (coordinator.temporal.resources says why)."""
    spec = scenario.research_tools
    if spec is None or spec.docs is None:
        return
    from subagents.research.spec import resolve_docs_folder

    base = Path(scenario.source).parent if scenario.source else None
    folder = resolve_docs_folder(spec.docs.path, base)
    if not folder.is_dir():
        err.print(f"[yellow]warning:[/] research_tools.docs.path: no folder at "
                  f"{escape(str(folder))} on this machine; every worker needs the documents "
                  "there")


def check_temporal_options(args: argparse.Namespace, err: Console) -> bool:
    """Say what is wrong (and return False) with the options of a run on Temporal."""
    if args.speed <= 0 or args.heartbeat_timeout <= 0:
        which = "--speed" if args.speed <= 0 else "--heartbeat-timeout"
        err.print(f"[bold red]error:[/] {which}: expected a positive number")
        return False
    for flag in ("ask", "review"):
        if getattr(args, flag, False) and args.detach:
            err.print(f"[bold red]error:[/] --{flag} needs a person at this terminal, and "
                      "--detach leaves none; drop one of them")
            return False
    return True


def refuse_on_temporal(scenario: Scenario, err: Console) -> bool:
    """Say so (and return True) when the job cannot run on Temporal workers yet."""
    from coordinator.engine.executor import not_on_temporal

    reason = not_on_temporal(RunRequest(scenario, "", ""))
    if reason is not None:
        err.print(f"[bold red]error:[/] {escape(reason)}")
        return True
    return False


def cmd_run_temporal(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Submit a job to Temporal, recorded in the store; wait for its report unless detached."""
    if not check_temporal_options(args, err):
        return EXIT_BAD_INPUT
    scenarios = load_all([args.job], err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    spec_text = Path(args.job).read_text(encoding="utf-8")
    request = RunRequest(scenarios[0], spec_text, str(args.job), speed=args.speed,
                         policy=research_policy(args))
    return run_temporal(request, args, out, err)


def run_temporal(request: RunRequest, args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run ``request`` on Temporal (``fanout run`` and ``fanout ask``): ``--address``,
    ``--namespace``, ``--task-queue``, ``--detach`` and ``--heartbeat-timeout`` come
    from ``args``."""
    if refuse_on_temporal(request.scenario, err):
        return EXIT_BAD_INPUT
    if getattr(args, "review", False):
        request = replace(request, scenario=reviewed(request.scenario, err))
    _warn_of_missing_docs(request.scenario, err)
    store = open_store(args)
    try:
        code = anyio.run(_submit, request, store, args, out, err, backend="asyncio")
    except KeyboardInterrupt:
        err.print("[yellow]stopped waiting[/]: the run goes on on Temporal; "
                  "`fanout report latest` shows it once it finishes")
        code = 130
    return _finish(code)


async def _submit(
    request: RunRequest, store: RunStore, args: argparse.Namespace, out: Console, err: Console
) -> int:
    from coordinator.engine.executor import TemporalExecutor, TemporalTarget
    from coordinator.temporal import TemporalSettings

    target = TemporalTarget(args.address, args.namespace, args.task_queue)
    settings = TemporalSettings(heartbeat_timeout_s=args.heartbeat_timeout)
    executor = TemporalExecutor(store, target, settings=settings)
    try:
        await executor.connect()
    except RuntimeError as exc:
        err.print(f"[bold red]error:[/] {_unreachable(args.address, exc)}")
        return EXIT_UNREACHABLE
    asks = bool(getattr(args, "ask", False) or getattr(args, "review", False))
    # With --ask or --review the run waits for the person at this terminal (attended):
    # the workflow holds each escalation (and the plan) until they decide.
    ref, handle = await executor.submit(request, attended=asks)
    run_id = ref.run_id
    ids = {"run_id": run_id, "workflow_id": ref.workflow_id, "address": ref.address,
           "namespace": ref.namespace, "task_queue": ref.task_queue}
    if args.detach:
        if args.json:
            sys.stdout.write(dump(ids) + "\n")
        else:
            out.print(f"run [bold]{run_id}[/] submitted as workflow [bold]{ref.workflow_id}[/] "
                      f"on {ref.address} (task queue {escape(ref.task_queue)})")
            out.print(f"`fanout report {run_id}` shows it once it finishes")
        return EXIT_OK
    if not args.json:
        err.print(f"run [bold]{run_id}[/] recorded in {store.where}; workflow "
                  f"{ref.workflow_id} on {ref.address}")
    report = await _follow(executor, run_id, handle, request.scenario, args, out, err)
    print_report(report, args, out)
    return outcome_exit(report)


async def _follow(
    executor: TemporalExecutor,
    run_id: str,
    handle: JobHandle,
    scenario: Scenario,
    args: argparse.Namespace,
    out: Console,
    err: Console,
) -> CoverageReport:
    """Wait for the report; meanwhile show the trace the workers record, live, and (with
    ``--ask``/``--review``) ask the person at this terminal as each escalation, or the
    lead's plan, comes to wait in the workflow (docs/design.md §17)."""
    from coordinator.views.live import BoardLive, LiveBoard

    board = LiveBoard(scenario.job, speed=args.speed)
    said: list[str] = []

    def say(hint: str | None) -> None:
        if not args.json:
            board.notice = hint  # shown under the table until a worker turns up
        elif hint is not None and not said:
            said.append(hint)
            err.print(f"[yellow]waiting:[/] {hint}")

    live = None if args.json else BoardLive(board, console=out, refresh_per_second=8)
    person = _person(scenario, args, out, err, live)
    hooks = (Hooks(on_notice=say) if live is None else
             Hooks(observer=board, on_plan=board.plan, on_followups=board.follow_up,
                   on_notice=say))

    async def follow() -> CoverageReport:
        if person is None:
            return await executor.follow(run_id, handle, hooks)
        # The person answers at a desk here; the executor mirrors the workflow's waits
        # on it and carries each answer back, while the board goes on.
        desk = Desk(AnyioClock(speed=args.speed), wall=wall_now)
        if live is not None:
            desk.listen(board.heard)
        async with anyio.create_task_group() as tg:
            tg.start_soon(person.attend, desk)
            report = await executor.follow(run_id, handle, replace(hooks, desk=desk))
            tg.cancel_scope.cancel()
        return report

    if live is None:
        return await follow()
    with live:
        return await follow()


def _person(
    scenario: Scenario, args: argparse.Namespace, out: Console, err: Console, live: Live | None
) -> TerminalPerson | None:
    """The person at this terminal (``--ask``, ``--review``), as a local run has them."""
    ask, review = bool(getattr(args, "ask", False)), bool(getattr(args, "review", False))
    if not (ask or review):
        return None
    from coordinator.api.person import os_user

    # With --json stdout is the report's alone: the questions go to stderr.
    return TerminalPerson(err if args.json else out, live, by=os_user(), escalations=ask,
                          plans=review, on_timeout=scenario.job.escalation_wait().on_timeout)


def refuse_resume_on_temporal(store: RunStore, run_id: str) -> None:
    """``fanout resume`` of a Temporal run: Temporal resumes it; running it here would fork it.

    Raises:
        ResumeRefused: the run belongs to a workflow.
    """
    try:
        from coordinator.temporal.records import temporal_run
    except ImportError:  # without the temporal extra no run here was submitted from here
        return
    ref = temporal_run(store, run_id)
    if ref is not None:
        raise ResumeRefused(
            f"run {run_id} runs on Temporal as workflow {ref.workflow_id} ({ref.address}, "
            f"task queue {ref.task_queue}): start a worker (`fanout worker --address "
            f"{ref.address} --task-queue {ref.task_queue}`) and Temporal continues it"
        )
