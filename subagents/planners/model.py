"""The model-driven planner: a model plans the subtask through the same loop and gate.

Each tool call the model makes is one logical call of the loop (allowlist, arguments,
gate, ``execute_tool_safely``); its final envelope goes back as the tool result. The
calls of one turn are proposed in order; the loop may take several at once and run them
together (:meth:`ModelPlanner.more_calls`, docs/design.md §7 "Parallel calls"), and their results
come back in the order the model asked. When every one has its result, the model is
asked again. A turn without a tool call ends the subtask with its
text as a finding. What the model gets wrong (an invented tool, arguments that are not
a JSON object or fail the schema, a bad ``escalate``) goes back to it as a validation
envelope; the tool never runs. A model call that fails for good becomes the escalation
docs/design.md §7's table gives it.

The transcript is the subagent's context: the tool results the model sees are the
context's messages (truncated to the active tool budget, or a compaction summary), so
compaction shortens them while every tool call keeps its result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from shared.categories import Trigger
from shared.envelope import Finding, ToolError
from subagents.executor import ExecEvent
from subagents.jitter import DeferredRandom
from subagents.models.base import (
    AssistantMessage,
    ModelClient,
    ModelRequest,
    ModelTurn,
    ToolCall,
    ToolResultMessage,
    TranscriptMessage,
    UserMessage,
)
from subagents.models.call import MODEL_TOOL, call_model
from subagents.models.endpoints.facts import SAFETY_TOKENS, EndpointFacts, fitted_max_tokens
from subagents.models.spec import ModelSpec
from subagents.models.spend import Spent, TokenMeter, add_spent, counted
from subagents.planners.base import (
    Action,
    CallAction,
    EscalateAction,
    FinishAction,
    Observation,
    PlanEnv,
)
from subagents.planners.failures import budget_spent, model_failure
from subagents.planners.prompt import (
    ESCALATE_SCHEMA,
    ESCALATE_TOOL,
    MODEL_TRIGGERS,
    catalogue_text,
    system_prompt,
    tool_specs,
)
from subagents.planners.search import is_search, probe_endpoint_of
from subagents.planners.transcript import (
    Entry,
    ResultEntry,
    action_in,
    action_out,
    call_in,
    call_out,
    entry_in,
    entry_out,
)
from subagents.planners.turns import REPEATS, TurnCalls, signature
from subagents.schema import validate


@runtime_checkable
class Seekable(Protocol):
    """A client whose answers depend on how many calls a subtask made (the scripted one)."""

    def seek(self, subtask_id: str, position: int) -> None:
        """Continue subtask ``subtask_id`` at its ``position``-th call."""
        ...



REMINDER = (
    "No tool has answered this subtask yet: a claim counts only when one of your tools "
    "returned it. Call one of your tools now, or call `escalate` saying why you cannot."
)
"""The one reminder a model gets when it ends its turn without evidence (docs/design.md §7)."""

SILENCE_REMINDER = "You answered nothing. Answer the subtask, or call `escalate` saying why."
"""The reminder of a subtask without tools whose model said nothing."""

HINT_INTRO = "A person supervising this research says: "
"""How a person's hint reaches the model: a user message that says plainly who speaks
(docs/design.md §17), never mistaken for the subtask or a tool's result."""

@dataclass
class ModelPlanner(TurnCalls):
    """Plans one subtask with a model; its transcript is its state (checkpointable)."""

    # A person's hints reach its model before its next turn (PlanEnv.hints).
    reads_hints: ClassVar[bool] = True

    client: ModelClient
    model: ModelSpec
    subtask_id: str
    seed: object = 0
    entries: list[Entry] = field(default_factory=list)
    queue: list[ToolCall] = field(default_factory=list)
    # The calls proposed and not answered yet, in the turn's order: one, or the calls of
    # a turn that run together.
    awaiting: list[CallAction] = field(default_factory=list)
    calls_made: int = 0
    model_attempts: int = 0
    # Coverage is evidence (docs/design.md §7): ok envelopes of real tools, whether the model was
    # reminded to use them, and how often each exact call returned ok.
    evidence: int = 0
    reminded: bool = False
    ok_calls: dict[str, int] = field(default_factory=dict)
    refused_last: bool = False
    said: str = ""  # what the model wrote before its reminder
    # The job's token meter (and budget), shared with every subagent and the lead.
    meter: TokenMeter | None = field(default=None, compare=False)
    # What this subtask's model calls spent ([in, out, calls]): checkpointed with the
    # transcript, so a resumed run's meter starts from it (job.budget).
    spent: Spent = field(default_factory=lambda: [0, 0, 0])
    # Search first (docs/design.md §7): a subtask that may call a search starts with it, on its
    # own query, before the model's first turn (job.search_first: auto).
    search_first: bool = False
    refitted: bool = False
    # The model turns answered so far: a hint read now is read at turn ``turns + 1``.
    turns: int = 0
    rng: DeferredRandom = field(init=False)

    def __post_init__(self) -> None:
        # Waits between model attempts draw from their own stream (docs/design.md §7), made only
        # when first drawn.
        self.rng = DeferredRandom(f"{self.seed}/{self.subtask_id}/model")

    async def next_action(self, last: Observation | None, env: PlanEnv) -> Action | None:
        """The next tool call of the current turn, or the model's next turn."""
        if not self.entries:
            self._start(env)
            first = self._search_first(env)
            if first is not None:
                return first
        if last is not None:
            self._take(last, len(env.context.messages) - 1)
        if self.awaiting:
            # The retry round (or a resume): the call that failed is made again, then
            # the calls of its turn that had no result either.
            return self.awaiting[0]
        if self.queue:
            return self._propose(self.queue.pop(0))
        return await self._ask(env)

    def _start(self, env: PlanEnv) -> None:
        specs = tool_specs(env.spec, env.tools)
        # The instructions and the tool schemas go with every call: the context counts them.
        env.context.add_text("system", system_prompt(env.spec) + "\n" + catalogue_text(specs))
        self.entries.append(UserMessage(env.spec.query))

    def _search_first(self, env: PlanEnv) -> Action | None:
        """The subtask's own query sent to its first search tool, as the model's first call.

        A real call (allowlist, schema, gate, retry, trace, recording), written into the
        transcript as a call the model made, so the model's first turn reads the results
        and then reads, refines or answers. A strong model saves a turn; a weak one gets
        evidence to work from.
        """
        if not self.search_first:
            return None
        name = next((n for n in env.spec.tools if n in env.tools and is_search(env.tools[n])), None)
        if name is None:
            return None
        call = ToolCall(f"fo_search_{self.subtask_id}"[:64], name, {"query": env.spec.query})
        self.entries.append(AssistantMessage(ModelTurn(calls=(call,), stop_reason="tool_use")))
        return self._propose(call)

    def _window(self) -> int | None:
        facts = getattr(self.client, "facts", None)
        return facts.window if isinstance(facts, EndpointFacts) else None

    def _fit(self, env: PlanEnv) -> int:
        """This subtask's ``max_tokens``, with its context fitted to the endpoint's window.

        Where the endpoint's window is known (docs/design.md §7, "Fitting a local server"), the
        answer gets at most a quarter of it, and the gate holds the transcript to the rest
        (in the context's tokens); each tool result gets at most a quarter of that.
        """
        facts = getattr(self.client, "facts", None)
        if not isinstance(facts, EndpointFacts):
            return self.model.max_tokens
        window = facts.window
        max_tokens = fitted_max_tokens(self.model.max_tokens, window, local=facts.local)
        if window is None:
            return max_tokens
        room = int((window - max_tokens - SAFETY_TOKENS) / facts.ratio)
        if room > 0:
            env.context.fit(room, max(1, room // 4))
        return max_tokens

    def transcript(self, env: PlanEnv) -> list[TranscriptMessage]:
        """The provider-neutral transcript; tool results as the context holds them now."""
        messages = env.context.messages
        out: list[TranscriptMessage] = []
        for entry in self.entries:
            if isinstance(entry, ResultEntry):
                text = messages[entry.index].text if entry.index < len(messages) else ""
                out.append(ToolResultMessage(entry.call_id, entry.name, text, entry.is_error))
            else:
                out.append(entry)
        return out

    async def _ask(self, env: PlanEnv) -> Action | None:
        spent = None if self.meter is None else self.meter.subagents_stop()
        if spent is not None:
            return budget_spent(spent)
        await probe_endpoint_of(self.client)
        self._hear(env)
        max_tokens = self._fit(env)
        if env.context.tokens > env.context.window:
            # The window learned since (a refusal) is smaller than the transcript: old
            # results are summarised before the model is asked again.
            env.context.compact()
        request = ModelRequest(
            system=system_prompt(env.spec),
            messages=self.transcript(env),
            tools=tool_specs(env.spec, env.tools),
            max_tokens=max_tokens,
            temperature=self.model.temperature,
            subtask_id=self.subtask_id,
        )
        trace_id = env.trace_ids.next(self.subtask_id)
        env.trace_sink(trace_id)

        def observe(event: ExecEvent) -> None:
            if event.kind == "start":
                self.model_attempts += 1
            env.observer(event)

        env.set_state("thinking")
        result, turn = await call_model(
            self.client,
            request,
            spec=self.model,
            clock=env.clock,
            rng=self.rng,
            trace_id=trace_id,
            observer=observe,
            on_limit_wait=lambda waiting: env.set_state("throttled" if waiting else "thinking"),
        )
        env.set_state("running")
        if turn is None:
            if result.error_type == "context_length" and not self.refitted and self._window():
                # The endpoint named its window in a refusal (or the client found the
                # prompt too long for it, unsent): the transcript is fitted to it and the
                # model asked once more (docs/design.md §7).
                self.refitted = True
                return await self._ask(env)
            return model_failure(result, self.model)
        self.turns += 1
        usage = counted(turn, request, self.client.provider)
        if usage is not None:
            add_spent(self.spent, usage)
            if self.meter is not None:
                self.meter.spend(self.subtask_id, usage)
        if turn.usage is not None:
            # The provider's own tokenizer counted what was sent (docs/design.md §7).
            env.context.calibrate(turn.usage.input_tokens)
        if turn.text or turn.calls:
            # An empty turn is not sent back: some APIs refuse an empty assistant message.
            self.entries.append(AssistantMessage(turn))
        if turn.text:
            env.context.add_text("assistant", turn.text)
        if turn.stop_reason == "refusal":
            return EscalateAction(
                "model_refusal", turn.text or f"the model refused subtask {self.subtask_id!r}"
            )
        if not turn.calls:
            if turn.stop_reason == "max_tokens":
                # Cut off: kept as partial data (incomplete_data); it claims no coverage.
                return FinishAction(turn.text, tool=MODEL_TOOL, complete=False)
            return await self._ended(turn, env)
        self.queue = list(turn.calls)
        return self._propose(self.queue.pop(0))

    def _hear(self, env: PlanEnv) -> None:
        """What a person said since the last turn, added as user messages for this one.

        It follows the last turn's tool results (Anthropic sends both in one user
        message, results first; OpenAI a user message after the tool messages), so every
        provider's turn order stays valid; the context counts it like the reminder.
        """
        for text in env.hints(self.turns + 1):
            said = HINT_INTRO + text
            self.entries.append(UserMessage(said, hint=True))
            env.context.add_text("user", said)

    async def _ended(self, turn: ModelTurn, env: PlanEnv) -> Action | None:
        """A turn without a tool call: the answer, if the subtask's tools backed it.

        A subtask with tools is covered only by an ok envelope of one of them; a model that
        ends without one (its own words, or silence) is reminded once, then the subtask is
        a gap with trigger ``no_evidence`` and its text in ``partial_results``. A subtask
        without tools is covered by its text; its silence is reminded, then a gap too.
        """
        needs_tools = bool(env.spec.tools)
        if self.refused_last:
            # Answering instead of correcting a refused call: the loop escalates it as
            # no_progress, naming the field (docs/design.md §3); a reminder would hide that.
            return FinishAction(turn.text, tool=MODEL_TOOL)
        if (not needs_tools or self.evidence) and turn.text.strip():
            return FinishAction(turn.text, tool=MODEL_TOOL)
        if needs_tools and self.evidence:
            # It has evidence and nothing to add: its findings speak for it.
            return FinishAction("", tool=MODEL_TOOL)
        if not self.reminded:
            self.reminded = True
            self.said = turn.text.strip()
            reminder = REMINDER if needs_tools else SILENCE_REMINDER
            self.entries.append(UserMessage(reminder))
            env.context.add_text("user", reminder)
            return await self._ask(env)
        said = turn.text.strip() or self.said
        partial = (Finding(tool=MODEL_TOOL, data={"text": said}, complete=False),) if said else ()
        if needs_tools:
            how = "answered in its own words" if said else "said nothing"
            message = (
                f"the model {how} without calling any of its tools "
                f"({', '.join(env.spec.tools)}), even after a reminder"
            )
        else:
            message = "the model said nothing, even after a reminder"
        return EscalateAction("no_evidence", message, partial=partial)

    def _propose(self, call: ToolCall) -> Action:
        if (
            call.arguments is not None
            and self.ok_calls.get(signature(call.name, call.arguments), 0) >= REPEATS
        ):
            # The same call answered ok twice already: a third adds nothing (docs/design.md §7).
            self.queue.clear()
            shown = json.dumps(call.arguments, separators=(",", ":"), ensure_ascii=False)
            return EscalateAction(
                "no_progress",
                f"{call.name} {shown[:200]} was called a third time after two ok answers",
                category="validation",  # the same input again: routed as a gap
                alternatives=(f"answer from the {call.name} results already found",),
            )
        self.calls_made += 1
        step = self.calls_made - 1
        invalid: ToolError | None = None
        args = call.arguments
        if args is None:
            sent = call.raw_arguments if call.raw_arguments is not None else ""
            invalid = ToolError.of(
                "validation",
                "invalid_arguments",
                f"{call.name}: the arguments are not a JSON object: {sent[:200]!r}",
                field="arguments",
                expected="a JSON object",
            )
            args = {"$raw": sent}
        elif call.name == ESCALATE_TOOL:
            violation = validate(args, ESCALATE_SCHEMA)
            if violation is None:
                return EscalateAction(
                    _trigger(args["trigger"]),
                    str(args["message"]),
                    alternatives=tuple(str(a) for a in args.get("alternatives") or ()),
                )
            invalid = ToolError.of(
                "validation",
                "invalid_argument",
                f"escalate: {violation.message}",
                field=violation.field,
                expected=violation.expected,
            )
        action = CallAction(call.name, dict(args), step, call_id=call.id, invalid=invalid)
        self.awaiting.append(action)
        return action

    def snapshot(self) -> dict[str, Any]:
        """The transcript and position, for a run store to resume from."""
        version, internal, gauss = self.rng.getstate()
        return {
            "entries": [entry_out(e) for e in self.entries],
            "queue": [call_out(c) for c in self.queue],
            "awaiting": [action_out(a) for a in self.awaiting],
            "calls_made": self.calls_made,
            "model_attempts": self.model_attempts,
            "rng": [version, list(internal), gauss],
            "evidence": self.evidence,
            "reminded": self.reminded,
            "ok_calls": dict(self.ok_calls),
            "refused_last": self.refused_last,
            "said": self.said,
            "spent": list(self.spent),
            "turns": self.turns,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`snapshot`."""
        self.entries = [entry_in(e) for e in state["entries"]]
        self.queue = [call_in(c) for c in state["queue"]]
        awaiting = state["awaiting"]
        if isinstance(awaiting, dict):  # a checkpoint from before turns ran together
            awaiting = [awaiting]
        self.awaiting = [action_in(a) for a in awaiting or ()]
        self.calls_made = int(state["calls_made"])
        self.model_attempts = int(state["model_attempts"])
        self.evidence = int(state.get("evidence", 0))
        self.reminded = bool(state.get("reminded", False))
        self.ok_calls = {str(k): int(v) for k, v in (state.get("ok_calls") or {}).items()}
        self.refused_last = bool(state.get("refused_last", False))
        self.said = str(state.get("said", ""))
        # A checkpoint from before turns were counted: each answered turn it sent back.
        self.turns = int(state.get("turns", sum(isinstance(e, AssistantMessage)
                                                for e in self.entries)))
        # A checkpoint written before tokens were counted spent nothing we know of.
        self.spent = [int(n) for n in state.get("spent", [0, 0, 0])]
        if self.meter is not None:
            # The job's meter starts from what this subtask spent before it stopped.
            self.meter.record(self.subtask_id, self.spent)
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        if isinstance(self.client, Seekable):
            self.client.seek(self.subtask_id, self.model_attempts)


def _trigger(value: str) -> Trigger:
    assert value in MODEL_TRIGGERS
    return value  # type: ignore[return-value]  # checked against the closed list above
