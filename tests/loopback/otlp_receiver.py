"""A loopback OTLP/HTTP trace receiver: it takes ``POST /v1/traces`` as a collector does
and decodes what it got with ``opentelemetry-proto``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.loopback._server import LoopbackServer, RecordedRequest, Reply


@dataclass(frozen=True)
class ExportedSpan:
    """One span as it arrived: ids in hex, attributes decoded to Python values."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    attributes: dict[str, Any]
    scope: str
    schema_url: str
    service: str


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    return None if which is None else getattr(v, which)


class OtlpReceiver(LoopbackServer):
    """Answers every export with an empty ExportTraceServiceResponse (success)."""

    path = "/v1/traces"

    def default_reply(self, request: RecordedRequest) -> Reply:
        """A collector's success answer, in protobuf."""
        body = ExportTraceServiceResponse().SerializeToString()
        return Reply(200, body, headers={"content-type": "application/x-protobuf"})

    def spans(self) -> list[ExportedSpan]:
        """Every span of every export received so far, decoded."""
        out: list[ExportedSpan] = []
        for request in self.requests:
            export = ExportTraceServiceRequest()
            export.ParseFromString(request.body)
            for rs in export.resource_spans:
                resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        out.append(ExportedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            status_code=span.status.code,
                            status_message=span.status.message,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            scope=ss.scope.name,
                            schema_url=ss.schema_url,
                            service=str(resource.get("service.name", "")),
                        ))
        return out
