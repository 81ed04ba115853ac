"""A local OpenAI-compatible server needs no key: none is asked for, a placeholder is sent."""

from __future__ import annotations

import pytest

from subagents.models import MissingModelKey, ModelSpec, build_client
from subagents.models.base import ModelRequest, UserMessage
from subagents.models.factory import LOCAL_PLACEHOLDER_KEY
from subagents.models.local import is_local
from tests.loopback.openai_server import OpenAIServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """Real time on asyncio: the loopback server answers from its own thread."""
    return "asyncio"


@pytest.mark.parametrize(
    ("url", "local"),
    [
        pytest.param("http://localhost:11434/v1", True, id="localhost"),
        pytest.param("http://127.0.0.1:8000/v1", True, id="loopback-v4"),
        pytest.param("http://[::1]:8000/v1", True, id="loopback-v6"),
        pytest.param("http://192.168.1.20:8000/v1", True, id="private-lan"),
        pytest.param("http://gpu-box.local:8000/v1", True, id="mdns"),
        pytest.param("https://api.openai.com/v1", False, id="openai"),
        pytest.param("https://gateway.example.com/v1", False, id="remote-gateway"),
        pytest.param("http://8.8.8.8/v1", False, id="public-ip"),
        pytest.param(None, False, id="default"),
    ],
)
def test_what_counts_as_a_local_server(url: str | None, local: bool) -> None:
    """Loopback, private and .local addresses are local; anything else is not."""
    assert is_local(url) is local


async def test_a_loopback_server_is_called_without_a_key_set() -> None:
    """--model openai:NAME --base-url http://127.0.0.1:…/v1 with OPENAI_API_KEY unset: the
    call goes through, carrying the placeholder (the SDK refuses an empty key)."""
    with OpenAIServer() as server:
        spec = ModelSpec.model_validate(
            {"provider": "openai", "name": "llama3.1", "base_url": server.base_url}
        )
        client = build_client(spec, environ={})
        try:
            turn = await client.complete(ModelRequest(system="s", messages=[UserMessage("q")]))
        finally:
            await client.aclose()
        assert turn.text == "ok"
        assert server.requests[-1].api_key == LOCAL_PLACEHOLDER_KEY


@pytest.mark.parametrize(
    "block",
    [
        pytest.param({"base_url": "https://gateway.example.com/v1"}, id="remote"),
        pytest.param(
            {"base_url": "http://127.0.0.1:8000/v1", "api_key_env": "VLLM_KEY"},
            id="named-variable",
        ),
        pytest.param({}, id="api.openai.com"),
    ],
)
def test_a_key_is_still_required_off_the_machine_or_when_named(block: dict[str, str]) -> None:
    """A remote server, or a job that names api_key_env, still needs its key set."""
    spec = ModelSpec.model_validate({"provider": "openai", **block})
    with pytest.raises(MissingModelKey):
        build_client(spec, environ={})
