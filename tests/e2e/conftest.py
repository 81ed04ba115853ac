"""End-to-end fixtures: real time on asyncio, one loopback server per provider, the key set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.wire import KEY, KEY_ENV, WIRES, Provider, Wire
from tests.loopback import LoopbackServer


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@pytest.fixture(scope="session")
def _servers() -> Iterator[dict[Provider, LoopbackServer]]:
    servers = {name: wire.server().start() for name, wire in WIRES.items()}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture(params=[pytest.param(p, id=p) for p in WIRES])
def wire(request: pytest.FixtureRequest) -> Wire:
    """Each provider in turn."""
    return WIRES[request.param]


@pytest.fixture
def server(wire: Wire, _servers: dict[Provider, LoopbackServer]) -> LoopbackServer:
    """The provider's loopback server, with nothing queued and nothing recorded."""
    found = _servers[wire.provider]
    found.clear()
    return found


@pytest.fixture(autouse=True)
def model_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The key, set in the environment under the name the job files give."""
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY
