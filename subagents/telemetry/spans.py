"""A run's GenAI spans, built in one place from the progress events every run emits.

:class:`RunTracer` is a progress observer (the seam the live view, the run store and
``fanout trace`` already hear): it turns each subagent's ``state``/``start``/``wait``/
``attempt`` events into spans, so nothing in the loop, the executor or the model clients
knows about OpenTelemetry. The tree of one run (one trace)::

    invoke_agent lead                  the job (the lead agent), root of the run's trace
    ├── chat claude-sonnet-4-5         the lead's model attempts (decomposition, synthesis)
    ├── invoke_agent market            one per subagent and round
    │   ├── chat claude-sonnet-4-5     one per model attempt
    │   └── execute_tool web_search    one per tool attempt (simulated, MCP, built-in)
    └── invoke_agent patents …

Subagent spans are children of the job span, attempt spans children of their subagent's:
parents are passed explicitly, never read from the current context, because subagents
run concurrently and the observer is called from inside each of them.

Content (tool results, the model's text and tool calls, exception and error messages)
goes into a span only when the run's ``capture_content`` is on
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``); without it a span says what
happened — category, error type, trigger, route, counts — and never what was said.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import Token
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from shared.envelope import ToolResult
from shared.escalation import Escalation
from subagents.models.spec import ModelSpec
from subagents.result import LEAD, ProgressEvent, SubagentResult
from subagents.telemetry import semconv as sc
from subagents.telemetry.content import clip as _clip
from subagents.telemetry.content import model_response as _model_response
from subagents.telemetry.content import output_messages as _output_messages
from subagents.telemetry.content import server_of as _server
from subagents.telemetry.content import to_json as _json

RouteOf = Callable[[Escalation], str]
_log = logging.getLogger(__name__)


def tracer_of(provider: TracerProvider | None = None) -> Tracer:
    """fanout's tracer from ``provider``, or from the global provider when none is given.

    fanout never sets the global provider itself (the application does, or
    :func:`subagents.telemetry.configure_from_env` in fanout's own commands).
    """
    return trace.get_tracer(
        sc.INSTRUMENTATION_NAME,
        _version(),
        tracer_provider=provider,
        schema_url=sc.SCHEMA_URL,
    )


def tracing_enabled(provider: TracerProvider | None) -> bool:
    """Whether spans would go anywhere: an explicit provider, or a global one the
    application set (the API's default proxy means nobody did, and fanout skips the
    work of building spans that nobody exports)."""
    if provider is not None:
        return True
    return not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


@dataclass
class _Agent:
    span: Span | None = None
    context: otel_context.Context | None = None
    attempt: Span | None = None
    wait_s: float | None = None
    step: int | None = None
    args: Any = None
    token: Token[otel_context.Context] | None = None  # the attempt made current
    trigger: str | None = None
    rounds: int = 0
    extra: dict[str, AttributeValue] = field(default_factory=dict)


class RunTracer:
    """Builds one run's spans from its progress events (use :meth:`observe` as observer).

    Args:
        tracer: where spans go (:func:`tracer_of`).
        run_id: the run's id (``fanout.run_id``, ``gen_ai.conversation.id``); None for
            a replay that is not recorded.
        model: the job's model block (request model, provider, server); None without one.
        capture_content: put content into spans (see the module docstring).
        route: the route of an escalation (the coordinator's routing table).
        parent: the context the run's spans hang under; by default the current one
            (a Temporal activity's span, an application's own span).
    """

    def __init__(
        self,
        tracer: Tracer,
        *,
        run_id: str | None = None,
        model: ModelSpec | None = None,
        capture_content: bool = False,
        route: RouteOf | None = None,
        parent: otel_context.Context | None = None,
    ) -> None:
        self.tracer = tracer
        self.run_id = run_id
        self.model = model
        self.capture = capture_content
        self.route = route
        self.root = parent if parent is not None else otel_context.get_current()
        self.job_span: Span | None = None
        self.agents: dict[str, _Agent] = {}

    # -- the job ------------------------------------------------------------------------

    @contextmanager
    def job(self, name: str, query: str) -> Iterator[Span]:
        """The job's ``invoke_agent lead`` span, current while the block runs; an error
        escaping the block (a bug, a server that cannot start) ends it ``ERROR``."""
        attrs = self._common(LEAD)
        attrs.update({sc.OPERATION: "invoke_agent", sc.AGENT_NAME: LEAD, sc.JOB: name})
        if self.capture:
            attrs["fanout.query"] = _clip(query)
        span = self.tracer.start_span(
            f"invoke_agent {LEAD}", context=self.root, kind=SpanKind.INTERNAL, attributes=attrs
        )
        self.job_span = span
        self.root = trace.set_span_in_context(span, self.root)
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False,
                                set_status_on_exception=False):
                yield span
        except Exception as exc:
            self._fail(span, type(exc).__qualname__, exc)
            raise
        finally:
            self.close()
            span.end()

    def job_done(self, outcome: str, coverage: float, subtasks: int, gaps: int) -> None:
        """Put the report's outcome on the job span (``ERROR`` when nothing was found)."""
        span = self.job_span
        if span is None:
            return
        span.set_attributes(
            {sc.OUTCOME: outcome, sc.COVERAGE: coverage, sc.SUBTASKS: subtasks, sc.GAPS: gaps}
        )
        if outcome == "failed":
            span.set_attribute(sc.ERROR_TYPE, "failed")
            span.set_status(Status(StatusCode.ERROR, "no subtask found anything"))

    # -- progress events ----------------------------------------------------------------

    def observe(self, event: ProgressEvent) -> None:
        """The progress observer: one event in, spans started or ended. Never raises:
        a bug here loses spans, never a run (docs/design.md §13)."""
        try:
            self._observe(event)
        except Exception:  # telemetry must not fail the run it watches
            _log.exception("fanout telemetry: a span was lost")

    def _observe(self, event: ProgressEvent) -> None:
        sid = event.subtask_id
        kind = event.kind
        if kind == "start":
            self._start_attempt(sid, event)
        elif kind == "attempt":
            self._end_attempt(sid, event.result)
        elif kind == "wait":
            self._agent(sid).wait_s = event.wait_s
        elif kind == "call":
            agent = self._agent(sid)
            agent.step = event.step
            agent.args = event.args
        elif kind == "state" and sid != LEAD:
            if event.state in ("running", "thinking", "retrying"):
                self._open_agent(sid)
            elif event.state == "escalated":
                self._agent(sid).trigger = event.trigger

    def finished(self, result: SubagentResult) -> None:
        """End a subagent's span for this round with its result (the coordinator calls
        this as it counts the result); a subagent that never started gets one too.
        Never raises, like :meth:`observe`."""
        try:
            self._finished(result)
        except Exception:  # telemetry must not fail the run it watches
            _log.exception("fanout telemetry: a span was lost")

    def _finished(self, result: SubagentResult) -> None:
        sid = result.subtask_id
        if sid == LEAD:
            return
        agent = self._open_agent(sid)
        span = agent.span
        assert span is not None
        self._end_open_attempt(agent)
        attrs: dict[str, AttributeValue] = {
            sc.FINDINGS: len(result.findings),
            sc.ATTEMPTS: result.attempts,
            "fanout.steps": result.steps,
        }
        esc = result.escalation
        if esc is not None:
            attrs[sc.TRIGGER] = esc.trigger
            if self.route is not None:
                attrs[sc.ROUTE] = self.route(esc)
            # A subagent that escalated did not do its subtask: the span is an error whose
            # type is the errorCategory, or the trigger for escalations without one
            # (deadline, step_budget, no_evidence …), both closed vocabularies.
            error_type = esc.category or esc.trigger
            attrs[sc.ERROR_TYPE] = error_type
            if esc.category is not None:
                attrs[sc.IS_RETRYABLE] = esc.retryable
            span.set_status(Status(StatusCode.ERROR, _clip(esc.message) if self.capture
                                   else error_type))
        span.set_attributes(attrs)
        span.end()
        agent.span = None
        agent.context = None
        agent.trigger = None

    def close(self) -> None:
        """End every span still open (a run cut short); safe to call more than once."""
        for agent in self.agents.values():
            self._end_open_attempt(agent)
            if agent.span is not None:
                agent.span.set_attribute("fanout.cut", True)
                agent.span.end()
                agent.span = None

    # -- internals ----------------------------------------------------------------------

    def _common(self, sid: str) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {sc.SUBTASK_ID: sid}
        if self.run_id is not None:
            attrs[sc.RUN_ID] = self.run_id
            attrs[sc.CONVERSATION_ID] = self.run_id
        return attrs

    def _agent(self, sid: str) -> _Agent:
        agent = self.agents.get(sid)
        if agent is None:
            agent = self.agents[sid] = _Agent()
        return agent

    def _open_agent(self, sid: str) -> _Agent:
        agent = self._agent(sid)
        if agent.span is None and sid != LEAD:
            agent.rounds += 1
            attrs = self._common(sid)
            attrs.update({sc.OPERATION: "invoke_agent", sc.AGENT_NAME: sid, sc.ROUND: agent.rounds})
            if self.run_id is not None:
                attrs[sc.AGENT_ID] = f"{self.run_id}/{sid}"
            self._model_request(attrs)
            agent.span = self.tracer.start_span(
                f"invoke_agent {sid}", context=self.root, kind=SpanKind.INTERNAL, attributes=attrs
            )
            agent.context = trace.set_span_in_context(agent.span, self.root)
        return agent

    def _model_request(self, attrs: dict[str, AttributeValue]) -> None:
        model = self.model
        if model is None:
            return
        attrs[sc.PROVIDER] = sc.PROVIDER_NAMES.get(model.provider, model.provider)
        if model.name:
            attrs[sc.REQUEST_MODEL] = model.name

    def _start_attempt(self, sid: str, event: ProgressEvent) -> None:
        agent = self._agent(sid)
        self._end_open_attempt(agent)
        parent = self.root if sid == LEAD else self._open_agent(sid).context
        tool = event.tool or "?"
        attrs = self._common(sid)
        attrs[sc.ATTEMPT] = event.attempt or 1
        if agent.wait_s is not None:
            attrs[sc.WAIT_S] = agent.wait_s
            agent.wait_s = None
        kind = sc.tool_kind(tool)
        if agent.step is not None and kind != "model":
            attrs[sc.STEP] = agent.step
        attrs[sc.TOOL_KIND] = kind
        if kind == "model":
            attrs[sc.OPERATION] = "chat"
            self._model_request(attrs)
            model = self.model
            if model is not None:
                attrs[sc.REQUEST_MAX_TOKENS] = model.max_tokens
                attrs[sc.REQUEST_TEMPERATURE] = model.temperature
                attrs.update(_server(model.base_url))
            name = f"chat {model.name if model is not None and model.name else 'model'}"
            span_kind = SpanKind.CLIENT
        else:
            attrs.update({
                sc.OPERATION: "execute_tool",
                sc.TOOL_NAME: tool,
                sc.TOOL_TYPE: sc.tool_type(kind),
            })
            if self.capture and agent.args is not None:
                attrs[sc.TOOL_CALL_ARGUMENTS] = _clip(_json(agent.args))
            name = f"execute_tool {tool}"
            span_kind = SpanKind.INTERNAL
        span = self.tracer.start_span(name, context=parent, kind=span_kind, attributes=attrs)
        agent.attempt = span
        # The attempt runs in the task that emitted this event, until its "attempt" event
        # in the same task: made current meanwhile, the spans of what it calls (the
        # provider SDK's own, an HTTP client's) and limiter waits hang under it.
        agent.token = otel_context.attach(trace.set_span_in_context(span, parent))

    def _end_attempt(self, sid: str, result: ToolResult | None) -> None:
        agent = self._agent(sid)
        span = agent.attempt
        if span is None:
            return
        agent.attempt = None
        if agent.token is not None:
            otel_context.detach(agent.token)
            agent.token = None
        if result is not None:
            self._result_attributes(span, result)
        span.end()

    def _end_open_attempt(self, agent: _Agent) -> None:
        # An attempt's token belongs to its own task's context: never detached from here
        # (that task was cancelled, and its context went with it).
        agent.token = None
        if agent.attempt is not None:
            # An attempt cut by the deadline or a cancel: it counts, and it ended unfinished.
            agent.attempt.set_attribute("fanout.cut", True)
            agent.attempt.end()
            agent.attempt = None

    def _result_attributes(self, span: Span, result: ToolResult) -> None:
        attrs: dict[str, AttributeValue] = {}
        if result.trace_id:
            attrs[sc.TRACE_ID] = result.trace_id
            if result.tool != "model":
                attrs[sc.TOOL_CALL_ID] = result.trace_id
        model_call = result.tool == "model"
        data = result.data if isinstance(result.data, dict) else None
        if result.ok:
            attrs[sc.EMPTY] = result.empty
            attrs[sc.COMPLETE] = result.complete
            if model_call and data is not None:
                _model_response(attrs, data)
                if self.capture:
                    attrs[sc.OUTPUT_MESSAGES] = _clip(_output_messages(data))
            elif self.capture:
                attrs[sc.TOOL_CALL_RESULT] = _clip(_json(result.data))
            span.set_attributes(attrs)
            return
        category = result.category or "internal"
        attrs[sc.ERROR_TYPE] = category
        attrs[sc.IS_RETRYABLE] = result.retryable
        if result.error_type:
            attrs[sc.ERROR_TYPE_FANOUT] = result.error_type
        if result.changed_state == "unknown":
            attrs["fanout.changed_state"] = "unknown"
        if result.field:
            attrs["fanout.field"] = result.field
        span.set_attributes(attrs)
        description = result.message if self.capture and result.message else category
        span.set_status(Status(StatusCode.ERROR, _clip(description or category)))

    def _fail(self, span: Span, error_type: str, exc: Exception) -> None:
        span.set_attribute(sc.ERROR_TYPE, error_type)
        if self.capture:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, _clip(str(exc))))
        else:
            span.set_status(Status(StatusCode.ERROR, error_type))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fanout")
    except PackageNotFoundError:
        return "0"
