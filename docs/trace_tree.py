"""Print one run's OpenTelemetry trace as a tree: the spans a tracing backend would show.

Replays a scenario in virtual time with an SDK tracer provider of its own (in-memory
exporter, nothing leaves the process) and prints every span under its parent, with the
attributes that say what happened. The README's trace is its output:

    .venv/bin/python docs/trace_tree.py scenarios/research_lead.yaml
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from coordinator.jobfile.loader import load_scenario
from coordinator.replay import run_scenario
from shared.clock import run_in_virtual_time

# What each line shows, when the span has it (gen_ai.* and fanout.* attributes).
SHOWN = (
    ("fanout.outcome", "outcome"),
    ("fanout.coverage", "coverage"),
    ("fanout.round", "round"),
    ("fanout.attempt", "attempt"),
    ("fanout.wait_s", "waited"),
    ("gen_ai.usage.input_tokens", "in"),
    ("gen_ai.usage.output_tokens", "out"),
    ("fanout.trace_id", ""),
    ("error.type", "error.type"),
    ("fanout.error_type", ""),
    ("fanout.trigger", "trigger"),
    ("fanout.route", "route"),
)


def spans_of(path: Path) -> list[ReadableSpan]:
    """Replay the scenario at ``path``; every span it made."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    scenario = load_scenario(path)
    run_in_virtual_time(functools.partial(run_scenario, scenario, tracer_provider=provider))
    return list(exporter.get_finished_spans())


def _label(span: ReadableSpan) -> str:
    attrs = span.attributes or {}
    parts = []
    for key, name in SHOWN:
        if key in attrs:
            value = attrs[key]
            if isinstance(value, float):
                value = f"{value:g}"
            parts.append(f"{name}={value}" if name else str(value))
    mark = "✗ " if span.status.status_code is StatusCode.ERROR else ""
    return f"{mark}{span.name}" + (f"  [{' '.join(parts)}]" if parts else "")


def render(spans: Sequence[ReadableSpan]) -> str:
    """The spans as an indented tree, children in the order they started."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)
    for group in children.values():
        group.sort(key=lambda s: s.start_time or 0)
    lines: list[str] = []

    def walk(span: ReadableSpan, prefix: str, last: bool, top: bool) -> None:
        lines.append(_label(span) if top else f"{prefix}{'└── ' if last else '├── '}"
                     f"{_label(span)}")
        below = children.get(span.context.span_id if span.context else None, [])
        inner = "" if top else prefix + ("    " if last else "│   ")
        for i, child in enumerate(below):
            walk(child, inner, i == len(below) - 1, False)

    for root in children.get(None, []):
        walk(root, "", True, True)
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Print the trees of the scenario files named in ``argv``."""
    for name in argv or ["scenarios/research_lead.yaml"]:
        sys.stdout.write(render(spans_of(Path(name))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
