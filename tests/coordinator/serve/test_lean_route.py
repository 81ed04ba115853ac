"""The canary of ``_LeanRoute`` (coordinator/serve/routes.py), which answers a plain
``POST /runs`` in front of FastAPI's parameter and dependency resolution.

It relies on FastAPI building a route's ASGI app from ``APIRoute.get_route_handler()``
when the route is made, on ``route_class_override``, and on the app's exception handlers
seeing what the handler raises. A FastAPI that changes any of these fails here, in
process, before a served test or a benchmark would notice (pyproject bounds FastAPI).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response

from coordinator.serve.routes import _LeanRoute


def _app(seen: list[str]) -> FastAPI:
    """A route declared as ``POST /runs`` is, with a dependency and a query parameter."""

    async def dependency() -> None:
        seen.append("dependency")

    async def declared(speed: Annotated[float, Query(gt=0)] = 1.0) -> Response:
        seen.append(f"declared {speed:g}")
        return JSONResponse({"speed": speed}, status_code=201)

    async def plain(request: Request) -> Response | None:
        speed = request.query_params.get("speed", "1")
        if speed == "refused":
            raise HTTPException(401, "refused in front")
        if not speed.isdigit():
            return None
        seen.append(f"plain {speed}")
        return JSONResponse({"speed": float(speed)}, status_code=201)

    router = APIRouter(dependencies=[Depends(dependency)])
    router.add_api_route("/runs", declared, methods=["POST"], status_code=201,
                         route_class_override=type("Lean", (_LeanRoute,),
                                                   {"plain": staticmethod(plain)}))
    app = FastAPI()
    app.include_router(router)
    return app


async def _post(app: FastAPI, query: bytes) -> tuple[int, bytes]:
    sent: list[MutableMapping[str, Any]] = []
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/runs", "raw_path": b"/runs",
             "root_path": "", "query_string": query, "headers": [(b"host", b"test")],
             "server": ("test", 80), "client": ("test", 1)}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body


@pytest.mark.anyio
async def test_a_plain_request_is_answered_in_front_of_the_dependencies() -> None:
    """The plain path answers, and FastAPI resolves nothing (the dependency never runs)."""
    seen: list[str] = []
    assert await _post(_app(seen), b"speed=20") == (201, b'{"speed":20.0}')
    assert seen == ["plain 20"]


@pytest.mark.anyio
async def test_any_other_request_goes_through_fastapi_as_declared() -> None:
    """What the plain path declines is FastAPI's: dependencies, then validation."""
    seen: list[str] = []
    status, _ = await _post(_app(seen), b"speed=-1.5")
    assert status == 422
    assert seen == ["dependency"]
    seen.clear()
    assert await _post(_app(seen), b"speed=2.5") == (201, b'{"speed":2.5}')
    assert seen == ["dependency", "declared 2.5"]


@pytest.mark.anyio
async def test_what_the_plain_path_raises_reaches_the_apps_exception_handlers() -> None:
    """An error raised in front of FastAPI is answered as the app answers it."""
    status, body = await _post(_app([]), b"speed=refused")
    assert (status, body) == (401, b'{"detail":"refused in front"}')
