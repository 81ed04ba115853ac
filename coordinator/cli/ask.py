"""`fanout ask "QUESTION"`: decompose, fan out and synthesize on real sources, live.

The tools are your documents (``--docs DIR``), the web (``--search``, or
``FANOUT_SEARCH``) and whatever a tools file declares; with none, nothing runs (exit 2,
saying how to give it some). The lead agent plans the subtasks, a model plans each one,
the lead writes the answer citing its sources ``[n]``; the run is recorded in the store
like any ``fanout run``. For people it ends with the answer, its sources, coverage and
gaps; ``--json`` prints the report instead. ``--executor temporal`` runs it on Temporal
workers, as ``fanout run --executor temporal`` does (same ``--address``,
``--namespace``, ``--task-queue``, ``--detach``).
"""

from __future__ import annotations

import argparse
import os

from rich.console import Console
from rich.markup import escape

from coordinator.cli.common import EXIT_BAD_INPUT
from coordinator.cli.run import run_live
from coordinator.jobfile.ask import build_ask_job
from subagents.models.spend import TokenBudget

NO_MODEL_HINT = (
    "no model: a retrieval-only answer, the best passages, each cited [n]",
    "for a model to plan and write the answer: --model PROVIDER:NAME",
)
"""What ``fanout ask`` without a model says on stderr before it runs."""


def cmd_ask(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run a question as a decomposed, model-planned job, recorded in the store."""
    for flag, value in (
        ("--max-subtasks", args.max_subtasks),
        ("--concurrency", args.concurrency),
        ("--max-tokens", 1 if args.max_tokens is None else args.max_tokens),
    ):
        if value < 1:
            err.print(f"[bold red]error:[/] {flag}: expected a positive integer")
            return EXIT_BAD_INPUT
    if args.speed <= 0:
        err.print("[bold red]error:[/] --speed: expected a positive number")
        return EXIT_BAD_INPUT
    budget = None
    if args.budget is not None:
        try:
            budget = TokenBudget.parse(args.budget)
        except ValueError as exc:
            err.print(f"[bold red]error:[/] --budget: {escape(str(exc))}")
            return EXIT_BAD_INPUT
    scenario, spec_text, file = build_ask_job(
        args.question,
        args.tools,
        model=args.model,
        base_url=args.base_url,
        max_subtasks=args.max_subtasks,
        concurrency=args.concurrency,
        deadline_s=args.deadline,
        budget=budget,
        docs=args.docs,
        search=args.search,
        env_search=os.environ.get("FANOUT_SEARCH") or None,
        max_tokens=args.max_tokens,
    )
    if scenario.job.answer == "extractive" and not args.json:
        # Each line within 78 columns: an 80-column terminal does not wrap it mid-word.
        for line in NO_MODEL_HINT:
            err.print(line, markup=False, highlight=False)
    if args.executor == "temporal":
        from coordinator.cli.temporal import check_temporal_options, run_temporal
        from coordinator.engine.run import RunRequest

        if not check_temporal_options(args, err):
            return EXIT_BAD_INPUT
        return run_temporal(RunRequest(scenario, spec_text, file, speed=args.speed), args, out, err)
    if args.docs:
        from coordinator.cli.index import index_before_ask

        # Said on a terminal only: piped, --json or not, stderr stays the run's own.
        index_before_ask(args.docs, args.store, err, show=not args.json and err.is_terminal)
    return run_live(scenario, file=file, spec_text=spec_text, args=args, out=out, err=err)
