"""Research tools on Temporal (docs/design.md §10, §15): the workers open the job's documents and
give the report a local run gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from coordinator.jobfile.loader import load_scenario
from coordinator.temporal import WorkerResources
from coordinator.temporal.dev import DevServer
from coordinator.temporal.payloads import JobInput, ResearchSetup
from coordinator.temporal.resources import ResearchToolsUnavailable
from tests.coordinator.temporal.conftest import Workers, fanout, normalized

JOB = """\
scenario: research_on_temporal
seed: 5
research_tools:
  docs: {path: papers}
model:
  provider: scripted
  latency_s: 0.01
  turns:
    lead:
      - subtasks:
          - {id: tandem, query: "perovskite tandem efficiency", tools: [docs.search, docs.read]}
          - {id: sodium, query: "sodium-ion cell cost", tools: [docs.search]}
      - text: "Tandem cells reached 33.9 percent [1]; sodium-ion cells cost less [2]."
    tandem:
      - calls: [{tool: docs.read, args: {path: perovskite.md}}]
      - text: "33.9 percent in the lab (perovskite.md)."
    sodium:
      - calls: [{tool: docs.search, args: {query: sodium cost}}]
      - text: "Sodium-ion cells cost less (sodium.md)."
job:
  query: What do my papers say about new battery and solar cells?
"""


def _job(folder: Path) -> Path:
    """A job file in ``folder`` whose documents are ``folder/papers`` (a relative path)."""
    papers = folder / "papers"
    papers.mkdir(parents=True)
    (papers / "perovskite.md").write_text(
        "# Perovskite tandem cells\n\nPerovskite-silicon tandem cells reached 33.9 percent "
        "efficiency in the lab.\n", encoding="utf-8")
    (papers / "sodium.md").write_text(
        "# Sodium-ion\n\nSodium-ion cells cost less than lithium cells.\n", encoding="utf-8")
    job = folder / "job.yaml"
    job.write_text(JOB, encoding="utf-8")
    return job


def test_a_research_job_on_temporal_reports_what_it_reports_locally(
    dev_server: DevServer, workers: Workers, tmp_path: Path
) -> None:
    """`fanout run --executor temporal` of a job with research_tools: a worker in another
    folder reads the documents at the path the job resolved to, the lead plans from the
    docs tools, and the report (answer and sources included) equals the local run's."""
    job = _job(tmp_path / "job")
    worker_home = tmp_path / "worker"
    worker_home.mkdir()
    workers.start("research", cwd=worker_home)
    local = fanout("run", job, "--json", "--store", tmp_path / "local" / "runs.sqlite")
    assert local.returncode == 0, local.stderr
    remote = fanout("run", job, "--executor", "temporal", "--address", dev_server.address,
                    "--task-queue", "research", "--json",
                    "--store", tmp_path / "temporal" / "runs.sqlite", timeout=120)
    assert remote.returncode == 0, remote.stderr
    expected, report = json.loads(local.stdout), json.loads(remote.stdout)
    assert normalized(report) == normalized(expected)
    assert [(s["id"], s["status"]) for s in report["subtasks"]] == [
        ("tandem", "complete"), ("sodium", "complete")]
    assert {s["path"] for s in report["answer"]["sources"]} >= {"perovskite.md"}
    # The worker indexed the folder beside the run store it records to; never in it.
    assert list((tmp_path / "temporal" / "docs").glob("*.sqlite"))
    assert not [p for p in (job.parent / "papers").iterdir() if p.suffix != ".md"]


def test_an_ask_without_docs_reads_the_served_folder_on_temporal(
    dev_server: DevServer, workers: Workers, tmp_path: Path
) -> None:
    """`fanout serve --executor temporal --docs papers`: POST /ask with the question (and
    a tools text with its model) and no docs runs on the workers over the served folder,
    as an ask that named it would."""
    from tests.coordinator.serve.conftest import start_server

    job = _job(tmp_path / "job")
    model = {"model": yaml.safe_load(JOB)["model"]}
    worker_home = tmp_path / "worker"
    worker_home.mkdir()
    workers.start("research-ask", cwd=worker_home)
    srv = start_server(tmp_path, "--docs", str(job.parent / "papers"), "--executor",
                       "temporal", "--address", dev_server.address, "--task-queue",
                       "research-ask")
    try:
        with srv.client() as c:
            r = c.post("/ask", json={"question": "What do my papers say?",
                                     "tools": yaml.safe_dump(model)})
            assert r.status_code == 201, r.text
            run_id = r.json()["run_id"]
            srv.wait_status(run_id, "finished", timeout=120)
            report = c.get(f"/runs/{run_id}/report").json()
    finally:
        assert srv.stop() == 0, srv.log.read_text()
    assert [(s["id"], s["status"]) for s in report["subtasks"]] == [
        ("tandem", "complete"), ("sodium", "complete")]
    assert {s["path"] for s in report["answer"]["sources"]} >= {"perovskite.md"}


def test_workers_on_a_postgres_store_each_index_the_documents_themselves(
    dev_server: DevServer, workers: Workers, tmp_path: Path, postgres_cluster: Any
) -> None:
    """Two workers, each in a folder of its own, sharing only a Postgres store (machines
    that see the documents at one path): the run gives the local report, and each worker
    that opened the tools keeps its index in its own .fanout, none on the documents."""
    job = _job(tmp_path / "job")
    url = postgres_cluster.new_database()
    homes = [tmp_path / "w1", tmp_path / "w2"]
    for home in homes:
        home.mkdir()
        workers.start("research-pg", concurrency=1, store=url, cwd=home)
    local = fanout("run", job, "--json", "--store", tmp_path / "local" / "runs.sqlite")
    assert local.returncode == 0, local.stderr
    remote = fanout("run", job, "--executor", "temporal", "--address", dev_server.address,
                    "--task-queue", "research-pg", "--json", "--store", url, timeout=120)
    assert remote.returncode == 0, remote.stderr
    assert normalized(json.loads(remote.stdout)) == normalized(json.loads(local.stdout))
    indexed = [home for home in homes if list((home / ".fanout" / "docs").glob("*.sqlite"))]
    assert indexed  # whichever workers ran a round or the lead
    assert sorted(p.name for p in (job.parent / "papers").iterdir()) == [
        "perovskite.md", "sodium.md"]


def test_the_workers_are_sent_the_folder_as_the_job_resolved_it(tmp_path: Path) -> None:
    """The workflow's input names the documents by absolute path (a worker's working
    folder does not matter) and keeps the path as written for its messages."""
    job = _job(tmp_path)
    inp = JobInput.of(load_scenario(job), run_id="r")
    assert inp.research is not None
    assert inp.research.spec["docs"]["path"] == str((tmp_path / "papers").resolve())
    assert inp.research.docs_as_written == "papers"
    assert not inp.research.spec["docs"].get("allow_private")


@pytest.mark.anyio
async def test_a_worker_opens_a_jobs_research_tools_once_and_says_when_it_cannot(
    tmp_path: Path,
) -> None:
    """Rounds that need the same research tools share one open set, indexed once in the
    worker's own folder; a worker without the documents says which folder, not where
    the submitter keeps it."""
    job = _job(tmp_path / "job")
    setup = ResearchSetup.of(load_scenario(job))
    assert setup is not None
    async with WorkerResources() as resources:
        first = await resources.research.tools(setup, tmp_path / "home")
        second = await resources.research.tools(setup, tmp_path / "home")
        assert first is second and resources.research.started == 1
        assert set(first.tools) == {"docs.search", "docs.read"}
        missing = setup.model_copy(update={"spec": {"docs": {"path": str(tmp_path / "gone")}}})
        with pytest.raises(ResearchToolsUnavailable) as info:
            await resources.research.tools(missing, tmp_path / "home")
    message = str(info.value)
    assert "research_tools.docs.path 'papers'" in message and str(tmp_path) not in message
    assert resources.identity in message


def test_submitting_a_job_whose_documents_are_not_here_warns(tmp_path: Path) -> None:
    """The submitter says when the folder is missing on its own machine: the workers
    will look for it at that path too."""
    from io import StringIO

    from rich.console import Console

    from coordinator.cli.temporal import _warn_of_missing_docs

    job = _job(tmp_path)
    said = StringIO()
    _warn_of_missing_docs(load_scenario(job), Console(file=said, width=300))
    assert said.getvalue() == ""
    for document in (tmp_path / "papers").iterdir():
        document.unlink()
    (tmp_path / "papers").rmdir()
    _warn_of_missing_docs(load_scenario(job), Console(file=said, width=300))
    assert "research_tools.docs.path: no folder at" in said.getvalue()
    assert "every worker needs the documents there" in said.getvalue()
