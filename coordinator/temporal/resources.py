"""What a worker opens once and lends to every round it runs: MCP servers, research tools,
model clients, run-store writers.

A worker runs many rounds of many jobs. Starting a job's MCP servers for each round
would cost a process start per subagent, so each distinct set of servers is started by
the first round that needs it and kept until the worker stops. Each set is held open by
a task of its own (an anyio task group cannot be entered in one task and left in
another), and rounds borrow its tools. Sets are not stopped when idle; and unlike
``fanout run``, nothing checks a job's ``SERVER.TOOL`` names against the running servers
before it starts: a name a server does not offer is refused when called (a
``validation`` envelope, ``unknown_tool``), as any undefined tool is.

A job's research tools (docs/design.md §10) are kept the same way, one set per distinct block
(:class:`ResearchToolSets`). The documents are read where the worker runs, and each
worker keeps its own index of them (:meth:`WorkerResources.index_home`). Why not the
Postgres store's full-text search? An operator with three worker machines and one
Postgres then has one thing to do: put the documents folder at the same path on each
machine (a shared read-only mount, or a copy synced there), as ``fanout run`` needs it
on its one machine. Each worker indexes it on first use, changed files only, into a
SQLite FTS5 file of its own — never on the shared mount, where SQLite's locks and WAL do
not hold — so the search ranks exactly as a local run's does (the same bm25, the same
passages: Temporal gives the local report), ``docs.read`` reads the file itself, and a
SQLite-store setup works unchanged. Documents in Postgres would spare the mount but
would rank by another engine (``ts_rank`` is not bm25), so the same job would answer
differently by store, and would copy every document into the database. A worker
without the folder fails that job's rounds (:class:`ResearchToolsUnavailable`) and
Temporal retries them, maybe on a worker that has it.

Model clients (docs/design.md §7) follow the same rule: :class:`ModelClients` makes one client
per distinct ``model`` block and closes them with the worker. How a model block becomes
a client, and a client a planner, is the models wing's business; this module holds the
seam (:data:`ClientFactory`, :data:`PlannerFactory`), whose defaults call that wing's
``build_client`` and ``ModelPlanner``, and a worker may be given others.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
import anyio.abc
import anyio.to_thread

from coordinator.store.backend import redact
from coordinator.store.runs import RunStore
from coordinator.store.writer import StoreWriter
from shared.clock import Clock
from shared.errors import FanoutError, InputFileError
from subagents.mcp.spec import McpServerSpec
from subagents.mcp.tools import McpToolSource, open_mcp_tools
from subagents.planners import Planner
from subagents.spec import SubtaskSpec

if TYPE_CHECKING:
    from coordinator.temporal.payloads import ResearchSetup
    from subagents.models.base import ModelClient
    from subagents.research.tools import ResearchTools

T = TypeVar("T")

ClientFactory = Callable[[Mapping[str, Any], Clock], "ModelClient"]
"""Builds the client a job's ``model`` block describes; the clock is the round's job
clock (only the scripted provider, which replays turns in job time, uses it)."""

PlannerFactory = Callable[[SubtaskSpec, Mapping[str, Any], "ModelClient", "int | str"], Planner]
"""Builds the model-driven planner of a subtask: spec, model block, client, job seed."""


class ModelPlanningUnavailable(FanoutError):
    """A subtask is to be planned by the job's model, and the job sent no model block."""

    def __init__(self, subtask_id: str) -> None:
        super().__init__(f"subtask {subtask_id!r} is model-planned but the job has no model")


class ResearchToolsUnavailable(FanoutError):
    """A job's research tools cannot open on this worker: its documents folder is not at
    the path the job was submitted with, or a search key is not in its environment."""

    def __init__(self, worker: str, setup: ResearchSetup, error: InputFileError) -> None:
        if error.field == "docs.path":
            what = (f"the documents folder of research_tools.docs.path "
                    f"{setup.docs_as_written!r} is not on this worker at the path the job "
                    "was submitted with; every worker needs it there (a shared mount or a "
                    "synced copy)")
        else:
            what = f"research_tools.{error.field}: expected {error.expected}, got {error.got}"
        super().__init__(f"worker {worker}: {what}")


def _build_client(block: Mapping[str, Any], clock: Clock) -> ModelClient:
    # Imported on first use: a worker that never sees a model block never loads the SDKs.
    from subagents.models.factory import build_client
    from subagents.models.spec import ModelSpec

    return build_client(ModelSpec.model_validate(dict(block)), clock=clock)


def _model_planner(
    spec: SubtaskSpec, block: Mapping[str, Any], client: ModelClient, seed: int | str
) -> Planner:
    from subagents.models.spec import ModelSpec
    from subagents.planners.model import ModelPlanner

    return ModelPlanner(client, ModelSpec.model_validate(dict(block)), spec.id, seed=seed)


class ModelClients:
    """One model client per distinct ``model`` block, made on first use, closed at the end.

    The scripted provider is the exception: it replays one job's turns on that job's
    clock, holds no connection, and so is made for each round instead of shared.
    """

    def __init__(self, factory: ClientFactory | None = None) -> None:
        self._factory = factory or _build_client
        self._clients: dict[str, ModelClient] = {}

    def client(self, block: Mapping[str, Any], clock: Clock) -> ModelClient:
        """The worker's client for ``block`` (a fresh one for a scripted model)."""
        if block.get("provider") == "scripted":
            return self._factory(block, clock)
        key = json.dumps(block, sort_keys=True)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self._factory(block, clock)
        return client

    async def aclose(self) -> None:
        """Close every client made."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()


@dataclass
class _Held(Generic[T]):
    """One thing kept open: opened by a holder task, shared until the worker stops."""

    ready: anyio.Event = field(default_factory=anyio.Event)
    value: T | None = None
    error: Exception | None = None


class _Kept(Generic[T]):
    """What an async context manager opens, once per distinct key, each held open by a
    task of its own until :meth:`close`."""

    def __init__(self, tg: anyio.abc.TaskGroup) -> None:
        self._tg = tg
        self._held: dict[str, _Held[T]] = {}
        self._closing = anyio.Event()
        self.started = 0
        """How many this worker opened (for tests and logs)."""

    async def _get(self, key: str, opener: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        """The thing kept under ``key``, opened now if nothing opened it before.

        Raises:
            Exception: whatever opening it raised (a later call tries again).
        """
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _Held()
            self._tg.start_soon(self._hold, held, opener)
        await held.ready.wait()
        if held.error is not None:
            if self._held.get(key) is held:
                del self._held[key]
            raise held.error
        assert held.value is not None
        return held.value

    async def _hold(
        self, held: _Held[T], opener: Callable[[], AbstractAsyncContextManager[T]]
    ) -> None:
        try:
            async with opener() as value:
                self.started += 1
                held.value = value
                held.ready.set()
                await self._closing.wait()
        except Exception as exc:  # what cannot open fails the rounds that need it
            held.error = exc
        finally:
            held.ready.set()

    def close(self) -> None:
        """Close everything kept (their holder tasks leave their contexts)."""
        self._closing.set()


class McpServers(_Kept[McpToolSource]):
    """Every distinct set of MCP servers the worker's jobs declare, each started once."""

    async def source(
        self, servers: Mapping[str, Mapping[str, Any]], base_dir: str | None
    ) -> McpToolSource:
        """The running servers' tools, started now if no round started them before.

        Raises:
            McpServerStartError: a server cannot start (a later round tries again).
        """
        key = json.dumps({"servers": servers, "base_dir": base_dir}, sort_keys=True)
        specs = {name: McpServerSpec.model_validate(dict(s)) for name, s in servers.items()}
        return await self._get(key, lambda: open_mcp_tools(specs, base_dir=base_dir))


class ResearchToolSets(_Kept["ResearchTools"]):
    """Every distinct set of research tools the worker's jobs declare, each opened once
    (its folder indexed first when the worker's index of it is missing or stale)."""

    def __init__(self, tg: anyio.abc.TaskGroup, worker: str) -> None:
        super().__init__(tg)
        self._worker = worker

    async def tools(self, setup: ResearchSetup, index_home: Path) -> ResearchTools:
        """The job's research tools on this worker.

        Raises:
            ResearchToolsUnavailable: the folder is not here, or a key is unset.
        """
        # Imported on first use: httpx, trafilatura and pypdf load only for such jobs.
        from subagents.research.spec import ResearchToolsSpec
        from subagents.research.tools import open_research_tools

        spec = ResearchToolsSpec.model_validate(setup.spec)
        key = json.dumps({"setup": setup.model_dump(mode="json"), "home": str(index_home)},
                         sort_keys=True)
        try:
            return await self._get(key, lambda: open_research_tools(
                spec, store_dir=index_home, guard_search=setup.guard_search))
        except InputFileError as exc:
            raise ResearchToolsUnavailable(self._worker, setup, exc) from exc


class WorkerResources:
    """What one worker process opens once: MCP servers, model clients, store writers.

    Use it as an async context manager around the Temporal worker; everything it
    opened is closed on the way out.
    """

    def __init__(
        self,
        *,
        client_factory: ClientFactory | None = None,
        planner_factory: PlannerFactory | None = None,
        store: str | None = None,
    ) -> None:
        self.models = ModelClients(client_factory)
        # The worker's own --store: its URL may carry the password a workflow's may not.
        self._own_store = store
        self._planner_factory = planner_factory or _model_planner
        self.identity = f"{os.getpid()}@{socket.gethostname()}"
        """This worker as Temporal names it (``pid@host``); the trace's ``worker`` field."""
        self._writers: dict[str, StoreWriter] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._mcp: McpServers | None = None
        self._research: ResearchToolSets | None = None

    async def __aenter__(self) -> WorkerResources:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._mcp = McpServers(tg)
        self._research = ResearchToolSets(tg, self.identity)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._tg is not None and self._mcp is not None and self._research is not None
        self._mcp.close()
        self._research.close()
        try:
            # The body's own exception is not handed to the task group: it would come
            # out wrapped in an ExceptionGroup. The holders end on their own once closed.
            await self._tg.__aexit__(None, None, None)
        finally:
            self._tg = None
            await self.models.aclose()
            writers, self._writers = list(self._writers.values()), {}
            for writer in writers:
                await anyio.to_thread.run_sync(writer.close)

    @property
    def mcp(self) -> McpServers:
        """The worker's MCP server sets."""
        if self._mcp is None:
            raise RuntimeError("WorkerResources is used outside its `async with`")
        return self._mcp

    @property
    def research(self) -> ResearchToolSets:
        """The worker's research tool sets."""
        if self._research is None:
            raise RuntimeError("WorkerResources is used outside its `async with`")
        return self._research

    def index_home(self, store: str | None) -> Path:
        """Where this worker keeps its document indexes: beside the run store's SQLite
        file, or ``.fanout`` in its working folder for a database server (an index is
        per machine, docs/design.md §10)."""
        return self.writer(store).backend.home() if store else Path(".fanout")

    def writer(self, store: str) -> StoreWriter:
        """The worker's writer for the run store ``store`` names (one per store).

        ``store`` is what the workflow carries: a path, or a URL without its password.
        When it names the worker's own ``--store``, that (with its credentials) is used.
        """
        writer = self._writers.get(store)
        if writer is None:
            target = store
            if self._own_store is not None and redact(self._own_store) == store:
                target = self._own_store
            writer = self._writers[store] = StoreWriter(RunStore(target).backend)
        return writer

    def model_client(
        self, spec: SubtaskSpec, model: Mapping[str, Any] | None, clock: Clock
    ) -> ModelClient | None:
        """The client a model-planned subtask plans with; None for a scripted plan.

        Raises:
            ModelPlanningUnavailable: the subtask is model-planned and the job has no model.
        """
        if spec.planner != "model":
            return None
        if model is None:
            raise ModelPlanningUnavailable(spec.id)
        return self.models.client(model, clock)

    def planner(
        self,
        spec: SubtaskSpec,
        model: Mapping[str, Any] | None,
        client: ModelClient | None,
        *,
        seed: int | str,
    ) -> Planner | None:
        """The subtask's planner: None for its scripted plan, else a model-driven one."""
        if client is None or model is None:
            return None
        return self._planner_factory(spec, model, client, seed)
