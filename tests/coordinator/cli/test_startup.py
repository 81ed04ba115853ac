"""A command imports what it uses: the CLI starts without the service, the stores, Temporal,
the OpenTelemetry SDK or the model SDKs, and each command loads only its own.

Each probe is a fresh interpreter (what a user starts), so nothing another test imported
counts: ``sys.modules`` after ``import coordinator.cli``, and for a whole command the
modules ``python -X importtime`` lists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

# Every probe is a process of its own.
pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[3]

# What no command loads unless it serves, stores, runs on Temporal, exports traces or
# talks to a model: the list, by top-level name or module.
HEAVY = {
    "server": ("fastapi", "uvicorn", "starlette"),
    "store backend": ("psycopg", "coordinator.store.sqlite", "coordinator.store.postgres"),
    "Temporal": ("temporalio",),
    "OpenTelemetry SDK": ("opentelemetry.sdk", "opentelemetry.exporter"),
    "model SDK": ("anthropic", "openai", "mcp"),
}
# What running a job needs and parsing arguments does not.
ENGINE = ("pydantic", "rich", "yaml", "anyio", "trio", "tiktoken", "httpx", "coordinator.engine",
          "coordinator.jobfile", "subagents.loop")
WEB = ("httpx", "httpcore")


def _env() -> dict[str, str]:
    """This tree's packages; no web search, traces or model endpoint from the caller."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "FANOUT_SEARCH"))}
    return {**env, "PYTHONPATH": str(ROOT)}


def _found(modules: Iterable[str], prefixes: Iterable[str]) -> list[str]:
    """The modules that are one of ``prefixes`` or inside one."""
    wanted = tuple(prefixes)
    return sorted(m for m in modules if m in wanted or m.startswith(tuple(p + "." for p in wanted)))


def _heavy(modules: Iterable[str]) -> dict[str, list[str]]:
    loaded = list(modules)
    return {what: found for what, names in HEAVY.items() if (found := _found(loaded, names))}


def _imported_by(*args: str, cwd: Path = ROOT) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules ``fanout ARGS`` imported, run as a whole process, and how it ended."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "coordinator.cli", *args],
        capture_output=True, text=True, cwd=cwd, env=_env(), timeout=120, check=False)
    modules = {line.split("|")[2].strip() for line in done.stderr.splitlines()
               if line.startswith("import time:") and "[us]" not in line}
    return modules, done


def test_importing_the_cli_loads_no_server_store_temporal_otel_sdk_or_model_sdk() -> None:
    """`import coordinator.cli` loads none of the heavy dependencies, nor the engine's."""
    probe = "import json, sys; import coordinator.cli; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, env=_env(), timeout=60, check=True)
    modules = json.loads(done.stdout)
    assert "coordinator.cli.main" in modules
    assert _heavy(modules) == {}
    assert _found(modules, ENGINE) == []


def test_fanout_version_parses_and_imports_nothing_of_the_engine() -> None:
    """`fanout --version` answers from the parser alone."""
    modules, done = _imported_by("--version")
    assert done.returncode == 0 and done.stdout.startswith("fanout ")
    assert _heavy(modules) == {}
    assert _found(modules, ENGINE) == []


def test_a_replay_loads_no_server_store_temporal_otel_sdk_model_sdk_or_web_client() -> None:
    """`fanout replay` of a small scenario imports what a replay uses, and passes."""
    modules, done = _imported_by("replay", "scenarios/permission_denied.yaml", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["passed"] == 1
    assert _heavy(modules) == {}
    assert _found(modules, WEB) == []
    # This scenario never needs an exact token count, so the encoding is never loaded;
    # and trio's MockClock comes without pytest (the blocked attempt at ``pytest`` is
    # listed, its package ``_pytest`` never loads).
    assert _found(modules, ("tiktoken", "_pytest")) == []


def test_a_retrieval_only_ask_on_documents_loads_no_model_sdk_or_web_client(
    tmp_path: Path,
) -> None:
    """`fanout ask --docs DIR` without a model reads the folder and the SQLite store only."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "replay.md").write_text(
        "# Replay\n\nA replay runs a scenario in virtual time: the clock jumps ahead.\n")
    (docs / "serve.md").write_text("# Serve\n\nThe service answers over HTTP.\n")
    store = str(tmp_path / "runs.sqlite")
    modules, done = _imported_by("ask", "how does a replay run in virtual time", "--docs",
                                 str(docs), "--store", store, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["outcome"] == "complete"
    heavy = _heavy(modules)
    # The run is recorded: the SQLite backend is this command's own.
    assert heavy.pop("store backend") == ["coordinator.store.sqlite"]
    assert heavy == {}
    assert _found(modules, WEB) == []
