"""Loopback servers that speak the model providers' wire protocols, for tests and benchmarks.

from tests.loopback.openai_server import OpenAIServer, completion, error

with OpenAIServer() as server:
    server.push(error(429, "slow down", headers={"retry-after": "2"}), completion("hi"))
    ...  # point a client's base_url at server.base_url; read server.requests
"""

from tests.loopback._server import LoopbackServer, RecordedRequest, Reply, Responder
from tests.loopback.anthropic_server import AnthropicServer
from tests.loopback.openai_server import OpenAIServer

__all__ = [
    "AnthropicServer",
    "LoopbackServer",
    "OpenAIServer",
    "RecordedRequest",
    "Reply",
    "Responder",
]
