"""`fanout run`, `fanout resume` and `fanout tools`: jobs in real time, recorded in the store."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from rich.console import Console
from rich.live import Live
from rich.markup import escape

from coordinator.api.person import os_user
from coordinator.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    dump,
    load_all,
    open_store,
    outcome_exit,
    print_report,
    research_policy,
)
from coordinator.cli.person import TerminalPerson, reviewed, wall_now
from coordinator.engine.executor import LocalExecutor
from coordinator.engine.resume import Start
from coordinator.engine.run import Hooks, RunRequest
from coordinator.job import JobSpec
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.people import Desk
from coordinator.report import CoverageReport
from coordinator.store.runs import RunRecorder, RunStore
from coordinator.views.live import BoardLive, LiveBoard
from shared.clock import AnyioClock
from shared.tokens import load_encoding

if TYPE_CHECKING:
    from subagents.models.endpoints.preflight import EndpointProblem


def _live(
    job: JobSpec, args: argparse.Namespace, out: Console, err: Console, speed: float
) -> tuple[LiveBoard, Live | None, TerminalPerson | None]:
    board = LiveBoard(job, speed=speed)
    live = None if args.json else BoardLive(board, console=out, refresh_per_second=8)
    ask = bool(getattr(args, "ask", False))
    review = bool(getattr(args, "review", False))
    person = None
    if ask or review:
        # With --json stdout is the report's alone: the questions go to stderr.
        person = TerminalPerson(err if args.json else out, live, by=os_user(),
                                escalations=ask, plans=review,
                                on_timeout=job.escalation_wait().on_timeout)
    return board, live, person


def _execute(
    run: Callable[[Hooks], Awaitable[CoverageReport]],
    hooks: Hooks,
    live: Live | None,
    person: TerminalPerson | None,
    recorders: Sequence[RunRecorder],
    *,
    clock: AnyioClock,
    elapsed_offset: float = 0.0,
    start_live: bool = True,
    board: LiveBoard | None = None,
) -> CoverageReport:
    """Run the job with ``hooks`` (and, with a person, a desk they attend), the live
    board showing it (and what waits for the person); the report."""

    async def main() -> CoverageReport:
        if person is None:
            return await run(hooks)
        # The desk counts the run's seconds (a resumed run's from where it was).
        desk = Desk(clock, wall=wall_now, start=clock.now() - elapsed_offset)
        if board is not None:
            desk.listen(board.heard)
        async with anyio.create_task_group() as tg:
            tg.start_soon(person.attend, desk)
            report = await run(replace(hooks, desk=desk))
            tg.cancel_scope.cancel()
        return report

    load_encoding()  # load the encoding now, not on the job's clock
    if live is not None and start_live:
        live.start()
    try:
        return anyio.run(main, backend="asyncio")
    finally:
        if live is not None and live.is_started:
            live.stop()
        for recorder in recorders:
            recorder.close()


def _resume_hint(err: Console, run_ids: Sequence[str], store: RunStore) -> None:
    """On Ctrl-C: the run is kept in the store; say how to finish it (and, when its
    escalations wait for a person, how to be asked again: docs/design.md §17)."""
    for run_id in run_ids:
        waiting = store.waiting(run_id, resumed=True)
        if waiting:
            err.print(
                f"[yellow]interrupted:[/] run [bold]{run_id}[/] is kept, "
                f"{escape(', '.join(waiting))} waiting for a person; "
                f"`fanout resume {run_id} --ask` asks again and finishes it"
            )
        else:
            err.print(
                f"[yellow]interrupted:[/] run [bold]{run_id}[/] is kept; "
                f"`fanout resume {run_id}` finishes it"
            )


def _waited_note(err: Console, run_id: str, waited: Sequence[str], ask: bool) -> None:
    """Before a resumed run goes on: the escalations that waited for a person when it
    stopped, and what happens to them now.

    With ``--ask`` they are asked again (the same id and options). Without, nobody is
    asked: a resume must finish (a script's, a terminal's alike), so they are counted
    undecided, as a run without a person counts its escalations, and the report lists
    them under ``escalations``. That cannot be undone once the run has finished, so it is
    said before the run goes on, with the command that would ask: Ctrl-C now keeps the
    run (and its waits) for that one.
    """
    if not waited:
        return
    shown = escape(", ".join(waited))
    if ask:
        err.print(f"{shown} waited for a person when the run stopped: asked again")
    else:
        err.print(f"[yellow]warning:[/] {shown} waited for a person when the run stopped; "
                  "without --ask nobody is asked and the report lists it undecided "
                  f"(Ctrl-C keeps the run; `fanout resume {run_id} --ask` asks again)")


def refuse_directory(path: str, command: str, err: Console) -> bool:
    """Say so (and return True) when ``path`` is a folder where one job file is expected.

    ``fanout replay`` takes folders; ``run`` and ``tools`` run one job, so a folder is
    refused with its job files named rather than quietly running its first file.
    """
    folder = Path(path)
    if not folder.is_dir():
        return False
    from coordinator.replay import scenario_files

    names = [str(f) for f in scenario_files([path])]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    err.print(
        f"[bold red]error:[/] {escape(path)} is a directory: `fanout {command}` takes one job "
        "file" + (f", e.g. {escape(shown)}" if names else " (this one holds no .yaml files)")
    )
    return True


def check_model_endpoint(
    scenario: Scenario, args: argparse.Namespace, err: Console
) -> int | None:
    """The exit code of a run refused before it starts for its model endpoint, or None.

    An OpenAI-compatible endpoint that cannot be reached (after the model's retry policy)
    is one line naming its URL, exit 3, nothing run or recorded; a base URL that lacks its
    ``/v1`` is bad input (exit 2) naming the flag or field that gave it.
    """
    if scenario.model is None or scenario.model.provider != "openai":
        return None
    import os

    from subagents.models.endpoints.preflight import check_endpoint

    spec = scenario.model

    async def check() -> EndpointProblem | None:
        return await check_endpoint(spec, environ=os.environ, clock=AnyioClock())

    problem = anyio.run(check, backend="asyncio")
    if problem is None:
        return None
    if getattr(args, "base_url", None):
        where = "--base-url"
    elif spec.base_url:
        where = "model.base_url"
    else:
        where = "OPENAI_BASE_URL"
    err.print(f"[bold red]error:[/] {where}: {escape(problem.message)}")
    return EXIT_FAILED if problem.kind == "unreachable" else EXIT_BAD_INPUT


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run a job file in real time (simulated latencies scaled by --speed), recorded."""
    if getattr(args, "executor", "local") == "temporal":
        from coordinator.cli.temporal import cmd_run_temporal

        return cmd_run_temporal(args, out, err)
    if args.speed <= 0:
        err.print("[bold red]error:[/] --speed: expected a positive number")
        return EXIT_BAD_INPUT
    if refuse_directory(args.job, "run", err):
        return EXIT_BAD_INPUT
    scenarios = load_all([args.job], err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    scenario = scenarios[0]
    # --speed scales simulated time only: MCP and model calls keep their real timeouts.
    spec_text = Path(args.job).read_text(encoding="utf-8")
    return run_live(scenario, file=str(args.job), spec_text=spec_text, args=args, out=out, err=err)


def run_live(
    scenario: Scenario,
    *,
    file: str,
    spec_text: str,
    args: argparse.Namespace,
    out: Console,
    err: Console,
) -> int:
    """Run ``scenario`` in real time with the live display, recorded in the store.

    Shared by ``fanout run`` and ``fanout ask``: ``--speed``, ``--json``, ``--ask`` and
    ``--record`` come from ``args``.
    """
    if getattr(args, "review", False):
        scenario = reviewed(scenario, err)
    clock = AnyioClock(speed=args.speed)
    # The model client is made (its key read from the environment) before anything is
    # recorded: a missing key is exit 2 with nothing run and nothing stored.
    start = Start.fresh(scenario, clock)
    start.planning.open()
    refused = check_model_endpoint(scenario, args, err)
    if refused is not None:
        return refused
    store = open_store(args)
    recorded: list[str] = []
    board, live, person = _live(scenario.job, args, out, err, args.speed)

    def on_recorded(run_id: str) -> None:
        # MCP servers start (and research tools open, their folder indexed) before the
        # run is recorded: one that cannot is an error before any subagent runs, and
        # leaves no half-made run in the store.
        recorded.append(run_id)
        if not args.json:
            err.print(f"run [bold]{run_id}[/] recorded in {store.where}")
        if live is not None:
            live.start()

    request = RunRequest(
        scenario, spec_text, file, speed=args.speed,
        policy=research_policy(args),
    )
    hooks = Hooks(observer=board, on_plan=board.plan,
                  on_followups=board.follow_up, on_recorded=on_recorded)
    executor = LocalExecutor(store, start=start, clock=clock)
    try:
        report = _execute(
            lambda h: executor.execute(request, h), hooks, live, person, [], clock=clock,
            start_live=False, board=board,
        )
    except KeyboardInterrupt:
        _resume_hint(err, recorded, store)
        raise
    if getattr(args, "record", None) and recorded:
        from coordinator.engine.recording import refusal, write_recording

        reason = refusal(store, recorded[0])
        if reason is None:
            write_recording(store, recorded[0], args.record)
            err.print(f"wrote {args.record}: `fanout replay {args.record}` reproduces this run")
        else:
            # The run itself finished and its report is printed; only the recording is
            # not written (a warning, not a failed run).
            err.print(f"[bold yellow]not written:[/] {args.record}: {reason}")
    print_report(report, args, out)
    return outcome_exit(report)


def cmd_tools(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Start a job's MCP servers and list the tools each offers, with their schemas."""
    if refuse_directory(args.job, "tools", err):
        return EXIT_BAD_INPUT
    scenarios = load_all([args.job], err)
    if scenarios is None:
        return EXIT_BAD_INPUT
    scenario = scenarios[0]
    from coordinator.jobfile.mcp import list_job_tools, tools_view

    listings = anyio.run(list_job_tools, scenario, backend="asyncio")
    if args.json:
        document = {
            "job": scenario.scenario,
            "file": str(args.job),
            "servers": [listing.model_dump(mode="json") for listing in listings],
        }
        sys.stdout.write(dump(document) + "\n")
    elif not listings:
        simulated = ", ".join(scenario.tools) or "none"
        out.print(f"{escape(str(args.job))} declares no mcp_servers (simulated tools: {simulated})")
    else:
        out.print(tools_view(listings))
    return EXIT_OK


def cmd_resume(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Finish an interrupted run: committed subtasks are kept, in-flight ones continue.

    Simulated time runs at ``--speed``, or at the speed the run was started at. With
    ``--ask`` the person at this terminal attends the resumed run: an escalation that
    waited for a person when the run stopped is asked again (docs/design.md §17); see
    :func:`_waited_note` for a resume without it.
    """
    if args.speed is not None and args.speed <= 0:
        err.print("[bold red]error:[/] --speed: expected a positive number")
        return EXIT_BAD_INPUT
    store = open_store(args)
    row = store.get(args.run_id)
    from coordinator.cli.temporal import refuse_resume_on_temporal

    refuse_resume_on_temporal(store, row.id)
    recorder = store.claim_for_resume(row.id)
    speed = row.speed if args.speed is None else args.speed
    clock = AnyioClock(speed=speed)
    scenario = load_scenario_text(row.spec_text, row.file)
    start = Start.resumed_from(scenario, store, row.id, clock)
    kept = sum(r.finished for r in start.runs.values())
    if not args.json:
        err.print(
            f"resuming run [bold]{row.id}[/] at {start.elapsed_offset:.1f}s: {kept} of "
            f"{len(start.runs)} subtasks already finished"
        )
    waited = [w.escalation.id or w.escalation.subtask_id for w in (start.waited or {}).values()]
    _waited_note(err, row.id, waited, bool(args.ask))
    board, live, person = _live(start.scenario.job, args, out, err, speed)
    board.restored(start.runs.values())
    request = RunRequest(start.scenario, row.spec_text, row.file, speed=speed)
    hooks = Hooks(observer=board, on_followups=board.follow_up)
    executor = LocalExecutor(recorder=recorder, start=start, clock=clock)
    try:
        report = _execute(lambda h: executor.execute(request, h), hooks, live, person,
                          [recorder], clock=clock, elapsed_offset=start.elapsed_offset,
                          board=board)
    except KeyboardInterrupt:
        _resume_hint(err, [recorder.run_id], store)
        raise
    print_report(report, args, out)
    return outcome_exit(report)
