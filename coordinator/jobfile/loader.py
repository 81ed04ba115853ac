"""Reading scenario files: every problem reported with file, line, field path and expectation.

A file is parsed with its positions (:mod:`coordinator.jobfile.yamlpos`), the job's defaults
are merged into each subtask (built-in ← ``job.defaults`` ← the subtask's own keys,
``retry`` key by key), the result is validated by the models of
:mod:`coordinator.jobfile.scenario`, and what the models cannot see is checked here: duplicate
subtask ids, plan steps of no kind, tools that are called or allowed but not defined,
``expect`` entries naming no subtask. Nothing is reported one at a time: a file's
problems are raised together, in line order, as :class:`~shared.errors.InputFileErrors`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from coordinator.jobfile.errors import STEP_KINDS, Suggestions, listing, suggest, translate
from coordinator.jobfile.limits import check_values
from coordinator.jobfile.model_block import (
    check_model_block,
    followup_ids,
    mark_planners,
    without_keys,
)
from coordinator.jobfile.people import check_people
from coordinator.jobfile.scenario import Scenario, scenario_json_schema
from coordinator.jobfile.yamlpos import (
    FieldPath,
    ParsedYaml,
    collector_paused,
    format_path,
    parse_yaml,
    show,
)
from shared.errors import InputFileError, InputFileErrors
from subagents.mcp.spec import SERVER_NAME_PATTERN
from subagents.result import LEAD
from subagents.spec import SubtaskSettings

__all__ = ["load_scenario", "load_scenario_text", "scenario_json_schema"]

_SETTINGS_KEYS = tuple(SubtaskSettings.model_fields)
_KIND_LIST = ", ".join(STEP_KINDS)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate the scenario file at ``path``.

    Raises:
        InputFileErrors: the file cannot be read, is not YAML, or does not describe a
            scenario; each problem names the file, line, field path and expectation.
    """
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _file_problem(file, "an existing scenario file", "no such file") from None
    except IsADirectoryError:
        raise _file_problem(file, "a scenario file", "a directory") from None
    except UnicodeDecodeError as exc:
        got = f"a byte that is not UTF-8 at offset {exc.start}"
        line = exc.object[: exc.start].count(b"\n") + 1
        error = InputFileError(file, line, "<file>", "a UTF-8 text file", got=got)
        raise InputFileErrors([error]) from None
    except OSError as exc:
        raise _file_problem(file, "a readable scenario file", exc.strerror or str(exc)) from None
    # Nothing made while loading is garbage before the load ends (yamlpos explains).
    with collector_paused():
        return load_scenario_text(text, file)


def load_scenario_text(text: str, file: str) -> Scenario:
    """Validate scenario YAML ``text`` read from ``file`` (named in every error).

    Raises:
        InputFileErrors: every problem with the text, in line order.
    """
    try:
        parsed = parse_yaml(text, file)
    except InputFileError as exc:
        raise InputFileErrors([exc]) from None
    data = parsed.data
    if not isinstance(data, dict):
        got = "an empty document" if data is None else show(data)
        line = parsed.line_of(()) or 1
        expected = "a mapping with scenario, job and tools"
        raise InputFileErrors([InputFileError(file, line, "<document>", expected, got=got)])

    unholdable = check_values(parsed, file)
    if unholdable:
        # Data a job cannot hold (not JSON, too deep, an alias bomb) is reported alone:
        # validating it would only expand or re-raise it.
        raise InputFileErrors(_in_line_order([*parsed.problems, *unholdable]))
    problems = list(parsed.problems)
    problems += _check_references(data, parsed, file)
    problems += check_model_block(data, parsed, file)
    problems += check_people(data, parsed, file)
    prepared = {**without_keys(data), "source": file}
    if "job" in data:
        prepared["job"] = mark_planners(_merge_defaults(data["job"]), "model" in data)
    scenario: Scenario | None = None
    try:
        scenario = Scenario.model_validate(prepared, strict=True)
    except ValidationError as exc:
        problems += translate(exc, Scenario, prepared, parsed, file)
    if problems or scenario is None:
        raise InputFileErrors(_in_line_order(problems))
    # What opening the run may still refuse is named by its line without a second read.
    research = data.get("research_tools")
    for path in [*scenario.run_checked_paths(), *_paths_in(research, ("research_tools",))]:
        at = parsed.line_of(path)
        if at is not None:
            scenario._lines[path] = at
    return scenario


def _paths_in(value: Any, path: FieldPath) -> list[FieldPath]:
    """``path`` and the path of every field under it in ``value`` (a small block)."""
    if isinstance(value, dict):
        return [path, *(p for k, v in value.items() for p in _paths_in(v, (*path, str(k))))]
    if isinstance(value, list):
        return [path, *(p for i, v in enumerate(value) for p in _paths_in(v, (*path, i)))]
    return [path]


def _file_problem(file: str, expected: str, got: str) -> InputFileErrors:
    return InputFileErrors([InputFileError(file, None, "<file>", expected, got=got)])


def _in_line_order(problems: list[InputFileError]) -> list[InputFileError]:
    unique: dict[tuple[int | None, str, str, str | None], InputFileError] = {}
    for p in problems:
        unique.setdefault((p.line, p.field, p.expected, p.got), p)
    return sorted(unique.values(), key=lambda p: (p.line or 0, p.field))


def _merge_defaults(job: Any) -> Any:
    """The job with every subtask's settings merged over the job's defaults.

    Invalid defaults are reported where they are written (``job.defaults``), so the
    merge then starts from the built-in defaults rather than copying the mistake into
    every subtask.
    """
    if not isinstance(job, dict) or not isinstance(job.get("subtasks"), list):
        return job
    raw_defaults = job.get("defaults", {})
    try:
        base = SubtaskSettings.model_validate(
            raw_defaults if isinstance(raw_defaults, dict) else {}, strict=True
        )
    except ValidationError:
        base = SubtaskSettings()
    # The validated defaults themselves, not a dump of them: a subtask that overrides
    # nothing shares the job's RetryPolicy object (validation keeps an instance as it is)
    # instead of validating a copy of it per subtask.
    inherited = {key: getattr(base, key) for key in _SETTINGS_KEYS}
    inherited_retry = base.retry.model_dump()
    subtasks = []
    for sub in job["subtasks"]:
        if not isinstance(sub, dict):
            subtasks.append(sub)
            continue
        merged = {**inherited, **sub}
        if isinstance(sub.get("retry"), dict):
            merged["retry"] = {**inherited_retry, **sub["retry"]}
        subtasks.append(merged)
    return {**job, "subtasks": subtasks}


def declared_research_tools(block: Any) -> list[str]:
    """The tool names a raw ``research_tools`` block declares (docs/design.md §10)."""
    if not isinstance(block, dict):
        return []
    names: list[str] = []
    web = block.get("web")
    if isinstance(web, dict):
        if web.get("search"):
            names.append("web.search")
        names.append("web.fetch")
    if isinstance(block.get("docs"), dict):
        names += ["docs.search", "docs.read"]
    return names


class _Checker:
    """The cross-references a model cannot see, checked on the file's raw data."""

    def __init__(self, data: dict[Any, Any], parsed: ParsedYaml, file: str) -> None:
        self.parsed = parsed
        self.file = file
        self.problems: list[InputFileError] = []
        tools = data.get("tools", {})
        self.tools: set[str] | None = {str(k) for k in tools} if isinstance(tools, dict) else None
        servers = data.get("mcp_servers")
        self.servers = {str(k) for k in servers} if isinstance(servers, dict) else set()
        self.research = set(declared_research_tools(data.get("research_tools")))
        # Sorted and compared once per file, not once per call of an undefined tool.
        self.known = sorted(self.tools or ())
        self.suggest_tool = Suggestions(sorted({*self.known, *self.research}))

    def mcp_servers(self) -> None:
        """Server names usable as SERVER.TOOL, and no simulated tool in a server's name space."""
        for name in sorted(self.servers):
            if not re.match(SERVER_NAME_PATTERN, name):
                self.add(
                    ("mcp_servers", name),
                    "a server name of letters, digits, _ and - (its tools are SERVER.TOOL)",
                    got=repr(name),
                )
        for name in sorted(self.servers & {n.partition(".")[0] for n in self.research}):
            self.add(
                ("mcp_servers", name),
                f"a server name other than {name!r} (research_tools declares {name}.* tools)",
                got=repr(name),
            )
        for tool in sorted(self.tools or ()):
            if tool in self.research:
                self.add(
                    ("tools", tool),
                    "a tool name research_tools does not declare (it declares "
                    f"{', '.join(sorted(self.research))})",
                    got=repr(tool),
                )
                continue
            server, dot, _ = tool.partition(".")
            if dot and server in self.servers:
                self.add(
                    ("tools", tool),
                    f"a tool name outside MCP server {server!r}'s SERVER.TOOL names",
                    got=repr(tool),
                )

    def add(self, path: FieldPath, expected: str, got: str | None = None) -> None:
        line = self.parsed.line_of(path)
        self.problems.append(InputFileError(self.file, line, format_path(path), expected, got=got))

    def defined(self, name: str) -> bool:
        """Whether a tool is defined under ``tools`` or belongs to a declared MCP server."""
        if self.tools is None or name in self.tools or name in self.research:
            return True
        server, dot, _ = name.partition(".")
        return bool(dot) and server in self.servers

    def undefined_tool(self, path: FieldPath, name: str) -> None:
        known = self.known
        close = self.suggest_tool(name)
        if close is not None:
            hint = f" (did you mean {close!r}?)"
        elif known:
            hint = f" (defined: {listing(known)})"
        else:
            hint = " (none is defined)"
        server, dot, _ = name.partition(".")
        declared = sorted(n for n in self.research if n.startswith(f"{server}."))
        if name == "web.search" and "web.fetch" in self.research:
            hint += ", or a backend in research_tools.web.search (for web.search)"
        elif declared and close is None:
            hint += f", or one research_tools declares ({listing(declared)})"
        elif server in ("web", "docs") and not declared:
            hint += f", or {name!r} declared by research_tools.{server}"
        elif dot:
            hint += f", or a server {server!r} declared under mcp_servers"
        self.add(path, f"a tool defined under tools{hint}", got=repr(name))

    def step(self, path: FieldPath, step: Any) -> None:
        if not isinstance(step, dict):
            self.add(path, f"a step: a mapping with one of {_KIND_LIST}", got=show(step))
            return
        present = [kind for kind in STEP_KINDS if kind in step]
        if not present:
            for key in step:
                close = suggest(str(key), STEP_KINDS)
                if close is not None:
                    self.add((*path, str(key)), f"one of {_KIND_LIST} (did you mean {close!r}?)")
                    return
            keys = ", ".join(str(k) for k in step)
            got = f"a step with {keys}" if keys else "an empty step"
            self.add(path, f"one of {_KIND_LIST}", got=got)
        elif len(present) > 1:
            self.add((*path, present[1]), f"exactly one of {_KIND_LIST}", got=" and ".join(present))
        else:
            name = step.get("call")
            if isinstance(name, str) and name and not self.defined(name):
                self.undefined_tool((*path, "call"), name)

    def subtasks(self, subtasks: list[Any]) -> dict[str, int]:
        """Check every subtask; returns the index of each subtask id's first use."""
        first: dict[str, int] = {}
        for index, sub in enumerate(subtasks):
            if not isinstance(sub, dict):
                continue
            where: FieldPath = ("job", "subtasks", index)
            sub_id = sub.get("id")
            if isinstance(sub_id, str):
                if sub_id in first:
                    # Lines are looked up only for errors: a valid file never pays for them.
                    line = self.parsed.line_of(("job", "subtasks", first[sub_id], "id")) or 0
                    got = f"duplicate {sub_id!r} (first at line {line})"
                    self.add((*where, "id"), "a unique subtask id", got=got)
                else:
                    first[sub_id] = index
            plan = sub.get("plan")
            if isinstance(plan, list):
                for number, step in enumerate(plan):
                    self.step((*where, "plan", number), step)
            allowed = sub.get("tools")
            if isinstance(allowed, list):
                for number, name in enumerate(allowed):
                    if isinstance(name, str) and not self.defined(name):
                        self.undefined_tool((*where, "tools", number), name)
        return first

    def expect(self, expect: Any, ids: dict[str, int]) -> None:
        if not isinstance(expect, dict):
            return
        suggest_id = Suggestions(ids)
        names = list(ids)
        for section in ("subtasks", "gaps"):
            entries = expect.get(section)
            if not isinstance(entries, dict):
                continue
            for key in entries:
                if str(key) in ids:
                    continue
                close = suggest_id(str(key))
                hint = f" (did you mean {close!r}?)" if close else f" (one of {listing(names)})"
                self.add(
                    ("expect", section, str(key)), f"the id of a subtask in job{hint}", show(key)
                )


def _check_references(data: dict[Any, Any], parsed: ParsedYaml, file: str) -> list[InputFileError]:
    checker = _Checker(data, parsed, file)
    checker.mcp_servers()
    if "source" in data:
        checker.add(("source",), "a known field (the loader sets source to the file's path)")
    research = data.get("research_tools")
    web = research.get("web") if isinstance(research, dict) else None
    fetch = web.get("fetch") if isinstance(web, dict) else None
    if isinstance(fetch, dict) and fetch.get("allow_private") is True:
        # Reading the machine's own network is the user's act, never a file's: any job
        # or tools file (one sent to a server, one downloaded) could otherwise set it.
        checker.add(
            ("research_tools", "web", "fetch", "allow_private"),
            "no allow_private in a file: private addresses are allowed only by the user "
            "(--allow-private-fetch on the command line, allow_private_fetch=True in Python)",
            got="true",
        )
    job = data.get("job")
    subtasks = job.get("subtasks") if isinstance(job, dict) else None
    if isinstance(subtasks, list):
        ids = checker.subtasks(subtasks)
        # The scripted lead's follow-ups (docs/design.md §11) are subtasks of the report too.
        planned = sorted(followup_ids(data.get("model")) - set(ids))
        more = {f: len(ids) + i for i, f in enumerate(planned)}
        # A job with a model may report a row for its lead: a rejected answer (docs/design.md §7).
        if data.get("model") is not None and LEAD not in ids:
            more[LEAD] = len(ids) + len(more)
        checker.expect(data.get("expect"), {**ids, **more})
    return checker.problems
