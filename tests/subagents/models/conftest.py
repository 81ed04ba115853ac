"""Loopback provider servers, one per session, wiped clean before each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.loopback import AnthropicServer, OpenAIServer

KEY = "sk-loopback-0123456789abcdef"
"""The key the servers accept; a test checks it never leaks."""


@pytest.fixture(scope="session")
def _anthropic_server() -> Iterator[AnthropicServer]:
    with AnthropicServer(api_key=KEY) as server:
        yield server


@pytest.fixture(scope="session")
def _openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(api_key=KEY) as server:
        yield server


@pytest.fixture
def anthropic_server(_anthropic_server: AnthropicServer) -> AnthropicServer:
    """The session's Anthropic server with no queued replies and no recorded requests."""
    _anthropic_server.clear()
    return _anthropic_server


@pytest.fixture
def openai_server(_openai_server: OpenAIServer) -> OpenAIServer:
    """The session's OpenAI-compatible server, wiped clean."""
    _openai_server.clear()
    return _openai_server
