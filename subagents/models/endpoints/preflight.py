"""Before a run: is the model's endpoint there, and is its base URL the API's? (docs/design.md §7)

A newcomer's mistakes with a local server are an unreachable URL (the server is not
started, or another port) and a base URL without its ``/v1``. Both used to surface deep
in a run: 18 s of retries, then an error inside the Answer box, or "HTTP 404
model_not_found". Here they are found first, with one ``GET {base_url}/models`` made
through fanout's one retry layer (the model's own retry policy), and said in one line
naming the URL. The official APIs are not asked (they are there; their key is checked by
their first call).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from shared.clock import Clock
from subagents.executor import execute_tool_safely
from subagents.jitter import DeferredRandom
from subagents.models.endpoints.local import is_local
from subagents.models.spec import ModelSpec
from subagents.tool import Tool

__all__ = ["EndpointProblem", "check_endpoint", "endpoint_url", "keyless"]

_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
_OFFICIAL = ("api.openai.com", "api.anthropic.com")


@dataclass(frozen=True, slots=True)
class EndpointProblem:
    """What is wrong with the endpoint, in one line naming its URL."""

    kind: Literal["unreachable", "needs_v1"]
    url: str
    message: str


def endpoint_url(spec: ModelSpec, environ: Mapping[str, str]) -> str | None:
    """The base URL a live client of ``spec`` will call (None: the provider's own API)."""
    if spec.provider == "scripted":
        return None
    variable = "OPENAI_BASE_URL" if spec.provider == "openai" else "ANTHROPIC_BASE_URL"
    return spec.base_url or environ.get(variable) or None


def keyless(spec: ModelSpec, environ: Mapping[str, str]) -> bool:
    """Whether ``spec``'s endpoint is a local OpenAI-compatible server that needs no key
    (``base_url``, or OPENAI_BASE_URL, on this machine or its network; docs/design.md §7)."""
    return (
        spec.provider == "openai"
        and not spec.api_key_env
        and is_local(endpoint_url(spec, environ))
    )


async def check_endpoint(
    spec: ModelSpec, *, environ: Mapping[str, str], clock: Clock
) -> EndpointProblem | None:
    """The problem with ``spec``'s OpenAI-compatible endpoint, or None when it answers.

    Connection failures are retried with ``model.retry`` (``model.timeout_s`` each); an
    endpoint that never answers is ``unreachable``. A 404 for ``/models`` where the same
    URL plus ``/v1`` serves it is ``needs_v1``. Any other answer (a 401, a gateway without
    a model list) is left to the run, which classifies it as every model call.
    """
    base = endpoint_url(spec, environ)
    if spec.provider != "openai" or base is None or urlsplit(base).hostname in _OFFICIAL:
        return None
    key = environ.get(spec.key_env or "OPENAI_API_KEY", "")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    root = base.rstrip("/")

    async def models() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=spec.timeout_s, headers=headers) as http:
            answer = await http.get(f"{root}/models")
        return {"status": answer.status_code}

    tool = Tool(name="model", body=models, schema=_NO_ARGS, is_async=True, real_time=True)
    result = await execute_tool_safely(
        tool,
        {},
        timeout=spec.timeout_s,
        retry=spec.retry,
        clock=clock,
        rng=DeferredRandom("preflight/model"),
        scope="preflight",
    )
    if not result.ok:
        if result.category != "transient":
            return None
        tries = f"{result.attempts} attempt{'s' if result.attempts != 1 else ''}"
        return EndpointProblem(
            "unreachable",
            base,
            f"cannot reach the model server at {base} ({result.message}; {tries}): "
            "is it running, and on this port?",
        )
    data = result.data if isinstance(result.data, dict) else {}
    if data.get("status") != 404 or root.endswith("/v1"):
        return None
    try:
        async with httpx.AsyncClient(timeout=spec.timeout_s, headers=headers) as http:
            with_v1 = await http.get(f"{root}/v1/models")
    except httpx.HTTPError:
        return None
    if with_v1.status_code != 200:
        return None
    return EndpointProblem(
        "needs_v1",
        base,
        f"{base} answers 404 for /models, and {root}/v1 serves the OpenAI API: "
        f"use {root}/v1",
    )
