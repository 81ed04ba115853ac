"""What a small real model did to fanout on its first run, replayed on a loopback server
that refuses requests as llama-cpp-python does (docs/design.md §7: profiles, evidence, degrade)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.jobs import FAST_RETRY, SEARCH, run_job_text
from tests.e2e.wire import KEY, KEY_ENV
from tests.loopback import OpenAIServer, RecordedRequest
from tests.loopback._server import Reply
from tests.loopback.openai_server import completion, error, tool_call

pytestmark = pytest.mark.anyio

# llama-cpp-python's answer to `content: null` beside tool calls (a 500, seen 2026-12-01).
REFUSAL = (
    "1 validation error:\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, "
    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid "
    "string', 'input': None}"
)


@pytest.fixture
def anyio_backend() -> str:
    """Real sockets need real time: the asyncio backend that live runs use."""
    return "asyncio"


@pytest.fixture
def llama(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    """A loopback server whose model list says llama-cpp-python (``owned_by: me``)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    with OpenAIServer(api_key=KEY, owned_by="me") as server:
        yield server


def strict(reply: Reply) -> Callable[[RecordedRequest], Reply]:
    """``reply``, unless the request holds what llama-cpp-python refuses."""

    def answer(request: RecordedRequest) -> Reply:
        for message in request.json()["messages"]:
            if message["role"] == "assistant" and message.get("content") is None:
                return error(500, REFUSAL, type="internal_server_error")
        return reply

    return answer


def plan(subtasks: list[dict[str, Any]]) -> Reply:
    return completion(None, tool_calls=[tool_call("plan_subtasks", {"subtasks": subtasks})])


def decomposed(server: OpenAIServer) -> str:
    """A question for the lead to decompose, on the llama-like server."""
    return yaml.safe_dump({
        "scenario": "small-model",
        "model": {"provider": "openai", "name": "gemma", "base_url": server.base_url,
                  "api_key_env": KEY_ENV, "max_tokens": 128, "timeout_s": 5,
                  "retry": dict(FAST_RETRY)},
        "job": {"query": "solid-state batteries"},
        "tools": dict(SEARCH),
    })


async def test_a_plan_invalid_twice_degrades_and_no_request_is_refused(
    llama: OpenAIServer,
) -> None:
    """Duplicate ids twice (as Gemma 270M did): the second planning request carries the
    lead's turn and is accepted; the question runs with every tool and is covered only
    once the model called its tool after the reminder."""
    twice = [{"id": "a", "query": "q", "tools": ["web_search"]}] * 2
    llama.push(
        strict(plan(twice)),
        strict(plan(twice)),
        strict(completion("Solid-state batteries are great.")),  # words, no tool
        strict(completion(None, tool_calls=[tool_call("web_search", {"query": "ssb"})])),
        strict(completion("QuantumScape ships samples (web_search).")),
        strict(completion("They stand at samples [question].")),  # the synthesis
    )
    outcome = await run_job_text(decomposed(llama))
    report = outcome.report
    assert [(s["id"], s["status"]) for s in report["subtasks"]] == [
        ("lead", "gap"), ("question", "complete")
    ]
    assert outcome.gap("lead")["trigger"] == "no_progress"
    assert outcome.gap("lead")["route"] == "gap"
    assert len(llama.requests) == 6 and llama.pending == 0
    second = llama.requests[1].json()["messages"]
    assert [m["role"] for m in second][-2:] == ["assistant", "tool"]
    assert second[-2]["content"] == ""  # never null on this server
    reminder = llama.requests[3].json()["messages"][-1]
    assert reminder["role"] == "user" and "call one of your tools" in reminder["content"].lower()
    assert report["answer"]["text"] == "They stand at samples [1]."  # [question]: its source


async def test_words_and_silence_are_never_coverage(llama: OpenAIServer) -> None:
    """A subtask whose model answers without tools, even after the reminder, is a gap
    (no_evidence) with its words in partial_results; the run is not 100% covered."""
    llama.push(
        strict(plan([{"id": "market", "query": "market", "tools": ["web_search"]},
                     {"id": "echo", "query": "solid-state batteries", "tools": ["web_search"]}])),
    )

    def by_subtask(request: RecordedRequest) -> Reply:
        system = request.json()["messages"][0]["content"]
        if "Subtask 'echo'" in system:
            return completion("solid-state batteries")  # the query echoed back
        if "Subtask 'market'" in system:
            return completion("")  # silence
        return completion("Nothing is known [market] [echo].")

    llama.push(*[by_subtask] * 5)
    outcome = await run_job_text(decomposed(llama))
    assert outcome.report["coverage"] == 0 and outcome.report["outcome"] == "failed"
    echo, market = outcome.gap("echo"), outcome.gap("market")
    assert (echo["trigger"], echo["route"]) == ("no_evidence", "gap")
    assert market["trigger"] == "no_evidence"
    assert json.dumps(echo["partial_results"]).count("solid-state batteries") == 1
    assert market["partial_results"] == []
