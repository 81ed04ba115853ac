"""``fanout serve``'s application on uvicorn in this process (a thread with its own event
loop): a test reaches the service over loopback and a run's desk through the loop's
portal, as the flow will (the desk's methods run on the run's loop)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn
import yaml
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi import FastAPI

from coordinator.people import Desk
from coordinator.serve.app import create_app
from coordinator.serve.manager import RunManager
from coordinator.serve.server import ServeConfig, bind_socket
from shared.escalation import Escalation
from tests.coordinator.serve.conftest import HELD, SLOW, TOKEN

T = TypeVar("T")

DECIDER = "alice"


def held_job(**job_fields: Any) -> dict[str, Any]:
    """SLOW's job (four subtasks of one 20-virtual-second call each) with ``job_fields``
    added: run at :data:`HELD` it works until the test cancels it."""
    doc: dict[str, Any] = copy.deepcopy(yaml.safe_load(SLOW.read_text()))
    doc["job"].update(job_fields)
    return doc


def denied(subtask_id: str = "first") -> Escalation:
    """A permission escalation of ``subtask_id`` whose alternatives name a tool and a query."""
    return Escalation.model_validate({
        "subtask_id": subtask_id, "errorCategory": "permission", "trigger": "permission_denied",
        "message": "patents.search: role analyst lacks patents:read",
        "attempted_query": "sodium-ion patents 2025", "tool": "patents",
        "alternatives": ["request patents:read for role analyst",
                         "try slow, also on this subtask's allowlist",
                         'rephrase the query as "sodium-ion filings"'],
    })


@dataclass
class Local:
    """The service in this process: its URL, its loop's portal, its run manager."""

    url: str
    portal: BlockingPortal
    app: FastAPI
    clients: list[httpx.Client] = field(default_factory=list)
    waits: list[Any] = field(default_factory=list)

    @property
    def manager(self) -> RunManager:
        """The app's run manager (the registry of live runs and their desks)."""
        manager: RunManager = self.app.state.manager
        return manager

    def client(self, token: str | None = TOKEN) -> httpx.Client:
        """An httpx client with the token (or none)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        c = httpx.Client(base_url=self.url, headers=headers, timeout=30)
        self.clients.append(c)
        return c

    def submit(self, job: dict[str, Any], speed: float = HELD) -> str:
        """POST a job (JSON); the run's id."""
        r = self.client().post("/runs", params={"speed": speed}, json=job)
        assert r.status_code == 201, r.text
        run_id: str = r.json()["run_id"]
        return run_id

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the service's loop."""
        return self.portal.call(fn, *args)

    def desk(self, run_id: str, timeout: float = 30) -> Desk:
        """The run's desk, once the run executes (polled, as ``wait_status`` polls)."""
        end = time.monotonic() + timeout
        while True:
            desk = self.call(self._desk_now, run_id)
            if desk is not None:
                return desk
            assert time.monotonic() < end, f"run {run_id} got no desk"
            time.sleep(0.02)

    def _desk_now(self, run_id: str) -> Desk | None:
        live = self.manager.live.get(run_id)
        return None if live is None else live.desk

    def escalate(self, run_id: str, escalation: Escalation, allowlist: list[str],
                 timeout_s: float | None = None) -> tuple[Escalation, Any]:
        """Offer ``escalation`` on the run's desk and wait for it there, as the flow will:
        the offered escalation, and the future of the wait's decision."""
        desk = self.desk(run_id)
        offered = self.call(desk.offer, escalation, allowlist)

        async def wait() -> Any:
            return await desk.wait(offered, timeout_s=timeout_s)

        future = self.portal.start_task_soon(wait)
        self.waits.append(future)
        return offered, future

    def start(self, fn: Callable[[], Any]) -> Any:
        """Start the coroutine function ``fn`` on the service's loop; its future (cancelled
        when the service stops, if still running)."""
        future = self.portal.start_task_soon(fn)
        self.waits.append(future)
        return future

    def wait_status(self, run_id: str, status: str, timeout: float = 30) -> dict[str, Any]:
        """Poll ``GET /runs/{id}`` until the run has ``status``; its body."""
        end = time.monotonic() + timeout
        c = self.client()
        while True:
            body: dict[str, Any] = c.get(f"/runs/{run_id}").json()
            if body["status"] == status:
                return body
            assert time.monotonic() < end, f"run {run_id} stayed {body['status']}"
            time.sleep(0.05)

    def cancel(self, run_id: str) -> None:
        """Cancel the run and wait until it has finished."""
        self.client().post(f"/runs/{run_id}/cancel")
        self.wait_status(run_id, "finished")


@contextmanager
def local_service(tmp: Path, **config: Any) -> Iterator[Local]:
    """The service over a store in ``tmp``, with the token and the token name ``alice``."""
    settings: dict[str, Any] = {"token": TOKEN, "token_name": DECIDER, "ping_interval_s": 0.2}
    settings.update(config)
    with start_blocking_portal("asyncio") as portal:
        app = create_app(ServeConfig(store=tmp / "runs.sqlite", **settings))
        sock = bind_socket("127.0.0.1", 0)
        host, port = sock.getsockname()[:2]
        server = uvicorn.Server(uvicorn.Config(app, loop="asyncio", lifespan="on",
                                               log_level="warning"))
        serving = portal.start_task_soon(server.serve, [sock])
        end = time.monotonic() + 60
        while not server.started:
            assert not serving.done(), serving.exception()
            assert time.monotonic() < end, "the service did not start"
            time.sleep(0.02)
        local = Local(f"http://{host}:{port}", portal, app)
        try:
            yield local
        finally:
            for c in local.clients:
                c.close()
            for future in local.waits:
                future.cancel()  # a wait nobody decided: the portal must not wait for it
            server.should_exit = True
            serving.result(timeout=60)
            sock.close()
