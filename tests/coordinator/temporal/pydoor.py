"""The Python door, in a process of its own: ``coordinator.ask`` or ``run_file``, one report.

``python -m tests.coordinator.temporal.pydoor ask|run_file ARG --store S [--executor
temporal --address A --task-queue Q [--namespace N]] [--choose] [--decide SUBTASK=DO[:TEXT] ...]
[--review JSON] [--cancel-on SUBTASK] [--speed X]`` runs one job
(``ARG``: the question, whose model block is read from ``--model-file``, or the job
file) and prints its report as JSON (with ``--cancel-on``, the stored partial one);
``--speed`` is ``run_file``'s (simulated latencies that many times faster); ``--review``
an ``on_plan`` returning that JSON (``"approve"``, ``"reject"`` or ``{"edit": ...}``), or
never returning for ``--review never`` (the plan waits until its timeout). A
process of its own, leaving with ``os._exit``: a Temporal client in pytest's own process
can abort it while it finalizes (temporalio/sdk-python#300), as ``submit.py`` says.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import yaml

import coordinator


async def _main(args: argparse.Namespace, model: Any) -> dict[str, Any]:
    temporal = None
    if args.executor == "temporal":
        temporal = {"address": args.address, "task_queue": args.task_queue}
        if args.namespace:
            temporal["namespace"] = args.namespace
    # --choose: a handler that picks each escalation's first alternative.
    choose: Any = (lambda e: e.alternatives[0] if e.alternatives else None) if args.choose else None
    if args.decide:
        # --decide SUBTASK=DO[:TEXT]: a person who decides DO for SUBTASK's escalations
        # and leaves every other one waiting (it is then decided by timeout).
        decisions = {}
        for item in args.decide:
            sid, _, do = item.partition("=")
            do, _, text = do.partition(":")
            decisions[sid] = {"do": do, **({"text": text} if text else {})}

        async def person(escalation: Any) -> Any:
            if escalation.subtask_id in decisions:
                return decisions[escalation.subtask_id]
            await anyio.sleep_forever()

        choose = person
    # --review JSON: an on_plan that reviews the lead's plan so (docs/design.md §17).
    review: Any = None
    if args.review == "never":

        async def review(subtasks: Any) -> Any:
            await anyio.sleep_forever()
    elif args.review is not None:
        verdict = json.loads(args.review)

        def review(subtasks: Any) -> Any:
            return verdict
    if args.door == "ask":
        report = await coordinator.ask(
            args.arg, model=model, store=args.store, executor=args.executor, temporal=temporal,
            on_escalation=choose,
        )
    elif args.cancel_on is None:
        report = await coordinator.run_file(
            args.arg, store=args.store, executor=args.executor, temporal=temporal,
            on_escalation=choose, on_plan=review, speed=args.speed,
        )
    else:
        # --cancel-on SUBTASK: cancel the run once SUBTASK calls its tool; print the
        # partial report the store keeps.
        async with anyio.create_task_group() as tg:

            def on_event(event: Any) -> None:
                if event.subtask_id == args.cancel_on and event.kind == "call":
                    tg.cancel_scope.cancel()

            tg.start_soon(lambda: coordinator.run_file(
                args.arg, store=args.store, executor=args.executor, temporal=temporal,
                on_event=on_event, speed=args.speed))
        from coordinator.store.runs import RunStore

        store = RunStore(args.store)
        stored: dict[str, Any] = store.get(store.runs()[0].id).report or {}
        return stored
    return report.to_wire()


def main() -> None:
    """Parse, run one job, print its report, leave at once."""
    p = argparse.ArgumentParser()
    p.add_argument("door", choices=("ask", "run_file"))
    p.add_argument("arg")
    p.add_argument("--store", required=True)
    p.add_argument("--model-file")
    p.add_argument("--executor", default="local")
    p.add_argument("--address")
    p.add_argument("--task-queue")
    p.add_argument("--namespace")
    p.add_argument("--choose", action="store_true")
    p.add_argument("--cancel-on")
    p.add_argument("--decide", action="append", default=[])
    p.add_argument("--review")
    p.add_argument("--speed", type=float, default=1.0)
    args = p.parse_args()
    model = None
    if args.model_file:
        with open(args.model_file, encoding="utf-8") as f:
            model = yaml.safe_load(f)["model"]
    report = anyio.run(_main, args, model, backend="asyncio")
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
