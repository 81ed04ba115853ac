"""From a job file's ``model`` block to a ready client; the key comes from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping

from shared.clock import Clock
from shared.errors import FanoutError
from subagents.models.base import ModelClient
from subagents.models.endpoints.local import is_local
from subagents.models.limiter import attach_limiter, limiter_for, shared_limiter
from subagents.models.scripted import ScriptedModel
from subagents.models.spec import ModelSpec


class MissingModelKey(FanoutError):
    """The environment variable that should hold the model's key is unset or empty.

    It names the variable, never a value: the key is read from the environment only
    (docs/design.md §7), so the fix is to export it.
    """

    def __init__(self, variable: str, *, provider: str) -> None:
        self.variable = variable
        self.provider = provider
        super().__init__(
            f"model.api_key_env: the {provider} key is read from the environment variable "
            f"{variable}, which is not set (export {variable}=... and run again)"
        )


# Sent to a local OpenAI-compatible server (Ollama, vLLM, llama.cpp) when no key is set:
# the SDK refuses an empty key, and such servers ignore the header.
LOCAL_PLACEHOLDER_KEY = "fanout-local-no-key"

_BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


def build_client(
    spec: ModelSpec,
    *,
    environ: Mapping[str, str] = os.environ,
    clock: Clock | None = None,
) -> ModelClient:
    """The client ``spec`` describes.

    Args:
        spec: the ``model`` block.
        environ: where the key is looked up (``spec.key_env``); nothing else is read.
        clock: the scripted model's clock (its latencies); the live clients ignore it.

    Raises:
        MissingModelKey: a live provider whose key variable is unset or empty.
    """
    if spec.provider == "scripted":
        scripted = ScriptedModel(spec, clock=clock)
        limiter = limiter_for(spec, clock=clock)
        if limiter is not None:
            # Its own, on the scenario's virtual clock: replays never share one.
            attach_limiter(scripted, limiter)
        return scripted
    variable = spec.key_env
    assert variable is not None  # only the scripted model has no key
    key = environ.get(variable, "")
    # The endpoint: the block's base_url, else the variable the provider's SDK reads
    # (OPENAI_BASE_URL, ANTHROPIC_BASE_URL), as the SDK itself would (docs/design.md §7).
    base_url = spec.base_url or environ.get(_BASE_URL_ENV[spec.provider]) or None
    # A local server (Ollama, vLLM, llama.cpp) usually takes no key: none is asked for,
    # and a placeholder is sent. One that does want a key answers 401, which is a model
    # failure naming the key. A job that names api_key_env wants a key.
    local = spec.provider == "openai" and not spec.api_key_env and is_local(base_url)
    if not key.strip() and local:
        key = LOCAL_PLACEHOLDER_KEY
    if not key.strip():
        raise MissingModelKey(variable, provider=spec.provider)
    # Imported here: a job that never calls a live provider does not load its SDK
    # (it costs about 57 MiB and 0.9 s at every start).
    if spec.provider == "anthropic":
        from subagents.models.anthropic import AnthropicClient

        client: ModelClient = AnthropicClient(
            name=spec.model_name,
            api_key=key.strip(),
            base_url=base_url,
            timeout_s=spec.timeout_s,
        )
    else:
        from subagents.models.openai import OpenAIClient

        client = OpenAIClient(
            name=spec.model_name,
            api_key=key.strip(),
            base_url=base_url,
            timeout_s=spec.timeout_s,
            profile=spec.profile,
        )
    # One limiter per endpoint in the process, shared by every job's subagents and lead.
    attach_limiter(client, shared_limiter(spec, base_url=str(getattr(client, "base_url", ""))))
    return client
