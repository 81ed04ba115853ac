"""A person at a Temporal run's workflow, in a process of its own (as ``submit.py``).

``python -m tests.coordinator.temporal.person_door --address A COMMAND ...``:

- ``start FILE --task-queue Q --store S [--speed X] [--heartbeat-timeout S] [--review]``:
  record and start the run with a person attached (the workflow waits for them; with
  ``--review`` the lead's plan waits for review too); prints ``run_id``;
- ``review RUN_ID JSON``: once the lead's plan waits (query ``plan``), send the review
  (update ``review_plan``); prints ``{"review": ...}`` or, refused by the workflow's
  validator, ``{"refused": TYPE, "details": ...}``;
- ``decide RUN_ID SUBTASK DO [TEXT]``: once SUBTASK's escalation waits (query
  ``waiting``), decide it (signal ``decided``); prints the decision;
- ``result RUN_ID``: prints the run's report once the workflow ends.

Each asks again while nothing answers (a workflow whose worker was just killed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from coordinator.decision import DecisionRequest, decide
from coordinator.engine import RunRequest, TemporalExecutor, TemporalTarget
from coordinator.jobfile.loader import load_scenario
from coordinator.report import CoverageReport
from coordinator.store.runs import RunStore
from coordinator.temporal import TemporalSettings, connect
from coordinator.temporal.client import workflow_id
from shared.escalation import Escalation

TIMEOUT_S = 60.0


async def _until(ask: Any) -> Any:
    """``await ask()`` until it gives something other than None."""
    end = time.monotonic() + TIMEOUT_S
    while True:
        try:
            got = await ask()
        except (RPCError, WorkflowQueryFailedError):
            got = None
        if got is not None:
            return got
        if time.monotonic() > end:
            raise TimeoutError("the workflow never got there")
        await asyncio.sleep(0.2)


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    client = await connect(args.address)
    if args.command == "start":
        settings = TemporalSettings(heartbeat_timeout_s=args.heartbeat_timeout)
        executor = TemporalExecutor(
            RunStore(Path(args.store)), TemporalTarget(args.address, task_queue=args.task_queue),
            settings=settings, client=client)
        text = args.text_of_file
        scenario = load_scenario(args.file)
        if args.review:
            job = scenario.job.model_copy(update={"review_plan": True})
            scenario = scenario.model_copy(update={"job": job})
        ref, _ = await executor.submit(
            RunRequest(scenario, text, args.file, speed=args.speed), attended=True)
        return {"run_id": ref.run_id}
    handle = client.get_workflow_handle(workflow_id(args.run_id), result_type=CoverageReport)
    if args.command == "review":
        await _until(lambda: handle.query("plan"))
        try:
            made = await handle.execute_update(
                "review_plan", {"verdict": json.loads(args.verdict), "by": "tester"})
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            assert isinstance(cause, ApplicationError)
            return {"refused": cause.type, "details": list(cause.details)}
        return {"review": made}
    if args.command == "decide":

        async def waiting() -> Escalation | None:
            now = [Escalation.model_validate(w) for w in await handle.query("waiting")]
            return next((e for e in now if e.subtask_id == args.subtask), None)

        escalation = await _until(waiting)
        request = DecisionRequest(escalation=escalation.id or "", do=args.do, text=args.text)
        decision = decide(escalation, request, by="tester")
        await handle.signal("decided", decision)
        return {"decision": decision.model_dump(mode="json")}
    report = await handle.result()
    return {"report": report.to_wire()}


def main() -> None:
    """Parse, act, print one JSON line, leave without finalizing."""
    p = argparse.ArgumentParser(prog="python -m tests.coordinator.temporal.person_door")
    p.add_argument("--address", required=True)
    sub = p.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start")
    start.add_argument("file")
    start.add_argument("--task-queue", required=True)
    start.add_argument("--store", required=True)
    start.add_argument("--speed", type=float, default=1.0)
    start.add_argument("--heartbeat-timeout", type=float, default=30.0)
    start.add_argument("--review", action="store_true")
    review = sub.add_parser("review")
    review.add_argument("run_id")
    review.add_argument("verdict")
    decided = sub.add_parser("decide")
    decided.add_argument("run_id")
    decided.add_argument("subtask")
    decided.add_argument("do")
    decided.add_argument("text", nargs="?")
    result = sub.add_parser("result")
    result.add_argument("run_id")
    args = p.parse_args()
    if args.command == "start":
        args.text_of_file = Path(args.file).read_text(encoding="utf-8")
    code = 0
    try:
        sys.stdout.write(json.dumps(asyncio.run(_main(args))) + "\n")
    except Exception as exc:  # reported to the test, which shows stderr
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
