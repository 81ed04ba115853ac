"""Configuring traces from the OTEL_* variables, and the bounded flush at exit."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from shared.errors import InputFileError
from subagents.telemetry import Telemetry, configure_from_env, tracing_requested


@pytest.mark.parametrize(
    ("env", "asked"),
    [
        pytest.param({}, None, id="nothing"),
        pytest.param({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
                     "OTEL_EXPORTER_OTLP_ENDPOINT", id="endpoint"),
        pytest.param({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"},
                     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", id="traces-endpoint"),
        pytest.param({"OTEL_TRACES_EXPORTER": "console"}, "OTEL_TRACES_EXPORTER", id="console"),
        pytest.param({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"},
                     None, id="exporter-none"),
        pytest.param({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"},
                     None, id="sdk-disabled"),
    ],
)
def test_tracing_is_on_only_when_a_variable_asks(env: dict[str, str], asked: str | None) -> None:
    """An endpoint or an exporter turns traces on; none, or the SDK switched off, does not."""
    assert tracing_requested(env) == asked


def test_the_provider_is_built_from_the_variables_without_touching_the_global(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """set_global=False: an SDK provider with the service name, batch processing, no atexit."""
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)  # the SDK reads these itself
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    telemetry = configure_from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_EXPORT_TIMEOUT": "1500"},
        set_global=False,
    )
    assert telemetry is not None
    assert telemetry.flush_timeout_s == 1.5
    assert telemetry.provider.resource.attributes["service.name"] == "fanout"
    assert telemetry.shutdown()  # nothing queued: done at once


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        pytest.param("OTEL_TRACES_EXPORTER", "jaeger", id="exporter"),
        pytest.param("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", id="protocol"),
        pytest.param("OTEL_BSP_EXPORT_TIMEOUT", "soon", id="timeout"),
    ],
)
def test_a_value_fanout_cannot_use_names_its_variable(variable: str, value: str) -> None:
    """An input error naming the variable (the CLI exits 2 with it)."""
    with pytest.raises(InputFileError) as caught:
        configure_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", variable: value},
                           set_global=False)
    assert caught.value.field == variable and caught.value.file == "environment"


class _Stuck(SpanExporter):
    """An exporter whose backend never answers, until it is shut down."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.released.wait(30)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.released.set()


def test_the_exit_flush_gives_up_in_time_on_an_exporter_that_hangs() -> None:
    """Spans queued for a backend that never answers hold the exit up for the limit only."""
    exporter = _Stuck()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    for n in range(10):
        provider.get_tracer("t").start_span(f"s{n}").end()
    began = time.monotonic()
    assert not Telemetry(provider, exporter, flush_timeout_s=0.3).shutdown()
    assert time.monotonic() - began < 5
