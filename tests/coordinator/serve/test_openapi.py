"""The OpenAPI document tells the truth: schemathesis, stateful phase included, against a
real `fanout serve`, finds no server error and no mismatch between the document and
what the service does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.coordinator.serve.conftest import Server, start_server

# What JSON Schema cannot say about a job (a plan calling an undeclared tool, two subtasks
# with one id) the loader answers with 422 and its lines, as the document says: a
# schema-valid job may be refused for that, or wait its turn (503) under load.
CONFIG = """\
max-stream-events = 8
request-timeout = 20.0

[generation]
max-examples = {examples}

[phases.stateful]
max-steps = 6

[[operations]]
include-operation-id = "submit_run"
checks.positive_data_acceptance.expected-statuses = ["201", "422", "503"]
# The coverage phase's positive boundary values of a job (thousands of them, nearly all
# refused for a cross-reference) take minutes; its negative ones keep the 422 path under
# test, and the fuzzing and stateful phases send schema-valid jobs.
phases.coverage.generation.mode = "negative"

# An ask is refused (422, with the field) for what its schema cannot say either: no tools
# at all (neither docs, web nor a tools file), a model the server does not have.
[[operations]]
include-operation-id = "ask"
checks.positive_data_acceptance.expected-statuses = ["201", "422", "503"]
"""


def schemathesis(
    server: Server, tmp_path: Path, *, examples: int
) -> subprocess.CompletedProcess[str]:
    """Run the schemathesis CLI against the served document; its output."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG.format(examples=examples))
    st = Path(sys.executable).with_name("st")
    return subprocess.run(
        [str(st), "--config-file", str(config), "run", f"{server.url}/openapi.json",
         "-H", f"Authorization: Bearer {server.token}", "--workers", "1",
         "--phases", "examples,coverage,fuzzing,stateful", "--seed", "1",
         "--checks", "all", "--no-color"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False,
    )


@pytest.mark.timeout(300)  # a few thousand requests: about 30 s on an idle machine
def test_schemathesis_finds_the_served_api_as_its_document_says(tmp_path: Path) -> None:
    """Every phase passes; the stateful phase follows the links from POST /runs."""
    server = start_server(tmp_path, "--max-runs", "4")
    try:
        done = schemathesis(server, tmp_path, examples=5)
    finally:
        assert server.stop() == 0
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Stateful" in done.stdout and "0 covered" not in done.stdout
    assert "Traceback" not in server.log.read_text()
