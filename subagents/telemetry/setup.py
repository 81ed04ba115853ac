"""Exporting fanout's traces from its own commands, configured by the standard OTEL_* variables.

Only ``fanout run``/``ask``/``resume``, ``fanout worker`` and ``fanout serve`` call
:func:`configure_from_env`: they are applications, so they may set the global tracer
provider. Library code never does (docs/design.md §13): a Python user brings their own provider.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
is set, or ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp`` or ``console``); it stays
off with ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. Spans go through a
BatchSpanProcessor (its queue is bounded, ``OTEL_BSP_MAX_QUEUE_SIZE``, default 2048; when
it is full spans are dropped, never waited for), so an exporter that is slow or down never
slows a run; at exit the queue is flushed for at most :data:`FLUSH_TIMEOUT_S` seconds.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.errors import InputFileError

FLUSH_TIMEOUT_S = 5.0
"""How long fanout's commands wait at exit for the last spans to be exported; the
standard ``OTEL_BSP_EXPORT_TIMEOUT`` (milliseconds) may shorten or lengthen it."""

_EXPORTERS = ("otlp", "console", "none")
_ENV = "environment"  # where a bad OTEL_* value was read (the "file" of its input error)
_log = logging.getLogger(__name__)


class TelemetryUnavailable(RuntimeError):
    """The OTEL_* variables ask for traces but the ``otel`` extra is not installed."""

    def __init__(self, variable: str) -> None:
        super().__init__(
            f"{variable} is set but the OpenTelemetry SDK is not installed: "
            "pip install 'fanout[otel]' to export traces (the run goes on without them)"
        )


@dataclass
class Telemetry:
    """An SDK tracer provider fanout's command set up, with its exporter."""

    provider: Any  # opentelemetry.sdk.trace.TracerProvider
    exporter: Any  # the span exporter behind its BatchSpanProcessor
    flush_timeout_s: float = FLUSH_TIMEOUT_S

    def shutdown(self) -> bool:
        """Flush what is queued and stop, within ``flush_timeout_s``; True if it finished.

        The SDK's own flush blocks until the exporter gives up (its retries run to
        ``OTEL_EXPORTER_OTLP_TIMEOUT``, for each batch); here it runs in a daemon thread
        that is left behind, its retries aborted, when the time is up.
        """
        worker = threading.Thread(target=self.provider.shutdown, name="fanout-otel-flush",
                                  daemon=True)
        worker.start()
        worker.join(self.flush_timeout_s)
        if worker.is_alive():
            self.exporter.shutdown()  # aborts the exporter's retry wait: spans left are dropped
            return False
        return True


def tracing_requested(environ: Mapping[str, str] | None = None) -> str | None:
    """The variable that asks for traces, or None when nothing does (or tracing is off)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return None
    if exporter:
        return "OTEL_TRACES_EXPORTER"
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if env.get(name, "").strip():
            return name
    return None


def configure_from_env(
    environ: Mapping[str, str] | None = None, *, set_global: bool = True
) -> Telemetry | None:
    """Set up tracing as the OTEL_* variables ask; None when they ask for nothing.

    Raises:
        InputFileError: a variable holds a value fanout cannot use (an unknown exporter,
            the gRPC protocol): exit 2 before anything runs, naming the variable.
        TelemetryUnavailable: traces are asked for but the SDK is not installed.
    """
    env = os.environ if environ is None else environ
    variable = tracing_requested(env)
    if variable is None:
        return None
    exporter_name = env.get("OTEL_TRACES_EXPORTER", "").strip().lower() or "otlp"
    if "," in exporter_name or exporter_name not in _EXPORTERS:
        raise InputFileError(
            _ENV, None, "OTEL_TRACES_EXPORTER", f"one of {', '.join(_EXPORTERS)}",
            got=repr(exporter_name),
        )
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
    if exporter_name == "otlp" and protocol != "http/protobuf":
        raise InputFileError(
            _ENV, None, "OTEL_EXPORTER_OTLP_PROTOCOL",
            "http/protobuf (fanout exports OTLP over HTTP)", got=repr(protocol),
        )
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError as exc:
        raise TelemetryUnavailable(variable) from exc
    exporter: Any
    if exporter_name == "console":
        # Spans to stderr: stdout is the report (and --json's document).
        exporter = ConsoleSpanExporter(out=sys.stderr)
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise TelemetryUnavailable(variable) from exc
        exporter = OTLPSpanExporter()  # endpoint, headers, timeout: from the OTEL_* variables
    resource = Resource.create()  # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource.create({"service.name": "fanout"}))
    # No atexit hook of the SDK's own: its flush would wait on an exporter that is down.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if set_global:
        from opentelemetry import trace

        trace.set_tracer_provider(provider)
    timeout = FLUSH_TIMEOUT_S
    raw = env.get("OTEL_BSP_EXPORT_TIMEOUT", "").strip()
    if raw:
        try:
            timeout = max(0.0, float(raw) / 1000)
        except ValueError:
            raise InputFileError(
                _ENV, None, "OTEL_BSP_EXPORT_TIMEOUT", "milliseconds (a number)", got=repr(raw)
            ) from None
    return Telemetry(provider, exporter, timeout)
