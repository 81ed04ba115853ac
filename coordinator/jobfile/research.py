"""Jobs with the built-in research tools: open them for a run, under the rules of where it runs.

:func:`job_research_tools` opens a scenario's ``research_tools`` for one run (the folder
indexed first when its index is missing or stale); the run serves them next to the
job's simulated and MCP tools (one :func:`~subagents.toolsource.combine`). A
:class:`ResearchPolicy` says what the place the job runs allows: on the command line a
job may read any folder, and any address when the user asked for it
(``--allow-private-fetch``; a file cannot: the loader refuses ``allow_private: true``);
``fanout serve`` allows the web but never private addresses, and documents only under
the folders it was started with.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordinator.jobfile.scenario import Scenario
from shared.errors import InputFileError, InputFileErrors
from subagents.research.spec import ResearchToolsSpec, resolve_docs_folder

if TYPE_CHECKING:
    # The tools load httpx, trafilatura and pypdf: only when a job opens them.
    import httpx

    from subagents.research.guard import Dialler, Resolver
    from subagents.research.tools import ResearchTools

__all__ = [
    "PlacedResearch",
    "ResearchPolicy",
    "check_research_policy",
    "job_research_tools",
    "placed_research_tools",
    "served_folder",
]


@dataclass(frozen=True)
class ResearchPolicy:
    """What a job's research tools may do where the job runs.

    ``docs_roots`` None allows any folder; a tuple allows only folders inside one of
    them (empty: no documents at all). ``private`` False refuses private addresses
    whatever anyone asks, and guards the search backend's address too;
    ``allow_private_fetch`` is the user's own permission for ``web.fetch`` to read them
    (``--allow-private-fetch``, or Python's ``allow_private_fetch=True``). The resolver,
    dialler and transport are the seams tests use to run a loopback web.
    """

    docs_roots: tuple[Path, ...] | None = None
    private: bool = True
    allow_private_fetch: bool = False
    # Where a relative docs.path is resolved (None: the job file's folder). The service
    # resolves a submitted job's relative path under the first folder it serves.
    docs_base: Path | None = None
    # The search endpoint the place itself configured (`serve --search searxng:URL`): a
    # job using exactly it is not guarded, so an operator's SearXNG on loopback works;
    # any other endpoint a job names is (with ``private`` False).
    trusted_search_url: str | None = None
    resolver: Resolver | None = None
    dial: Dialler | None = None
    transport: httpx.AsyncBaseTransport | None = None
    env: Mapping[str, str] | None = None


def _base_dir(scenario: Scenario, policy: ResearchPolicy | None = None) -> Path | None:
    if policy is not None and policy.docs_base is not None:
        return policy.docs_base
    return Path(scenario.source).parent if scenario.source else None


def check_research_policy(scenario: Scenario, policy: ResearchPolicy) -> list[InputFileError]:
    """What of the scenario's ``research_tools`` the policy forbids, with the file's lines."""
    spec = scenario.research_tools
    if spec is None or spec.docs is None or policy.docs_roots is None:
        return []
    folder = resolve_docs_folder(spec.docs.path, _base_dir(scenario, policy))
    roots = [r.resolve() for r in policy.docs_roots]
    if any(folder.is_relative_to(root) for root in roots):
        return []
    # The served folders are not named: a client learns nothing of the server's paths.
    allowed = "a folder under one the server serves (serve --docs)" if roots else (
        "no docs: the server was started without --docs")
    return [
        InputFileError(
            scenario.source or scenario.scenario,
            scenario.line_of(("research_tools", "docs", "path")),
            "research_tools.docs.path",
            allowed,
            got=repr(spec.docs.path),
        )
    ]



@dataclass(frozen=True)
class PlacedResearch:
    """A job's research tools as the place it runs opens them."""

    spec: ResearchToolsSpec
    """The block, ``web.fetch``'s ``allow_private`` the user's own choice where allowed."""
    base_dir: Path | None
    """Where a relative ``docs.path`` resolves (the job file's folder, or the policy's)."""
    guard_search: bool
    """Whether the search backend's address is guarded too (``fanout serve``)."""


def placed_research_tools(
    scenario: Scenario, policy: ResearchPolicy | None = None
) -> PlacedResearch | None:
    """The scenario's ``research_tools`` under ``policy`` (None: it declares none); a
    local run opens them at once, a Temporal run sends them to its workers.

    Raises:
        InputFileErrors: the policy forbids the folder.
    """
    spec = scenario.research_tools
    if spec is None:
        return None
    policy = policy or ResearchPolicy()
    problems = check_research_policy(scenario, policy)
    if problems:
        raise InputFileErrors(problems)
    allow = policy.private and policy.allow_private_fetch
    if spec.web is not None and spec.web.fetch.allow_private != allow:
        # Private addresses only by the user's own act, where the place allows them.
        fetch = spec.web.fetch.model_copy(update={"allow_private": allow})
        spec = spec.model_copy(update={"web": spec.web.model_copy(update={"fetch": fetch})})
    return PlacedResearch(spec, _base_dir(scenario, policy),
                          not policy.private and not _trusted(spec, policy))


@asynccontextmanager
async def job_research_tools(
    scenario: Scenario, store_dir: Path, policy: ResearchPolicy | None = None
) -> AsyncIterator[ResearchTools | None]:
    """The scenario's research tools, open for a run (None when it declares none).

    Raises:
        InputFileErrors: the policy forbids the folder, a key is unset, the folder is missing.
    """
    placed = placed_research_tools(scenario, policy)
    if placed is None:
        yield None
        return
    policy = policy or ResearchPolicy()
    from subagents.research.tools import open_research_tools

    try:
        opened = open_research_tools(
            placed.spec,
            base_dir=placed.base_dir,
            store_dir=store_dir,
            env=policy.env,
            resolver=policy.resolver,
            dial=policy.dial,
            transport=policy.transport,
            guard_search=placed.guard_search,
        )
        async with opened as tools:
            yield tools
    except InputFileError as exc:
        if isinstance(exc, InputFileErrors) or exc.file != "research_tools":
            raise
        field = f"research_tools.{exc.field}"
        where = tuple(field.split("."))
        raise InputFileErrors(
            [
                InputFileError(
                    scenario.source or scenario.scenario, scenario.line_of(where), field,
                    exc.expected, got=exc.got,
                )
            ]
        ) from None


def _trusted(spec: Any, policy: ResearchPolicy) -> bool:
    web = spec.web
    url = policy.trusted_search_url
    return bool(web is not None and url and web.url and web.url.rstrip("/") == url.rstrip("/"))


def served_folder(asked: str, served: Sequence[Path]) -> str | None:
    """The folder a request names (absolute, or relative to the first of the ``served``
    folders), resolved (symlinks too), when it is a folder inside one of them; else None.

    ``fanout serve``'s POST /ask and ``fanout mcp``'s ask both ask this, and each gives
    one refusal for every None (a missing folder, one outside, a symlink out of them, a
    file): a client learns nothing of the server's file system beyond what it serves.
    """
    if not served:
        return None
    candidate = Path(asked)
    try:
        folder = (candidate if candidate.is_absolute() else served[0] / candidate).resolve()
        inside = any(folder.is_relative_to(root.resolve()) for root in served)
        return str(folder) if inside and folder.is_dir() else None
    except (OSError, RuntimeError, ValueError):  # a loop of links, a NUL in the name
        return None
