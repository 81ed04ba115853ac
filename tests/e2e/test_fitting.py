"""Fitting a small local server (docs/design.md §7): its window is read where it says it, or
learned from its first refusal; after that no request is sent whose prompt and
``max_tokens`` exceed it, and the lead's findings are cut by weight to fit. A window only
inferred from a wrong ``usage`` or an odd ``length`` finish stops nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
import yaml

from tests.e2e.jobs import FAST_RETRY, run_job_text
from tests.e2e.wire import KEY, KEY_ENV
from tests.loopback import OpenAIServer, RecordedRequest
from tests.loopback._server import Reply
from tests.loopback.openai_server import completion, error

pytestmark = pytest.mark.anyio

WINDOW = 2048
COLD = (
    "Sodium-ion cells keep more than 90 percent of their capacity at -20 C, where LFP "
    "cells keep 60 to 70 percent. "
)


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


def tokens(request: RecordedRequest) -> int:
    """The loopback model's count of a request's prompt: 4 characters a token, as JSON
    (which counts more than fanout's own estimate: the ratio must be learned)."""
    body = request.json()
    return len(json.dumps([body["messages"], body.get("tools", [])])) // 4


def refusal(wording: Literal["openai", "llama.cpp"], prompt: int, asked: int) -> Reply:
    """A 400 for a request over :data:`WINDOW`, naming the window in a server's words."""
    if wording == "llama.cpp":
        return error(
            400,
            f"request ({prompt + asked} tokens) exceeds the available context size "
            f"({WINDOW} tokens), try increasing it",
            type="exceed_context_size_error",
        )
    return error(
        400,
        f"This model's maximum context length is {WINDOW} tokens. However, you "
        f"requested {prompt + asked} tokens ({prompt} in the messages, {asked} in "
        "the completion). Please reduce the length of the messages or completion.",
        code="context_length_exceeded",
    )


@dataclass
class SmallModel:
    """A model with a window of :data:`WINDOW` tokens, refusing as vLLM and OpenAI do
    (prompt plus ``max_tokens`` over the window), answering as a weak model would."""

    refused: list[tuple[int, int]] = field(default_factory=list)
    accepted: list[tuple[int, int]] = field(default_factory=list)
    wording: Literal["openai", "llama.cpp"] = "openai"

    def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json()
        prompt, asked = tokens(request), int(body.get("max_tokens") or 0)
        if prompt + asked > WINDOW:
            self.refused.append((prompt, asked))
            return refusal(self.wording, prompt, asked)
        self.accepted.append((prompt, asked))
        system = json.dumps(body["messages"][:1])
        text = "The cold costs sodium-ion little [1]." if "lead of a research" in system else ""
        reply = completion(text or "It keeps 90 percent at -20 C.")
        reply.body["usage"] = {"prompt_tokens": prompt, "completion_tokens": 12,
                               "total_tokens": prompt + 12}
        return reply


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[OpenAIServer, SmallModel]]:
    """A loopback server with a small model behind it (its model list says ``owned_by``)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    model = SmallModel()
    with OpenAIServer(api_key=KEY, owned_by="compatible-gateway") as server:
        server.push(*[model] * 40)
        yield server, model


def job(server: OpenAIServer, *, subtasks: int = 2) -> str:
    """Model-planned subtasks with a search that returns a long page, and a synthesis."""
    return yaml.safe_dump({
        "scenario": "small-window",
        "model": {"provider": "openai", "name": "small", "base_url": server.base_url,
                  "api_key_env": KEY_ENV, "timeout_s": 5, "retry": dict(FAST_RETRY)},
        "job": {
            "query": "How do sodium-ion cells do in the cold?",
            "subtasks": [
                {"id": f"part{i}", "query": f"sodium-ion cells in the cold, part {i}",
                 "tools": ["kb_search"], "weight": i}
                for i in range(1, subtasks + 1)
            ],
        },
        "tools": {"kb_search": {
            "description": "Search the knowledge base.",
            "search": True,
            "params": {"query": {"type": "string"}},
            "responses": [{"ok": {"results": [{"path": f"cold{n}.md", "title": f"Cold {n}",
                                               "snippet": COLD * 12} for n in range(6)]}}],
        }},
    })


@pytest.mark.process
@pytest.mark.parametrize("wording", ["openai", "llama.cpp"])
async def test_a_refusal_teaches_the_window_and_every_request_after_it_fits(
    small: tuple[OpenAIServer, SmallModel], wording: Literal["openai", "llama.cpp"]
) -> None:
    """The server states no window: its first refusal names it (OpenAI's or llama.cpp's
    words); every later request's prompt plus max_tokens fits it, the answer comes back,
    and the cut findings are named."""
    server, model = small
    model.wording = wording
    outcome = await run_job_text(job(server))
    report = outcome.report
    assert len(model.refused) == 1, model.refused
    assert model.accepted and all(p + m <= WINDOW for p, m in model.accepted)
    assert report["coverage"] == 1.0
    assert report["answer"]["kind"] == "model"
    assert report["answer"]["text"] == "The cold costs sodium-ion little [1]."
    cut = [m for m in report["answer"]["missing"] if "cut by weight" in m]
    assert cut, report["answer"]["missing"]


@pytest.mark.parametrize(
    ("owner", "says"),
    [
        pytest.param("vllm", {"model_fields": {"max_model_len": WINDOW}}, id="vllm"),
        pytest.param(
            "llamacpp",
            {"props": {"default_generation_settings": {"n_ctx": WINDOW}, "total_slots": 1}},
            id="llama.cpp",
        ),
        pytest.param(
            "library",
            {"ollama_show": {"model_info": {"gemma3.context_length": 32768},
                             "parameters": f"num_ctx                        {WINDOW}"}},
            id="ollama",
        ),
    ],
)
async def test_a_window_the_server_states_is_never_exceeded(
    small: tuple[OpenAIServer, SmallModel], owner: str, says: dict[str, Any]
) -> None:
    """Where the server says its window, not even the first request exceeds it, and an
    answer gets at most a quarter of it."""
    server, model = small
    server.owned_by = owner
    for name, value in says.items():
        setattr(server, name, value)
    outcome = await run_job_text(job(server))
    assert model.refused == []
    assert all(p + m <= WINDOW and m <= WINDOW // 4 for p, m in model.accepted), model.accepted
    assert outcome.report["coverage"] == 1.0


async def test_search_first_is_a_real_call_before_the_first_turn(
    small: tuple[OpenAIServer, SmallModel],
) -> None:
    """Each subtask's own query is searched before its model is asked: the first request
    of a subtask already carries the search's result, and it is the subtask's evidence."""
    server, _ = small
    outcome = await run_job_text(job(server, subtasks=1))
    search = outcome.envelopes("kb_search", "part1")
    assert len(search) == 1 and search[0].ok
    first = next(
        r.json()["messages"] for r in server.requests
        if "Subtask 'part1'" in json.dumps(r.json()["messages"][:2])
    )
    assert [m["role"] for m in first][-2:] == ["assistant", "tool"]
    assert first[-2]["tool_calls"][0]["function"]["name"] == "kb_search"
    assert json.loads(first[-2]["tool_calls"][0]["function"]["arguments"]) == {
        "query": "sodium-ion cells in the cold, part 1"
    }
    assert outcome.subtask("part1")["status"] == "complete"


Usage = Literal["honest", "proxy_estimate", "cached_left_out"]


@dataclass
class OddUsageModel:
    """A model whose window is ample but whose answers mislead: ``usage`` as ``usage``
    says, and its first answer ended ``length`` after 20 tokens whatever was allowed
    (a proxy's own cut, a stop the server calls ``length``)."""

    usage: Usage
    answered: list[RecordedRequest] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> Reply:
        prompt = tokens(request)
        first = not self.answered
        self.answered.append(request)
        if "lead of a research" in json.dumps(request.json()["messages"][:1]):
            reply = completion("The cold costs sodium-ion little [1].")
        elif first:
            reply = completion("It keeps 90 percent", finish_reason="length")
        else:
            reply = completion("It keeps 90 percent at -20 C.")
        written = 20 if first else 12
        counted, details = prompt, None
        if self.usage == "proxy_estimate":
            counted = 100  # a proxy's guess, far below what it forwarded
        elif self.usage == "cached_left_out":
            # The shared prefix came from the server's cache, and is left out of the count.
            details = {"cached_tokens": prompt - 60}
            counted = 60
        reply.body["usage"] = {"prompt_tokens": counted, "completion_tokens": written,
                               "total_tokens": counted + written}
        if details is not None:
            reply.body["usage"]["prompt_tokens_details"] = details
        return reply


@pytest.mark.parametrize("usage", ["honest", "proxy_estimate", "cached_left_out"])
async def test_a_window_inferred_from_an_odd_answer_stops_no_request(
    monkeypatch: pytest.MonkeyPatch, usage: Usage
) -> None:
    """An answer cut at 20 tokens, with its prompt under-counted or not, teaches no window
    that keeps a request from the server: every subtask and the synthesis are sent, and no
    subtask becomes a context_budget gap."""
    monkeypatch.setenv(KEY_ENV, KEY)
    model = OddUsageModel(usage)
    with OpenAIServer(api_key=KEY, owned_by="compatible-gateway") as server:
        server.push(*[model] * 40)
        text = yaml.safe_load(job(server, subtasks=6))
        # One request at a time, as on a one-slot server: the odd answer comes back
        # before any other request is fitted.
        text["model"]["limits"] = {"concurrency": 1}
        outcome = await run_job_text(yaml.safe_dump(text))
    report = outcome.report
    sent = [json.dumps(r.json()["messages"][:2]) for r in model.answered]
    for i in range(1, 7):
        assert any(f"Subtask 'part{i}'" in m for m in sent), f"part{i} never reached the server"
    assert not [g for g in report["gaps"] if g["trigger"] == "context_budget"], report["gaps"]
    # Nor is any subtask's evidence cut for it: each model reads as much of the same search
    # result as the first did (the tool budget's cut lands a few characters apart, where
    # the trace ids tokenize differently).
    sizes = [len(m["content"]) for r in model.answered for m in r.json()["messages"]
             if m["role"] == "tool"]
    assert len(sizes) == 6 and min(sizes) > 0.9 * max(sizes), sizes
    assert report["answer"]["kind"] == "model"
    assert report["answer"]["text"] == "The cold costs sodium-ion little [1]."
