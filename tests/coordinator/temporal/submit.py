"""Submit job files to Temporal from a process of their own, and print what happened.

The tests keep Temporal clients out of pytest's own process: temporalio's native
threads can abort an interpreter while it finalizes (temporalio/sdk-python#300), so
each client lives in a short-lived process that leaves with ``os._exit``, as the CLI
does.

``python -m tests.coordinator.temporal.submit --address A --task-queue Q --store S
--speed X [--heartbeat-timeout S] [--wait] FILE...`` records and starts one run per
file, all at once, then prints one JSON line per file: ``file``, ``run_id``,
``workflow_id`` and, with ``--wait``, ``report``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from coordinator.engine import Hooks, RunRequest, TemporalExecutor, TemporalTarget
from coordinator.jobfile.loader import load_scenario
from coordinator.store.runs import RunStore
from coordinator.temporal import TemporalSettings, connect


async def _main(args: argparse.Namespace, texts: dict[str, str]) -> list[dict[str, Any]]:
    client = await connect(args.address)
    store = RunStore(Path(args.store))
    settings = TemporalSettings(heartbeat_timeout_s=args.heartbeat_timeout)
    executor = TemporalExecutor(store, TemporalTarget(args.address, task_queue=args.task_queue),
                                settings=settings, client=client)
    submitted: list[tuple[dict[str, Any], Any]] = []
    for file in args.files:
        scenario = load_scenario(file)
        request = RunRequest(scenario, texts[file], file, speed=args.speed)
        if scenario.people and args.wait:
            # A scripted person plays at the door: the run is followed by its executor.
            line: dict[str, Any] = {"file": file}

            def recorded(run_id: str, line: dict[str, Any] = line) -> None:
                line.update(run_id=run_id, workflow_id=f"fanout-{run_id}")

            hooks = Hooks(on_recorded=recorded)
            submitted.append((line, asyncio.ensure_future(executor.execute(request, hooks))))
            continue
        ref, handle = await executor.submit(request)
        submitted.append(
            ({"file": file, "run_id": ref.run_id, "workflow_id": ref.workflow_id},
             handle.result())
        )
    if not args.wait:
        for _, pending in submitted:
            pending.close()  # never awaited: the workers run the jobs
        return [line for line, _ in submitted]
    reports = await asyncio.gather(*(pending for _, pending in submitted))
    return [line | {"report": r.to_wire()} for (line, _), r in zip(submitted, reports, strict=True)]


def main() -> None:
    """Parse, submit, print, leave without finalizing."""
    parser = argparse.ArgumentParser(prog="python -m tests.coordinator.temporal.submit")
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--heartbeat-timeout", type=float, default=30.0)
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    code = 0
    try:
        texts = {f: Path(f).read_text(encoding="utf-8") for f in args.files}
        for line in asyncio.run(_main(args, texts)):
            sys.stdout.write(json.dumps(line) + "\n")
    except Exception as exc:  # reported to the test, which shows stderr
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
