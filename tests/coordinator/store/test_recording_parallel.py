"""A run whose model turns ran calls together records, and its recording replays it."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from coordinator import run_file
from coordinator.engine.recording import recording
from coordinator.jobfile.loader import load_scenario_text
from coordinator.replay import replay
from coordinator.store.runs import RunStore
from shared.clock import run_in_virtual_time

JOB = """\
scenario: parallel-retries
seed: 4
model:
  provider: scripted
  latency_s: 0.5
  turns:
    s:
      - calls:
          - {tool: search, args: {query: a}}
          - {tool: search, args: {query: b}}
          - {tool: search, args: {query: c}}
      - text: "A, B and C (search)."
job:
  query: "three searches at once"
  defaults:
    retry: {max_attempts: 3, initial_backoff_s: 0.5, jitter: full}
  subtasks:
    - {id: s, query: "three searches", tools: [search]}
tools:
  search:
    params: {query: {type: string}}
    latency_s: 1
    responses:
      - error: rate_limited
      - ok: {results: [A]}
      - error: unavailable
      - ok: {results: [B]}
      - ok: {results: [C]}
"""


def test_a_recorded_run_with_calls_together_and_their_retries_replays(tmp_path: Path) -> None:
    """Calls of one turn that retried at different times: the recording gives each call
    the responses it had (in the order the attempts started), so the replay agrees."""
    job = tmp_path / "parallel.yaml"
    job.write_text(JOB)
    live = run_in_virtual_time(functools.partial(run_file, job, store=tmp_path / "runs.sqlite"))
    store = RunStore(tmp_path / "runs.sqlite")
    [row] = store.runs()
    written = recording(store, row.id)
    again = replay(load_scenario_text(yaml.safe_dump(written, sort_keys=False), "rec.yaml"))
    assert again.passed, again.mismatches
    replayed = again.report["answer"]["sections"][0]["findings"]
    assert [f["data"] for f in replayed] == [
        f.model_dump(mode="json")["data"] for f in live.answer.sections[0].findings
    ]
