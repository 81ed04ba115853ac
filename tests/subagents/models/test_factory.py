"""build_client: the model block in, a client out, the key from the environment only."""

from __future__ import annotations

import pytest

import subagents.models
from subagents.models import (
    AnthropicClient,
    MissingModelKey,
    ModelSpec,
    OpenAIClient,
    ScriptedModel,
    build_client,
)

pytestmark = pytest.mark.anyio

SECRET = "sk-from-the-environment-42"


@pytest.mark.parametrize(
    ("block", "kind", "variable"),
    [
        pytest.param(
            {"provider": "anthropic"}, AnthropicClient, "ANTHROPIC_API_KEY", id="anthropic"
        ),
        pytest.param({"provider": "openai"}, OpenAIClient, "OPENAI_API_KEY", id="openai"),
        pytest.param(
            {"provider": "openai", "api_key_env": "VLLM_KEY", "base_url": "http://gpu:8000/v1"},
            OpenAIClient,
            "VLLM_KEY",
            id="compatible-server",
        ),
    ],
)
async def test_a_live_provider_reads_its_key_from_the_named_variable(
    block: dict[str, str], kind: type, variable: str
) -> None:
    """The key comes from spec.key_env in the given environment and never shows in repr."""
    spec = ModelSpec.model_validate(block)
    client = build_client(spec, environ={variable: SECRET})
    try:
        assert isinstance(client, kind)
        assert client.name == spec.model_name
        assert client._sdk.api_key == SECRET  # type: ignore[attr-defined]
        assert SECRET not in repr(client) and SECRET not in str(vars(client).keys())
        if spec.base_url:
            assert client.base_url == spec.base_url  # type: ignore[attr-defined]
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    "environ",
    [
        pytest.param({}, id="unset"),
        pytest.param({"ANTHROPIC_API_KEY": "  "}, id="blank"),
        pytest.param({"OPENAI_API_KEY": SECRET}, id="another-providers-key"),
    ],
)
def test_a_missing_key_names_the_variable(environ: dict[str, str]) -> None:
    """No key in the variable is a MissingModelKey naming it (and no value)."""
    with pytest.raises(MissingModelKey) as caught:
        build_client(ModelSpec(provider="anthropic"), environ=environ)
    assert caught.value.variable == "ANTHROPIC_API_KEY"
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_the_scripted_model_needs_no_key() -> None:
    """provider: scripted builds a ScriptedModel without looking at the environment."""
    assert isinstance(build_client(ModelSpec(provider="scripted"), environ={}), ScriptedModel)


def test_every_exported_name_resolves() -> None:
    """Each name in subagents.models.__all__ is importable from it."""
    for name in subagents.models.__all__:
        assert hasattr(subagents.models, name), name
