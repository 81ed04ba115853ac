"""What ``fanout mcp`` is started with: the operator's model, documents, search and limits.

A request chooses none of these (docs/design.md §16): it may name a folder only among those the
operator serves (``--docs``), ask for the web only through the operator's backend
(``--search``), and never start an MCP command.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from coordinator.api.run import ExecutorName
from coordinator.jobfile.research import ResearchPolicy, served_folder

MAX_JOB_BYTES: Final = 1 << 20  # a run_job's YAML, as POST /runs takes a job file (≤ 1 MiB)
MAX_QUESTION_CHARS: Final = 4000  # as POST /ask
MAX_SUBTASKS: Final = 50  # as POST /ask
# What the store names as the job file of a run of this door: which tool made it, and
# the mark by which a restarted `fanout mcp` knows the runs that are its to resume.
STORED_FILES: Final = {"ask": "fanout mcp ask", "run_job": "fanout mcp run_job"}


class ArgumentRefused(Exception):
    """A tool's arguments cannot be used: each line names the field, what it expects and
    what it got (answered as an MCP tool error, never a traceback)."""


def refused(field: str, expected: str, got: str | None = None) -> ArgumentRefused:
    """``field: expected EXPECTED, got GOT``, worded as fanout's input errors are."""
    said = f"{field}: expected {expected}"
    return ArgumentRefused(said if got is None else f"{said}, got {got}")


@dataclass(frozen=True, slots=True)
class DoorConfig:
    """The operator's settings of one ``fanout mcp`` (the CLI's flags)."""

    store: str
    # The folders requests may read with docs.* (`--docs`, repeatable); none: no documents.
    docs: tuple[Path, ...] = ()
    # The web backend of `web: true` (`--search`, else the server's FANOUT_SEARCH).
    search: str | None = None
    # The model of `ask` (`--model`); None: a retrieval-only answer.
    model: str | None = None
    # The operator's tools file's text (`--tools`): tools, research_tools, a model block.
    tools_text: str | None = None
    max_runs: int = 4
    max_queued: int = 256
    # How long `ask` and `run_job` wait for the run by default (None: until it ends); the
    # run goes on after, and get_report(run_id) reads it.
    wait_s: float | None = None
    # What the server logs to stderr (`--log-level`): critical, error, warning, info, debug.
    log_level: str = "warning"
    # Where runs run (`--executor`, docs/design.md §15): this process, or Temporal's workers at
    # `temporal` (address, namespace, task_queue), which must reach the store.
    executor: ExecutorName = "local"
    temporal: Mapping[str, str] | None = None

    def web_backend(self) -> str | None:
        """The search backend of ``web: true``: ``--search``, else ``FANOUT_SEARCH``."""
        return self.search or os.environ.get("FANOUT_SEARCH") or None

    def served_folder(self, asked: str | None) -> str | None:
        """The folder a request's ``docs`` names: absolute or relative to the first served
        folder, resolved (symlinks too), inside a served one; ``None`` asks for the first.

        Every refusal reads the same and echoes only what the request wrote: a client
        learns nothing of the server's file system beyond the folders it serves.

        Raises:
            ArgumentRefused: no folder is served, or ``asked`` is not inside one.
        """
        if not self.docs:
            if asked is None:
                return None
            raise refused("docs", "no docs: the server was started without --docs",
                                  repr(asked))
        if asked is None:
            return str(self.docs[0].resolve())
        folder = served_folder(asked, self.docs)
        if folder is None:
            raise refused("docs", "a folder the server serves (fanout mcp --docs), absolute or "
                          "relative to the first one", repr(asked))
        return folder

    def research_policy(self) -> ResearchPolicy:
        """What a run_job's research tools may name: documents under the served folders
        (a relative path under the first), no private address for the web."""
        roots = tuple(p.resolve() for p in self.docs)
        return ResearchPolicy(docs_roots=roots, private=False,
                              docs_base=roots[0] if roots else None)
