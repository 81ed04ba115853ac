"""From a job file's ``model`` block to a ready client; the key comes from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping

from shared.clock import Clock
from shared.errors import FanoutError
from subagents.models.base import ModelClient
from subagents.models.scripted import ScriptedModel
from subagents.models.spec import ModelSpec


class MissingModelKey(FanoutError):
    """The environment variable that should hold the model's key is unset or empty.

    It names the variable, never a value: the key is read from the environment only
    (DESIGN §7), so the fix is to export it.
    """

    def __init__(self, variable: str, *, provider: str) -> None:
        self.variable = variable
        self.provider = provider
        super().__init__(
            f"model.api_key_env: the {provider} key is read from the environment variable "
            f"{variable}, which is not set (export {variable}=... and run again)"
        )


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
        return ScriptedModel(spec, clock=clock)
    variable = spec.key_env
    assert variable is not None  # only the scripted model has no key
    key = environ.get(variable, "")
    if not key.strip():
        raise MissingModelKey(variable, provider=spec.provider)
    # Imported here: a job that never calls a live provider does not load its SDK
    # (it costs about 57 MiB and 0.9 s at every start).
    if spec.provider == "anthropic":
        from subagents.models.anthropic import AnthropicClient

        return AnthropicClient(
            name=spec.model_name,
            api_key=key.strip(),
            base_url=spec.base_url,
            timeout_s=spec.timeout_s,
        )
    from subagents.models.openai import OpenAIClient

    return OpenAIClient(
        name=spec.model_name,
        api_key=key.strip(),
        base_url=spec.base_url,
        timeout_s=spec.timeout_s,
        profile=spec.profile,
    )
