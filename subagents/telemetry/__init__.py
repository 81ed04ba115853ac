"""Telemetry (docs/design.md §13): OpenTelemetry GenAI spans of a run, and Prometheus metrics.

Spans are built in one place (:mod:`.spans`) from the progress events every run already
emits; the names follow one pinned release of the GenAI semantic conventions
(:data:`SEMCONV_VERSION`). Only the ``opentelemetry-api`` is required: with no provider
configured nothing is built. fanout's own commands configure the SDK from the OTEL_*
variables (:func:`configure_from_env`); library code never sets the global provider.
"""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.telemetry.metrics import (
        FanoutMetrics,
        RunMetrics,
        current_metrics,
        enable_metrics,
        record_event_delivery,
        record_limiter_wait,
        reset_metrics,
    )
    from subagents.telemetry.semconv import (
        CAPTURE_CONTENT_ENV,
        SEMCONV_VERSION,
        capture_content_from_env,
        tool_kind,
    )
    from subagents.telemetry.setup import (
        FLUSH_TIMEOUT_S,
        Telemetry,
        TelemetryUnavailable,
        configure_from_env,
        tracing_requested,
    )
    from subagents.telemetry.spans import RunTracer, tracer_of, tracing_enabled

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "FLUSH_TIMEOUT_S",
    "SEMCONV_VERSION",
    "FanoutMetrics",
    "RunMetrics",
    "RunTracer",
    "Telemetry",
    "TelemetryUnavailable",
    "capture_content_from_env",
    "configure_from_env",
    "current_metrics",
    "enable_metrics",
    "record_event_delivery",
    "record_limiter_wait",
    "reset_metrics",
    "tool_kind",
    "tracer_of",
    "tracing_enabled",
    "tracing_requested",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.telemetry.metrics": (
        "FanoutMetrics", "RunMetrics", "current_metrics", "enable_metrics", "record_event_delivery",
        "record_limiter_wait", "reset_metrics",
    ),
    "subagents.telemetry.semconv": (
        "CAPTURE_CONTENT_ENV", "SEMCONV_VERSION", "capture_content_from_env", "tool_kind",
    ),
    "subagents.telemetry.setup": (
        "FLUSH_TIMEOUT_S", "Telemetry", "TelemetryUnavailable", "configure_from_env",
        "tracing_requested",
    ),
    "subagents.telemetry.spans": ("RunTracer", "tracer_of", "tracing_enabled"),
})
