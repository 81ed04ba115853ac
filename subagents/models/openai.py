"""The OpenAI-compatible client: chat completions with tools, against any base_url."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessageParam,
    ChatCompletionToolUnionParam,
)

from subagents.models.base import (
    AssistantMessage,
    ModelCallFailed,
    ModelRequest,
    ModelTurn,
    TextSink,
    ToolResultMessage,
    TranscriptMessage,
    UserMessage,
)
from subagents.models.classify import MODEL_ERRORS, classify_model_error
from subagents.models.compat.chat import gather_stream, to_turn
from subagents.models.compat.profiles import (
    PROFILES,
    ServerProfile,
    ask_in_words,
    profile_for_owner,
    tools_text,
)
from subagents.models.endpoints.facts import (
    MIN_ANSWER_TOKENS,
    EndpointFacts,
    facts_for,
    read_refusal,
)
from subagents.models.endpoints.local import is_local
from subagents.models.limiter import estimate_tokens, limiter_of
from subagents.models.ratelimit_headers import read_rate_headers
from subagents.models.spec import ModelLimits

DEFAULT_BASE_URL = "https://api.openai.com/v1"



class OpenAIClient:
    """Any OpenAI-compatible server (OpenAI, a gateway, vLLM, llama.cpp, Ollama).

    The SDK's retries are off. The key lives only inside the SDK client, never in this
    object's repr, and is cut out of every error message.

    ``profile`` (docs/design.md §7, :mod:`subagents.models.compat.profiles`) says what the server
    accepts. ``auto`` asks the server once what it is (``GET /models``: its
    ``owned_by``) and, on a request the server refuses for its shape, sends that one
    request again in the strictest form and keeps that form: a profile found out, not a
    retry (the same refused request is never sent twice). A request refused in the
    strictest form too is fanout's bug: ``internal``, never retried.
    """

    provider = "openai"

    def __init__(
        self,
        *,
        name: str,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        profile: str = "auto",
    ) -> None:
        self.name = name
        # OPENAI_BASE_URL is honoured as the SDK honours it (the factory reads it).
        self.base_url = base_url or DEFAULT_BASE_URL
        self.timeout_s = timeout_s
        # OpenAI's own API wants `max_completion_tokens` (its reasoning models refuse
        # `max_tokens`); the compatible servers know `max_tokens`, some nothing else.
        self.official = urlsplit(self.base_url).hostname == "api.openai.com"
        self.max_tokens_param = "max_completion_tokens" if self.official else "max_tokens"
        self.profile_choice = profile
        self._profile: ServerProfile | None = None
        if profile != "auto":
            self._profile = PROFILES[profile]
        elif self.official:
            self._profile = PROFILES["openai"]
        self._probing: anyio.Lock | None = None
        # What the endpoint says of itself (window, slots), shared by every client of it
        # in the process (docs/design.md §7, "Fitting a local server").
        self.facts: EndpointFacts = facts_for(self.base_url, name)
        self.facts.local = is_local(self.base_url)
        self._minted = itertools.count(1)
        self._sdk = openai.AsyncOpenAI(
            api_key=api_key, base_url=self.base_url, max_retries=0, timeout=timeout_s
        )

    def __repr__(self) -> str:
        return f"OpenAIClient(name={self.name!r}, base_url={self.base_url!r})"

    async def server_profile(self) -> ServerProfile:
        """The profile in use: the one asked for, else found out once from the server."""
        if self._profile is None:
            if self._probing is None:
                self._probing = anyio.Lock()
            async with self._probing:
                if self._profile is None:
                    self._profile = profile_for_owner(await self._owner())
        elif not self.official and not self.facts.probed:
            if self._probing is None:
                self._probing = anyio.Lock()
            async with self._probing:
                if not self.facts.probed:
                    await self._owner()
        return self._profile

    async def _owner(self) -> str | None:
        """What ``GET {base_url}/models`` says owns the model (None: it would not say).

        The same answer tells vLLM's window (``max_model_len``); llama.cpp's ``/props``
        and Ollama's ``/api/show`` are asked next when the owner names them (docs/design.md §7).
        """
        from subagents.models.endpoints.probe import probe_endpoint

        try:
            page = await self._sdk.models.list(timeout=min(30.0, self.timeout_s))
        except (*MODEL_ERRORS, ValueError, TypeError):  # type: ignore[misc]  # a tuple of classes
            # No model list (a gateway, a stand-in): the strictest common form will do.
            return None
        models = list(page.data)
        chosen = next((m for m in models if m.id == self.name), models[0] if models else None)
        owner = getattr(chosen, "owned_by", None)
        owner = owner if isinstance(owner, str) else None
        extra = dict(getattr(chosen, "model_extra", None) or {})
        if not self.official:
            await probe_endpoint(
                self.facts,
                base_url=self.base_url,
                model=self.name,
                owner=owner,
                listed=extra,
                headers={"Authorization": f"Bearer {self._sdk.api_key}"},
                timeout_s=min(10.0, self.timeout_s),
            )
            if self.facts.slots is not None:
                # Concurrency toward the endpoint follows its slots: a one-slot server
                # is sent one request at a time, so none waits out its timeout in line.
                limiter = limiter_of(self)
                if limiter is not None:
                    limiter.tighten(ModelLimits(concurrency=self.facts.slots))
        return owner

    async def complete(self, request: ModelRequest) -> ModelTurn:
        """One ``POST {base_url}/chat/completions``; a failure raises ModelCallFailed.

        The request is fitted to the endpoint's window first (docs/design.md §7): ``max_tokens``
        is cut to what the prompt leaves, and a prompt that leaves less than
        :data:`~subagents.models.endpoints.facts.MIN_ANSWER_TOKENS` is not sent. A refusal that
        names the window teaches it; the request is refitted and sent once more.
        """
        return await self._answer(request, None)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelTurn:
        """:meth:`complete` with ``stream: true`` (docs/design.md §8): ``on_text`` gets the text
        as it comes, the turn is gathered from the chunks (:mod:`.openai_stream`) and
        normalised as a whole answer is. Usage is asked for in the last chunk where the
        profile allows (``stream_options``); a server that never sends it is fine.
        """
        return await self._answer(request, on_text)

    async def _answer(self, request: ModelRequest, on_text: TextSink | None) -> ModelTurn:
        profile = await self.server_profile()
        estimate = estimate_tokens(request)
        request = self._fit(request, estimate)
        try:
            completion, headers = await self._create(request, profile, on_text)
        except MODEL_ERRORS as exc:
            failed = classify_model_error(
                exc, provider=self.provider, model=self.name, secrets=self._secrets()
            )
            if failed.kind == "context_length" and self._learn(failed.message, estimate):
                # Refused for its length, and the refusal named the window: refitted and
                # sent once more when the refit changed it (a prompt too long for the
                # window fails here, unsent: the caller cuts its prompt).
                refit = self._fit(request, estimate)
                if refit.max_tokens >= request.max_tokens:
                    raise failed from None
                request = refit
            elif self._may_fall_back(failed.kind, profile):
                # Refused for its shape: this server wants the strictest form (kept from now).
                profile = self._profile = PROFILES["strict"]
            else:
                raise failed from None if self._leaks(exc) else exc
            completion, headers = await self._once_more(request, profile, on_text)
        return self._turn(completion, headers, request, profile, estimate)

    async def _once_more(
        self, request: ModelRequest, profile: ServerProfile, on_text: Any
    ) -> tuple[ChatCompletion, Mapping[str, str]]:
        """The one resend of a refitted or reshaped request; its failure is final."""
        try:
            return await self._create(request, profile, on_text)
        except MODEL_ERRORS as again:
            raise classify_model_error(
                again, provider=self.provider, model=self.name, secrets=self._secrets()
            ) from None if self._leaks(again) else again

    def _turn(
        self,
        completion: ChatCompletion,
        headers: Mapping[str, str],
        request: ModelRequest,
        profile: ServerProfile,
        estimate: int,
    ) -> ModelTurn:
        turn = to_turn(
            completion,
            profile=profile,
            offered=[t.name for t in request.tools],
            used=_call_ids(request.messages),
            mint=self._mint,
        )
        written = 0
        if turn.usage is not None:
            # The server's tokens per estimated token: later estimates err on its side.
            self.facts.observe(estimate, turn.usage.input_tokens)
            written = turn.usage.output_tokens
        # What the server held: its usage may count less than it was sent (a proxy's
        # estimate, cached prompt tokens left out), so fanout's own estimate is a floor.
        prompt = max(turn.usage.input_tokens if turn.usage else 0, self.facts.tokens(estimate))
        self.facts.accepted(prompt, written)
        if turn.stop_reason == "max_tokens" and turn.usage is not None and not self.official:
            # An inferred window: a hint for max_tokens, never a reason not to send.
            self.facts.learn_from_cut(request.max_tokens, prompt, written)
        return replace(turn, rate=read_rate_headers(headers))

    def _fit(self, request: ModelRequest, estimate: int) -> ModelRequest:
        """``request`` with ``max_tokens`` cut to the room its prompt leaves in the window.

        Only a window the server stated refuses a request; an inferred one only hints
        ``max_tokens`` (:meth:`EndpointFacts.hinted_max_tokens`) and the server decides.

        Raises:
            ModelCallFailed: ``context_length``: the prompt leaves no room for an answer
                in the window the server stated (the request is not sent; the caller
                cuts its prompt).
        """
        room = self.facts.room(estimate)
        if room is None:
            hinted = self.facts.hinted_max_tokens(request.max_tokens, estimate)
            return replace(request, max_tokens=hinted) if hinted < request.max_tokens else request
        if request.max_tokens <= room:
            return request
        if room < MIN_ANSWER_TOKENS:
            raise ModelCallFailed(
                f"openai model {self.name}: not sent: a prompt of about "
                f"{self.facts.tokens(estimate)} tokens leaves no room for an answer in the "
                f"context window of {self.facts.window} tokens the endpoint stated "
                f"(from its {self.facts.window_from}; maximum context length is "
                f"{self.facts.window} tokens)",
                kind="context_length",
                category="validation",
            )
        return replace(request, max_tokens=room)

    def _learn(self, message: str, estimate: int) -> bool:
        """Keep the window a length refusal names; whether it taught something new."""
        self.facts.refusals += 1
        window, prompt = read_refusal(message)
        if prompt is not None:
            self.facts.observe(estimate, prompt)
        if window is None:
            return False
        before = self.facts.window
        self.facts.learn_window(window, "refusal")
        return before != self.facts.window or prompt is not None

    def _may_fall_back(self, kind: str, profile: ServerProfile) -> bool:
        return (
            kind == "bad_request"
            and self.profile_choice == "auto"
            and not self.official
            # The official API's form is the reference: its refusal is fanout's bug.
            and profile.name not in ("openai", "strict")
        )

    async def _create(
        self, request: ModelRequest, profile: ServerProfile, on_text: TextSink | None = None
    ) -> tuple[ChatCompletion, Mapping[str, str]]:
        options: dict[str, Any] = {self.max_tokens_param: request.max_tokens}
        if on_text is not None:
            options["stream"] = True
            if profile.stream_usage:
                options["stream_options"] = {"include_usage": True}
        tools: list[ChatCompletionToolUnionParam] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools
        ]
        if tools:
            options["tools"] = tools
        system = request.system
        forced = request.force_tool is not None and profile.named_tool_choice
        # A call forced by name is constrained by the server (llama-cpp-python: a grammar
        # of its arguments): describing the tools in words too would only cost tokens.
        if profile.tools_in_prompt and request.tools and not forced:
            system = f"{system}\n\n{tools_text(request.tools)}" if system else tools_text(
                request.tools
            )
        ask = None
        if request.force_tool is not None:
            if profile.named_tool_choice:
                options["tool_choice"] = {
                    "type": "function",
                    "function": {"name": request.force_tool},
                }
            else:
                ask = ask_in_words(request.force_tool)
        # The raw response: its headers tell the endpoint's limits (docs/design.md §13).
        raw = await self._sdk.chat.completions.with_raw_response.create(
            model=self.name,
            messages=to_messages(system, request.messages, profile, ask=ask),
            temperature=request.temperature,
            **options,
        )
        if on_text is not None:
            chunks = raw.parse()
            try:
                completion = await gather_stream(chunks, on_text)
            finally:
                await chunks.close()  # a stream cut short still gives its connection back
            return completion, raw.headers
        completion = raw.parse()
        return completion, raw.headers

    def _mint(self) -> str:
        """A tool-call id fanout owns, unique for this client's life."""
        return f"fo_call_{next(self._minted)}"

    async def aclose(self) -> None:
        """Close the SDK's connection pool."""
        await self._sdk.close()

    def _secrets(self) -> tuple[str, ...]:
        return (self._sdk.api_key,) if self._sdk.api_key else ()

    def _leaks(self, exc: BaseException) -> bool:
        """Whether the SDK error's own text holds the key (then it is not chained)."""
        return any(secret in f"{exc} {getattr(exc, 'body', '')}" for secret in self._secrets())


def _call_ids(transcript: Iterable[TranscriptMessage]) -> set[str]:
    """The tool-call ids already used in a transcript (a repeated one is minted anew)."""
    return {
        call.id
        for message in transcript
        if isinstance(message, AssistantMessage)
        for call in message.turn.calls
    }


def to_messages(
    system: str,
    transcript: Sequence[TranscriptMessage],
    profile: ServerProfile = PROFILES["openai"],
    *,
    ask: str | None = None,
) -> list[ChatCompletionMessageParam]:
    """The system prompt first, then the transcript as chat messages.

    OpenAI has no ``is_error`` on a tool result: the content is the envelope's JSON,
    whose ``isError`` says it. A profile without the system role gets the instructions
    at the head of the first user message; ``ask`` (a tool asked for in words) ends the
    conversation as a user message. User texts that follow one another (the subtask and
    a person's hint before the first turn) go as one user message: chat templates that
    insist on alternating roles take it.
    """
    out: list[dict[str, Any]] = []
    fold = system if system and not profile.system_role else ""
    if system and profile.system_role:
        out.append({"role": "system", "content": system})
    for message in transcript:
        if isinstance(message, UserMessage):
            text = f"{fold}\n\n{message.text}" if fold else message.text
            fold = ""
            if out and out[-1]["role"] == "user":
                out[-1]["content"] = f"{out[-1]['content']}\n\n{text}"
            else:
                out.append({"role": "user", "content": text})
        elif isinstance(message, ToolResultMessage):
            out.append(
                {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
            )
        else:
            out.append(_assistant(message, profile))
    if fold:
        out.insert(0, {"role": "user", "content": fold})
    if ask:
        last = out[-1] if out else None
        if last is not None and last["role"] == "user":
            last["content"] = f"{last['content']}{ask}"
        else:
            out.append({"role": "user", "content": ask.strip()})
    return cast(list[ChatCompletionMessageParam], out)


def _assistant(message: AssistantMessage, profile: ServerProfile) -> dict[str, Any]:
    turn = message.turn
    # Some servers refuse `content: null` beside tool calls (llama-cpp-python's schema
    # wants a string): those get "", which every server takes.
    empty = None if profile.null_content else ""
    out: dict[str, Any] = {"role": "assistant", "content": turn.text or empty}
    if turn.calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    # Sent back as the model wrote it, broken JSON included.
                    "arguments": (
                        json.dumps(call.arguments)
                        if call.arguments is not None
                        else call.raw_arguments or ""
                    ),
                },
            }
            for call in turn.calls
        ]
    return out
