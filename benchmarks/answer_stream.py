"""The answer streams (docs/design.md §8): time to the first words vs time to the whole answer.

The lead's synthesis path as it runs live: ``call_model`` with the lead's
:class:`~coordinator.lead.streaming.AnswerStream`, through the official SDK, against
the loopback wire servers of ``tests/loopback`` (real HTTP on 127.0.0.1), which stream as
the APIs do: OpenAI's ``chat.completion.chunk`` events, Anthropic's message events. The
server writes an answer of ``words`` words, ``word_delay_s`` apart (a model writing at
that pace). Measured from the request: when the first ``answer.delta`` event reaches the
observer (what a person sees first), and when the turn is whole (what they saw before,
when nothing streamed); the same answer asked without streaming is the "before" row.
"""

from __future__ import annotations

import json
import random
import time

import anyio

from benchmarks.stats import BenchResult, Figure, Stats, Target
from coordinator.lead.streaming import AnswerStream
from shared.clock import AnyioClock
from subagents.models import AnthropicClient, ModelRequest, OpenAIClient, UserMessage
from subagents.models.call import call_model
from subagents.models.spec import ModelSpec
from subagents.result import ProgressEvent
from tests.loopback import AnthropicServer, OpenAIServer
from tests.loopback._server import RecordedRequest, Reply
from tests.loopback.anthropic_server import message
from tests.loopback.openai_server import completion

KEY = "answer_stream"
API_KEY = "sk-bench-0123456789"


async def _once(
    client: OpenAIClient | AnthropicClient, server: OpenAIServer | AnthropicServer,
    reply: Reply, *, stream: bool,
) -> tuple[float, float]:
    """Seconds to the first answer.delta event (the whole, if none) and to the whole turn."""
    server.push(reply)
    clock = AnyioClock()
    first: list[float] = []
    began = time.perf_counter()

    def hear(event: ProgressEvent) -> None:
        if event.kind == "answer.delta" and not first:
            first.append(time.perf_counter() - began)

    sink = AnswerStream(hear, clock) if stream else None
    request = ModelRequest(system="Answer.", messages=[UserMessage("q")], subtask_id="lead")
    spec = ModelSpec(provider=client.provider, timeout_s=60)
    result, turn = await call_model(client, request, spec=spec, clock=clock,
                                    rng=random.Random(0), trace_id="bench", stream=sink)
    whole = time.perf_counter() - began
    if turn is None:
        raise RuntimeError(f"the answer failed: {result.message}")
    return (first[0] if first else whole), whole


async def _provider(name: str, words: int, delay: float, repeat: int) -> dict[str, list[float]]:
    text = " ".join(f"word{i}" for i in range(words))
    out: dict[str, list[float]] = {"first": [], "whole": [], "unstreamed": []}
    if name == "openai":
        with OpenAIServer(api_key=API_KEY) as server:
            client: OpenAIClient | AnthropicClient = OpenAIClient(
                name="gpt-loopback", api_key=API_KEY, base_url=server.base_url, timeout_s=60)
            body = completion(text)
            await _measure(client, server, body, delay, repeat, out)
    else:
        with AnthropicServer(api_key=API_KEY) as aserver:
            client = AnthropicClient(name="claude-loopback", api_key=API_KEY,
                                     base_url=aserver.base_url, timeout_s=60)
            await _measure(client, aserver, message(text), delay, repeat, out)
    return out


async def _measure(
    client: OpenAIClient | AnthropicClient, server: OpenAIServer | AnthropicServer,
    body: Reply, delay: float, repeat: int, out: dict[str, list[float]],
) -> None:
    # Unstreamed, the server holds the whole answer for as long as writing it takes.
    chunks = len(server.streamed(_asks_stream(server), body).chunks or ())
    unstreamed = Reply(body.status, body.body, body.headers, delay_s=delay * chunks)
    try:
        # One call first, not counted: the connection, and the OpenAI client's one probe
        # of the server (GET /models), belong to a process's first call only.
        await _once(client, server, body, stream=True)
        for _ in range(repeat):
            paced = Reply(body.status, body.body, body.headers, chunk_delay_s=delay)
            first, whole = await _once(client, server, paced, stream=True)
            out["first"].append(first)
            out["whole"].append(whole)
            out["unstreamed"].append((await _once(client, server, unstreamed, stream=False))[1])
    finally:
        await client.aclose()


def _asks_stream(server: OpenAIServer | AnthropicServer) -> RecordedRequest:
    return RecordedRequest("POST", server.path, {}, b'{"stream": true}')


def run(words: int, word_delay_s: float, repeat: int) -> BenchResult:
    """Per provider: the first words, the whole streamed answer, the unstreamed answer."""
    result = BenchResult(
        KEY, "Answer streaming",
        f"The answer streams: {words} words written {word_delay_s * 1000:g} ms apart, "
        "through the official SDKs and the loopback wire servers",
        {"words": words, "word_delay_s": word_delay_s, "repeat": repeat},
    )
    for name in ("openai", "anthropic"):
        got = anyio.run(_provider, name, words, word_delay_s, repeat, backend="asyncio")
        first, whole = Stats.of(got["first"]), Stats.of(got["whole"])
        share = first.median / whole.median
        result.figures += [
            Figure(f"{name}: time to the first answer words (answer.delta)", "s", first,
                   target=Target("the first words within a tenth of the answer's time",
                                 share, 0.1)),
            Figure(f"{name}: time to the whole answer, streamed", "s", whole),
            Figure(f"{name}: time to the whole answer, not streamed (before)", "s",
                   Stats.of(got["unstreamed"])),
        ]
    return result


if __name__ == "__main__":  # pragma: no cover - a manual run
    print(json.dumps({f.label: f.stats.median if f.stats else None
                      for f in run(200, 0.01, 3).figures}, indent=1))
