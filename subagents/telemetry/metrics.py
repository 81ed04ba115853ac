"""fanout's Prometheus metrics: one registry per process, fed by runs, served by ``fanout serve``.

Metrics are off until a process turns them on (:func:`enable_metrics`; ``fanout serve``
does), so a library user or a replay pays nothing and no process-wide registry fills
behind anyone's back. ``prometheus_client`` comes with the ``otel`` extra; without it
:func:`enable_metrics` returns None and every ``record_*`` function does nothing.

What other parts feed:

- a run's progress events, through :class:`RunMetrics` (the coordinator wires it):
  attempts by tool kind and errorCategory, 429s, subagents by state;
- the provider limiter (docs/design.md §13): :func:`record_limiter_wait` per wait;
- the service: event delivery latency (:func:`record_event_delivery`); runs, the queue
  and the open event streams are read at scrape time (:meth:`FanoutMetrics.watch_service`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

from subagents.result import ProgressEvent
from subagents.telemetry.semconv import tool_kind

# Subagent states a subagent is in while its run goes on (done and escalated are final).
LIVE_STATES = ("queued", "running", "thinking", "retrying")
_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_DELIVERY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

RunCounts = Callable[[], Mapping[tuple[str, str], int]]


class FanoutMetrics:
    """The process's metrics, on a registry of their own (not prometheus_client's global)."""

    def __init__(self, prom: ModuleType) -> None:
        _prom = prom  # prometheus_client, imported only once metrics are on (CLI start-up)
        self._prom = prom
        self.registry = _prom.CollectorRegistry(auto_describe=True)
        r = self.registry
        self.attempts = _prom.Counter(
            "fanout_attempts", "Tool and model attempts, by tool kind and errorCategory "
            "(category \"none\" for a success).", ["kind", "category"], registry=r)
        self.rate_limited = _prom.Counter(
            "fanout_rate_limited", "Attempts answered 429 (rate limited), by tool kind.",
            ["kind"], registry=r)
        self.subagents = _prom.Gauge(
            "fanout_subagents", "Subagents of running runs, by state.", ["state"], registry=r)
        self.subagents_finished = _prom.Counter(
            "fanout_subagents_finished", "Subagent rounds that ended, by final state.",
            ["state"], registry=r)
        self.limiter_wait = _prom.Histogram(
            "fanout_limiter_wait_seconds", "Time a call waited for the provider limiter, "
            "by model endpoint.", ["endpoint"], buckets=_WAIT_BUCKETS, registry=r)
        self.sse_clients = _prom.Gauge(
            "fanout_sse_clients", "Open event streams (GET /runs/{id}/events).", registry=r)
        self.event_delivery = _prom.Histogram(
            "fanout_event_delivery_seconds", "From a live event's publication to its "
            "write on an event stream.", buckets=_DELIVERY_BUCKETS, registry=r)
        for state in LIVE_STATES:
            self.subagents.labels(state=state).set(0)
        self._service: Any = None

    def watch_service(
        self, counts: RunCounts, queue_depth: Callable[[], int], streams: Callable[[], int]
    ) -> None:
        """Read runs by (status, outcome), the queue depth and the open event streams at
        every scrape (one service per process: a second call replaces the first)."""
        if self._service is not None:
            self.registry.unregister(self._service)
        self._service = _runs_collector(counts, queue_depth)
        self.registry.register(self._service)
        self.sse_clients.set_function(lambda: float(streams()))

    def render(self) -> tuple[bytes, str]:
        """The Prometheus text exposition of every metric, and its content type."""
        return self._prom.generate_latest(self.registry), self._prom.CONTENT_TYPE_LATEST


def _runs_collector(counts: RunCounts, queue_depth: Callable[[], int]) -> Any:
    """A collector of runs by status and outcome, and of the service's queue, read when
    scraped."""
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector

    class RunsCollector(Collector):
        def collect(self) -> Iterator[Any]:
            runs = GaugeMetricFamily(
                "fanout_runs", "Runs in the store, by status and outcome (\"\" while running).",
                labels=["status", "outcome"])
            for (status, outcome), n in sorted(counts().items()):
                runs.add_metric([status, outcome], n)
            yield runs
            yield GaugeMetricFamily(
                "fanout_queue_depth", "Runs admitted but waiting for a slot (--max-runs).",
                value=queue_depth())

        def describe(self) -> Iterable[Any]:
            return []  # read at scrape time only

    return RunsCollector()


_METRICS: FanoutMetrics | None = None


def enable_metrics() -> FanoutMetrics | None:
    """Turn this process's metrics on (once) and return them; None without prometheus_client."""
    global _METRICS
    if _METRICS is None:
        try:
            import prometheus_client
        except ImportError:  # the otel extra is not installed: metrics stay off
            return None
        _METRICS = FanoutMetrics(prometheus_client)
    return _METRICS


def current_metrics() -> FanoutMetrics | None:
    """The process's metrics if they are on."""
    return _METRICS


def reset_metrics() -> None:
    """Turn metrics off again (a service that stops; tests)."""
    global _METRICS
    _METRICS = None


def record_limiter_wait(endpoint: str, seconds: float) -> None:
    """A call waited ``seconds`` for the provider limiter of ``endpoint`` (a model's base
    URL or provider name): feeds ``fanout_limiter_wait_seconds``, and adds a
    ``fanout.limiter_wait`` event to the current span (the model attempt that waited, when
    the run is traced). Cheap when neither is on; call it for every wait, zero included."""
    # Looked up, not imported: without the API imported no span can be recording, and
    # importing it costs a process that traces nothing (a replay) a scan of entry points.
    trace = sys.modules.get("opentelemetry.trace")
    span = trace.get_current_span() if trace is not None else None
    if span is not None and span.is_recording():
        span.add_event("fanout.limiter_wait", {"fanout.endpoint": endpoint,
                                               "fanout.wait_s": max(0.0, seconds)})
    m = _METRICS
    if m is not None:
        m.limiter_wait.labels(endpoint=endpoint).observe(max(0.0, seconds))


def record_event_delivery(seconds: float) -> None:
    """A live event reached an event stream ``seconds`` after it was published."""
    m = _METRICS
    if m is not None:
        m.event_delivery.observe(max(0.0, seconds))


class RunMetrics:
    """A run's progress observer that feeds the process's metrics; :meth:`close` at its end
    takes its subagents out of the live gauge."""

    def __init__(self, metrics: FanoutMetrics) -> None:
        self.metrics = metrics
        self.states: dict[str, str] = {}

    def observe(self, event: ProgressEvent) -> None:
        """The progress observer."""
        m = self.metrics
        if event.kind == "attempt" and event.result is not None:
            result = event.result
            kind = tool_kind(result.tool)
            m.attempts.labels(kind=kind, category=result.category or "none").inc()
            if result.error_type == "rate_limited":
                m.rate_limited.labels(kind=kind).inc()
        elif event.kind == "state" and event.state is not None:
            self._move(event.subtask_id, event.state)

    def _move(self, sid: str, state: str) -> None:
        m = self.metrics
        before = self.states.get(sid)
        if before == state:
            return
        if before is not None:
            m.subagents.labels(state=before).dec()
        if state in LIVE_STATES:
            self.states[sid] = state
            m.subagents.labels(state=state).inc()
        else:
            self.states.pop(sid, None)
            m.subagents_finished.labels(state=state).inc()

    def close(self) -> None:
        """The run ended: its subagents leave the live gauge."""
        for state in self.states.values():
            self.metrics.subagents.labels(state=state).dec()
        self.states.clear()
