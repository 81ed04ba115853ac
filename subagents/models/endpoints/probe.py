"""Asking an OpenAI-compatible server what it is: its window and its slots (docs/design.md §7).

One probe per endpoint and process, made with the first call: what ``GET /v1/models``
answered (its ``owned_by`` and, on vLLM, ``max_model_len``), then the server's own word
where it has one (llama.cpp's ``/props``, Ollama's ``/api/show``). A probe that fails
says nothing: the window is then learned from the first refusal that names it
(:mod:`subagents.models.endpoints.facts`). The key goes in the header the server expects and
nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import httpx

from subagents.models.endpoints.facts import EndpointFacts

__all__ = ["OLLAMA_DEFAULT_NUM_CTX", "probe_endpoint"]

OLLAMA_DEFAULT_NUM_CTX: Final = 2048
"""What Ollama gives a model whose parameters set no ``num_ctx`` (it then truncates the
prompt silently): the smallest default any of its versions used, so nothing is cut."""

_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.M)
_LLAMA_CPP_PYTHON = "me"  # its `owned_by`
_LLAMA_CPP = ("llamacpp", "llama.cpp")
_OLLAMA = ("library", "ollama")


def _root(base_url: str) -> str:
    """The server's root: the base URL without its ``/v1``."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _positive(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


async def probe_endpoint(
    facts: EndpointFacts,
    *,
    base_url: str,
    model: str,
    owner: str | None,
    listed: Mapping[str, Any],
    headers: Mapping[str, str],
    timeout_s: float,
) -> None:
    """Fill ``facts`` from what the server says (``listed``: its model-list entry)."""
    facts.probed = True
    facts.server = owner
    window = _positive(listed.get("max_model_len"))  # vLLM
    if window is not None:
        facts.learn_window(window, "max_model_len")
    kind = (owner or "").lower()
    if kind == _LLAMA_CPP_PYTHON:
        # llama-cpp-python serves one request at a time and states no window.
        facts.slots = 1
        return
    if kind not in _LLAMA_CPP + _OLLAMA:
        return
    try:
        async with httpx.AsyncClient(timeout=timeout_s, headers=dict(headers)) as http:
            if kind in _LLAMA_CPP:
                answer = await http.get(f"{_root(base_url)}/props")
                if answer.status_code == 200:
                    _read_props(facts, answer.json())
            else:
                answer = await http.post(f"{_root(base_url)}/api/show", json={"model": model})
                if answer.status_code == 200:
                    _read_ollama(facts, answer.json())
    except (httpx.HTTPError, ValueError):
        # The server would not say: the window comes from its first refusal instead.
        return


def _read_props(facts: EndpointFacts, props: Any) -> None:
    """llama.cpp's ``/props``: ``n_ctx`` (per slot) and ``total_slots``."""
    if not isinstance(props, dict):
        return
    settings = props.get("default_generation_settings")
    n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    n_ctx = n_ctx or _positive(props.get("n_ctx"))
    if n_ctx is not None:
        facts.learn_window(n_ctx, "props")
    slots = _positive(props.get("total_slots"))
    if slots is not None:
        facts.slots = slots


def _read_ollama(facts: EndpointFacts, shown: Any) -> None:
    """Ollama's ``/api/show``: the model's ``*.context_length``, cut to ``num_ctx``."""
    if not isinstance(shown, dict):
        return
    info = shown.get("model_info")
    trained = None
    if isinstance(info, dict):
        trained = next(
            (_positive(v) for k, v in info.items() if str(k).endswith(".context_length")), None
        )
    parameters = shown.get("parameters")
    match = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    num_ctx = int(match.group(1)) if match else OLLAMA_DEFAULT_NUM_CTX
    window = min(num_ctx, trained) if trained is not None else num_ctx
    facts.learn_window(window, "ollama")
