"""One run's telemetry in one hook: its spans and its metrics, chained onto its observers.

The coordinator calls :func:`instrumented_run` around a run and passes on the observer
and result hook it gets back; everything else about telemetry stays in this wing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from subagents.result import ProgressEvent, ProgressObserver, SubagentResult
from subagents.telemetry.metrics import RunMetrics, current_metrics
from subagents.telemetry.semconv import capture_content_from_env

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from subagents.models.spec import ModelSpec
    from subagents.telemetry.spans import RouteOf, RunTracer

ResultHook = Callable[[SubagentResult], Awaitable[None]]


def _tracing(provider: TracerProvider | None) -> bool:
    """Whether spans would go anywhere (:func:`~subagents.telemetry.spans.tracing_enabled`),
    without importing OpenTelemetry where they cannot: with no provider given, a global
    one exists only once the API is imported (an application set it) or named in
    ``OTEL_PYTHON_TRACER_PROVIDER``. A run that traces nothing (a replay) spares the
    API's import and its scan of entry points."""
    if (provider is None and "opentelemetry.trace" not in sys.modules
            and not os.environ.get("OTEL_PYTHON_TRACER_PROVIDER")):
        return False
    from subagents.telemetry.spans import tracing_enabled

    return tracing_enabled(provider)


@dataclass
class InstrumentedRun:
    """The observer and result hook to run with, and the tracer to tell the outcome."""

    observer: ProgressObserver | None
    on_result: ResultHook | None
    tracer: RunTracer | None = None

    def outcome(self, outcome: str, coverage: float, subtasks: int, gaps: int) -> None:
        """The run's report is in: its outcome goes on the job span."""
        if self.tracer is not None:
            self.tracer.job_done(outcome, coverage, subtasks, gaps)


@contextmanager
def instrumented_run(
    *,
    job: str,
    query: str,
    run_id: str | None,
    model: ModelSpec | None,
    route: RouteOf | None,
    observer: ProgressObserver | None,
    on_result: ResultHook | None,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool | None = None,
    job_span: bool = True,
) -> Iterator[InstrumentedRun]:
    """Spans (when a provider is given or set globally) and metrics (when on) for a run.

    Args:
        job: the job's name; query: its question (a span attribute only with content on).
        run_id: the recorded run's id, if it is recorded.
        model: the job's model block.
        route: the route of an escalation (the routing table of the job).
        observer, on_result: the caller's own, called first.
        tracer_provider: where spans go; the global provider by default.
        capture_content: put content into spans; by default as
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says.
        job_span: open the job's ``invoke_agent lead`` span (a Temporal round runs inside
            its activity's span instead).
    """
    tracer: RunTracer | None = None
    if _tracing(tracer_provider):
        from subagents.telemetry.spans import RunTracer, tracer_of

        tracer = RunTracer(
            tracer_of(tracer_provider),
            run_id=run_id,
            model=model,
            capture_content=(
                capture_content_from_env() if capture_content is None else capture_content
            ),
            route=route,
        )
    metrics = current_metrics()
    counted = RunMetrics(metrics) if metrics is not None else None
    if tracer is None and counted is None:
        yield InstrumentedRun(observer, on_result)
        return
    sinks = [s for s in (observer, tracer and tracer.observe, counted and counted.observe) if s]

    def observe(event: ProgressEvent) -> None:
        for sink in sinks:
            sink(event)

    hook = on_result
    if tracer is not None:
        finished = tracer.finished

        async def traced(result: SubagentResult) -> None:
            if on_result is not None:
                await on_result(result)
            finished(result)

        hook = traced
    with ExitStack() as stack:
        if counted is not None:
            stack.callback(counted.close)
        if tracer is not None:
            if job_span:
                stack.enter_context(tracer.job(job, query))
            else:
                stack.callback(tracer.close)
        yield InstrumentedRun(observe, hook, tracer)


def activity_tracer(
    *,
    run_id: str,
    model: ModelSpec | None,
    route: RouteOf | None = None,
    tracer_provider: TracerProvider | None = None,
) -> RunTracer | None:
    """Spans for a part of a run that runs elsewhere (a Temporal activity): they hang
    under the current span (the activity's, which continues the run's trace); None when
    nothing is traced."""
    if not _tracing(tracer_provider):
        return None
    from subagents.telemetry.spans import RunTracer, tracer_of

    return RunTracer(tracer_of(tracer_provider), run_id=run_id, model=model,
                     capture_content=capture_content_from_env(), route=route)


@contextmanager
def job_span(
    *,
    job: str,
    query: str,
    run_id: str,
    model: ModelSpec | None,
    tracer_provider: TracerProvider | None = None,
) -> Iterator[RunTracer | None]:
    """The job's ``invoke_agent lead`` span around submitting it elsewhere (Temporal):
    current while the block runs, so the submission's own spans, and through them the
    workflow's and the activities', join its trace."""
    tracer = activity_tracer(run_id=run_id, model=model, tracer_provider=tracer_provider)
    if tracer is None:
        yield None
        return
    with tracer.job(job, query):
        yield tracer
