"""A tool call's arguments become a job, checked as ``fanout serve`` checks its requests.

``ask`` is composed as ``fanout ask`` and ``POST /ask`` compose a question
(:func:`~coordinator.jobfile.ask.build_ask_job`), on the operator's model, tools file,
folders and search backend. ``run_job`` is read as ``POST /runs`` reads a job file
(``parse_job``: the server's keys, no ``base_url``, documents only under the served
folders), and then held to what this door adds: no ``mcp_servers`` at all (a request
never starts a command), and the web only through the operator's own backend. Every
refusal is an :class:`~coordinator.mcpserve.config.ArgumentRefused` naming the field.
A run a killed server left going meets the same checks again before it is resumed
(:func:`stored_job`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.api.run import Prepared
from coordinator.jobfile.ask import build_ask_job, parse_search_flag
from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.mcpserve.config import (
    MAX_JOB_BYTES,
    STORED_FILES,
    ArgumentRefused,
    DoorConfig,
    refused,
)
from shared.errors import InputFileError
from subagents.models.spend import TokenBudget
from subagents.research.spec import resolve_docs_folder

if TYPE_CHECKING:  # the service's modules load FastAPI: only when a job is read
    from coordinator.serve.schemas import InputProblem

JOB_ARGUMENT = "job"  # what a run_job's problems name where a file's would name the file
ASK_TOOL = "ask"  # likewise for an ask's composed job
_NO_TOOLS = ("no tools", "no model and no search tool")


def parse_budget(budget: int | str | None) -> TokenBudget | None:
    """``budget``: N tokens (input and output together) or ``"IN:OUT"``.

    Raises:
        ArgumentRefused: any other form, or a number that is not positive.
    """
    if budget is None:
        return None
    try:
        return TokenBudget.parse(str(budget))
    except ValueError:
        raise refused("budget", "a positive number of tokens, or \"IN:OUT\" (either may be "
                      "empty), e.g. 200000 or \"150000:20000\"", repr(budget)) from None


def ask_job(
    config: DoorConfig,
    question: str,
    *,
    docs: str | None,
    web: bool,
    max_subtasks: int,
    budget: int | str | None,
) -> Prepared:
    """The job an ``ask`` runs: the question on the operator's model and tools.

    Raises:
        ArgumentRefused: a folder not served, the web without a backend, no tools at all,
            a bad budget; each names its field.
    """
    if not question.strip():
        raise refused("question", "a question", repr(question))
    folder = config.served_folder(docs)
    search = None
    if web:
        search = config.web_backend()
        if search is None:
            raise refused("web", "false: the server has no search backend (its operator "
                          "starts fanout mcp with --search, or sets FANOUT_SEARCH)", "true")
    tokens = parse_budget(budget)
    try:
        scenario, text, _ = build_ask_job(
            question, None, model=config.model, docs=folder, search=search,
            max_subtasks=max_subtasks, budget=tokens, tools_text=config.tools_text,
            tools_name=ASK_TOOL,
        )
    except InputFileError as exc:
        raise _ask_refusal(exc) from None
    return Prepared(scenario, text, {})


def _ask_refusal(exc: InputFileError) -> ArgumentRefused:
    """An ask's problem in the tool's own fields (never ``fanout ask``'s flags)."""
    from coordinator.serve.intake import ask_problems

    lines = []
    for p in ask_problems(exc, ASK_TOOL):
        if p.got in _NO_TOOLS:
            return refused("docs", "a server with documents (fanout mcp --docs), or web: true "
                           "on a server with a search backend: this ask has nothing to "
                           "research with")
        said = f"{p.field}: expected {p.expected}"
        lines.append(said if p.got is None else f"{said}, got {p.got}")
    return ArgumentRefused("\n".join(lines))


def run_job(config: DoorConfig, text: str) -> Prepared:
    """The job a ``run_job`` runs: the YAML text, checked as the service checks one.

    Raises:
        ArgumentRefused: too large, malformed, or asking for what a request may not have
            (mcp_servers, another search endpoint, a folder not served, the server's key
            sent elsewhere); every problem with its line.
    """
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_JOB_BYTES:
        raise refused(JOB_ARGUMENT, f"a job of at most {MAX_JOB_BYTES} bytes", f"{size} bytes")
    from coordinator.serve.intake import JobRejected, parse_job

    policy = config.research_policy()
    try:
        scenario = parse_job(text.encode("utf-8"), "yaml", allow_mcp=True, research=policy,
                             file=JOB_ARGUMENT)
    except JobRejected as exc:
        raise ArgumentRefused("\n".join(_line(p) for p in exc.problems)) from None
    if scenario.mcp_servers:
        raise refused(f"{JOB_ARGUMENT}: mcp_servers",
                      "none: a request never starts an MCP command (fanout mcp runs only "
                      "its operator's tools)", ", ".join(sorted(scenario.mcp_servers)))
    _check_web(config, scenario)
    return Prepared(_absolute_docs(config, scenario), text, {})


def _line(problem: InputProblem) -> str:
    """A problem of the job, named as the argument's (``job:LINE: field: expected ...``)."""
    where = JOB_ARGUMENT if problem.line is None else f"{JOB_ARGUMENT}:{problem.line}"
    # The service's words for its folders are this server's flag here.
    expected = problem.expected.replace("(serve --docs)", "(fanout mcp --docs)")
    said = f"{where}: {problem.field}: expected {expected}"
    return said if problem.got is None else f"{said}, got {problem.got}"


def _check_web(config: DoorConfig, scenario: Scenario) -> None:
    """A job's web is the operator's backend or none: a request does not point the
    server's searches at an address of its choosing."""
    spec = scenario.research_tools
    if spec is None or spec.web is None:
        return
    backend = config.web_backend()
    ours = parse_search_flag(backend) if backend else None
    url = (spec.web.url or "").rstrip("/")
    if ours is None or spec.web.search != ours["search"] or url != ours.get("url", "").rstrip("/"):
        raise refused(f"{JOB_ARGUMENT}: research_tools.web",
                      "the server's own search backend (fanout mcp --search), or no web",
                      repr(f"{spec.web.search}:{spec.web.url or ''}".rstrip(":")))


def _absolute_docs(config: DoorConfig, scenario: Scenario) -> Scenario:
    """The job with its documents folder as checked: resolved under the first served
    folder (the run would otherwise resolve a relative path from the server's own)."""
    spec = scenario.research_tools
    if spec is None or spec.docs is None:
        return scenario
    base = config.research_policy().docs_base
    folder = str(resolve_docs_folder(spec.docs.path, base))
    docs = spec.docs.model_copy(update={"path": folder})
    return scenario.model_copy(
        update={"research_tools": spec.model_copy(update={"docs": docs})})


def stored_job(config: DoorConfig, file: str, text: str) -> Prepared:
    """The job of a run this door stored (``file``: ``fanout mcp run_job`` or ``fanout
    mcp ask``), held to the operator's settings of today before it is resumed: a server
    restarted with fewer folders or another search backend does not resume what it
    would now refuse.

    A ``run_job``'s YAML is the request's text: it is read again as :func:`run_job`
    reads it. An ``ask``'s is the job the server composed from its own settings; what
    the request chose in it, its folder, must still be served (on a server that serves
    none, a folder can only be the operator's tools file's own).

    Raises:
        ArgumentRefused: the job would be refused today (each line names the field).
        InputFileErrors: an ask's stored job no longer loads.
    """
    if file == STORED_FILES["run_job"]:
        return run_job(config, text)
    scenario = load_scenario_text(text, ASK_TOOL)
    spec = scenario.research_tools
    if config.docs and spec is not None and spec.docs is not None:
        config.served_folder(spec.docs.path)
    return Prepared(scenario, text, {})
