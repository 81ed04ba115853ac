"""The job a question runs: ``fanout ask``, the service's ``POST /ask`` and ``ask()``.

One builder with two entry points over one parser of ``PROVIDER:NAME``
(:func:`parse_model_flag`), one job block (:func:`job_options`) and one name
(:func:`ask_slug`): :func:`build_ask_job` for the command line and the service (a tools
file, flags), :func:`compose_ask_job` for Python (objects, functions, server specs, a
model block as a dict; its errors name ``ask()``'s own arguments). Both end in the
loader, so a job is checked as a file would be, and both ask without a model the same
way (:func:`retrieval_job`).

``fanout ask``:

Tools come from ``--docs DIR`` (your documents, ``docs.*``), ``--search BACKEND`` or
``FANOUT_SEARCH`` (the web, ``web.*``) and a tools file (``--tools``: ``tools``
(simulated), ``mcp_servers``, ``research_tools`` and optionally a ``model`` block). With
no tool at all, nothing runs: the error says how to give it some (docs/design.md §7). The file is
validated as written (every error names its own line), then the question, the flags'
research tools and ``--model`` / ``--base-url`` are added. The composed job is kept as
YAML text, so the run store can resume it and ``--record`` can replay it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.jobfile.yamlpos import parse_yaml
from shared.errors import InputFileError, InputFileErrors
from subagents.models.spend import TokenBudget
from subagents.tool import Tool

_ALLOWED = ("tools", "mcp_servers", "research_tools", "model")
_PROVIDERS = ("anthropic", "openai", "scripted")
_BACKENDS = ("searxng", "brave", "tavily")
QUESTION_ID = "question"
"""The one subtask of a retrieval-only ask (as a lead that cannot plan runs it)."""
NO_FILE = "fanout ask"  # what errors and the store name when there is no tools file
HOW_TO_GIVE_TOOLS = (
    "tools to research with: --docs DIR (your documents), --search searxng:URL|brave|tavily "
    "(the web; or set FANOUT_SEARCH), or --tools FILE (MCP servers, research_tools, "
    "simulated tools, e.g. docs/simulated_research_tools.yaml)"
)


def parse_search_flag(value: str, option: str = "--search") -> dict[str, Any]:
    """``searxng:URL`` | ``brave[:URL]`` | ``tavily[:URL]`` → a ``research_tools.web`` block.

    Raises:
        InputFileError: an unknown backend, or searxng without its URL.
    """
    backend, _, url = value.strip().partition(":")
    if backend not in _BACKENDS:
        raise InputFileError(
            option, None, "search", "searxng:URL, brave or tavily", got=repr(value)
        )
    if backend == "searxng" and not url:
        raise InputFileError(
            option, None, "search", "searxng:URL (the SearXNG instance's base URL)",
            got=repr(value),
        )
    block: dict[str, Any] = {"search": backend}
    if url:
        block["url"] = url
    return block


def ask_slug(question: str) -> str:
    """The job name of a question: ``ask-`` and its first six words."""
    words = re.findall(r"[a-z0-9]+", question.lower())[:6]
    return "ask-" + ("-".join(words) or "question")


def parse_model_flag(
    value: str, option: str = "--model", field: str = ""
) -> tuple[str, str | None]:
    """``PROVIDER[:NAME]`` → (provider, name): the one parser of a model named in a
    string (``fanout ask --model``, the service's ``POST /ask``, Python's ``ask(model=)``).

    ``option`` is what the error names as its source (``--model``, ``ask()``), ``field``
    the prefix of its field (``model.`` in ``ask()``, whose errors name the job's field).

    Raises:
        InputFileError: an unknown provider, or a ``PROVIDER:`` without its name.
    """
    provider, colon, name = value.partition(":")
    if provider not in _PROVIDERS:
        raise InputFileError(
            option,
            None,
            f"{field}provider",
            f"one of {', '.join(_PROVIDERS)} (PROVIDER:NAME)",
            got=repr(provider),
        )
    if colon and not name.strip():
        # `openai:` used to fall back to a default model and fail far away, as a missing key.
        raise InputFileError(
            option,
            None,
            f"{field}name",
            f"a model name after {provider}: (e.g. {provider}:gemma), or {provider} alone "
            "for its default model",
            got=repr(value),
        )
    return provider, name.strip() or None


def check_base_url(value: str, option: str = "--base-url") -> str:
    """``value`` when it is an http(s) URL with a host.

    Raises:
        InputFileError: a URL without its scheme (``127.0.0.1:8080/v1``) or host.
    """
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputFileError(
            option,
            None,
            "base_url",
            "an http(s) URL of the API, e.g. http://127.0.0.1:8080/v1",
            got=repr(value),
        )
    return value


SCRIPTED_WITHOUT_TURNS = (
    "a model block with provider: scripted and its turns (per subtask id, and lead for the "
    "plan and the answer) in a --tools file; see the README's scenario format. To ask "
    "without any model, leave --model out: --docs DIR gives a retrieval-only answer"
)


def search_tools(research: dict[str, Any], simulated: Any) -> list[str]:
    """The searches a retrieval-only ask runs (docs/design.md §7): the built-in ones its research
    tools give, and the simulated tools declared ``search: true``."""
    built_in = (("docs", "docs.search"), ("web", "web.search"))
    names = [name for key, name in built_in if research.get(key)]
    if isinstance(simulated, dict):
        names += [
            str(name)
            for name, tool in simulated.items()
            if isinstance(tool, dict) and tool.get("search") is True
        ]
    return names


def _research_flags(
    docs: str | None, search: str | None, env_search: str | None
) -> dict[str, Any]:
    """The ``research_tools`` block ``--docs`` and ``--search`` (or FANOUT_SEARCH) ask for."""
    block: dict[str, Any] = {}
    if docs is not None:
        folder = Path(docs).expanduser()
        if not folder.is_dir():
            raise InputFileErrors(
                [InputFileError("--docs", None, "docs", "a folder of documents", got=repr(docs))]
            )
        # Absolute: the composed job is resumed and recorded from the store, anywhere.
        resolved = str(folder.resolve())
        try:
            resolved.encode("utf-8")
        except UnicodeEncodeError:
            # The job's text records the folder: a name that is not UTF-8 cannot be in it
            # (the files inside may have any names).
            raise InputFileErrors([InputFileError(
                "--docs", None, "docs", "a folder whose path is UTF-8 text", got=repr(docs),
            )]) from None
        block["docs"] = {"path": resolved}
    if search is not None:
        block["web"] = parse_search_flag(search)
    elif env_search:
        block["web"] = parse_search_flag(env_search, "FANOUT_SEARCH")
    return block


def job_options(
    question: str,
    max_subtasks: int,
    concurrency: int,
    deadline_s: float | None,
    budget: TokenBudget | None = None,
) -> dict[str, Any]:
    """The ``job`` block of a question: the one shape every ask door composes."""
    job: dict[str, Any] = {
        "query": question,
        "max_subtasks": max_subtasks,
        "concurrency": concurrency,
    }
    if deadline_s is not None:
        job["deadline_s"] = deadline_s
    if budget is not None:
        job["budget"] = budget.model_dump(exclude_defaults=True)
    return job


def build_ask_job(
    question: str,
    tools_file: str | Path | None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    max_subtasks: int = 6,
    concurrency: int = 4,
    deadline_s: float | None = None,
    budget: TokenBudget | None = None,
    docs: str | None = None,
    search: str | None = None,
    env_search: str | None = None,
    tools_text: str | None = None,
    tools_name: str = NO_FILE,
    max_tokens: int | None = None,
    default_docs: str | None = None,
) -> tuple[Scenario, str, str]:
    """The scenario to run, its YAML text (for the store) and the file it names.

    ``docs`` and ``search`` are ``--docs`` and ``--search``; ``env_search`` is
    ``FANOUT_SEARCH``, used when ``--search`` is not given. ``tools_text`` is a tools
    file's text given inline (the service's ``POST /ask``), named ``tools_name`` in
    errors. A tools file's own
    ``research_tools`` keep what the flags do not replace (``web`` or ``docs`` whole).
    ``default_docs`` is the folder read when neither ``docs`` nor the tools file names
    one (a server's first served folder).

    Raises:
        InputFileErrors: the tools file is malformed, holds keys a tools file cannot,
            there is no tool at all, or no model is given at all.
    """
    if tools_file is not None:
        path = Path(tools_file)
        file = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputFileErrors(
                [InputFileError(file, None, "<file>", "a readable tools file", got=str(exc))]
            ) from None
    else:
        file, text = tools_name, tools_text or ""
    if not question.strip():
        raise InputFileErrors([InputFileError("QUESTION", None, "question", "a question")])
    parsed = parse_yaml(text, file)
    data = parsed.data if isinstance(parsed.data, dict) else {}
    declared = data.get("research_tools")
    if docs is None and not (isinstance(declared, dict) and declared.get("docs") is not None):
        docs = default_docs
    # FANOUT_SEARCH is a default: a tools file's own research_tools.web wins over it
    # (--search, given for this question, wins over both).
    file_web = isinstance(declared, dict) and declared.get("web") is not None
    flags = _research_flags(docs, search, None if file_web else env_search)
    problems = [
        InputFileError(
            file,
            parsed.line_of((key,)),
            str(key),
            "only tools, mcp_servers, research_tools and model in a tools file (the question "
            "and the job's options come from the command line)",
        )
        for key in data
        if key not in _ALLOWED
    ]
    if problems:
        raise InputFileErrors(problems)
    if not flags and not any(data.get(key) for key in ("tools", "mcp_servers", "research_tools")):
        raise InputFileErrors(
            [InputFileError(file, None, "tools", HOW_TO_GIVE_TOOLS, got="no tools")]
        )
    job = job_options(question, max_subtasks, concurrency, deadline_s, budget)
    provider, name = parse_model_flag(model) if model else (None, None)
    if base_url is not None:
        check_base_url(base_url)
    declared_model = data.get("model")
    scripted_turns = isinstance(declared_model, dict) and bool(declared_model.get("turns"))
    if provider == "scripted" and not scripted_turns:
        raise InputFileErrors(
            [InputFileError("--model", None, "model", SCRIPTED_WITHOUT_TURNS, got="scripted")]
        )
    if max_tokens is not None and model is None and "model" not in data:
        raise InputFileErrors(
            [InputFileError("--max-tokens", None, "max_tokens", "--model PROVIDER:NAME too")]
        )
    extra: dict[str, Any] = {"scenario": ask_slug(question), "job": job}
    if "model" not in data and provider is not None:
        extra["model"] = {"provider": provider}
    if model is None and "model" not in data:
        # No model at all (docs/design.md §7): retrieval only. The question is one subtask that
        # runs its searches, and the answer is built from the best passages, cited.
        if base_url is not None:
            raise InputFileErrors(
                [InputFileError("--base-url", None, "model", "--model openai:NAME too")]
            )
        research_now = {**(declared if isinstance(declared, dict) else {}), **flags}
        searches = search_tools(research_now, data.get("tools"))
        if not searches:
            raise InputFileErrors(
                [
                    InputFileError(
                        "--model",
                        None,
                        "model",
                        "--model PROVIDER:NAME, or a model block in the tools file; or, for "
                        "a retrieval-only answer without a model, --docs DIR or --search",
                        got="no model and no search tool",
                    )
                ]
            )
        retrieval_job(job, question, searches)
        if research_now and "research_tools" not in data:
            extra["research_tools"] = research_now
    # Appended after the file's own lines: an error in the file keeps its line number.
    appended = yaml.safe_dump(extra, sort_keys=False)
    composed_text = text.rstrip("\n") + "\n" + appended
    if "subtasks" not in job or "research_tools" not in data or not flags:
        # The file as written, so an error in it names its own line (a retrieval-only
        # job whose searches come from flags and the file together is checked whole below).
        scenario = load_scenario_text(composed_text, file)
        if model is None and base_url is None and max_tokens is None and not flags:
            return scenario, composed_text, file
    block = dict(data.get("model") or extra.get("model") or {})
    research = dict(data.get("research_tools") or {})
    research.update(flags)
    if research:
        extra["research_tools"] = research
    if model is None and base_url is None and max_tokens is None:
        final = {**data, **extra}
        final_text = yaml.safe_dump(final, sort_keys=False, allow_unicode=True)
        return load_scenario_text(final_text, file), final_text, file
    if provider is not None and provider != block.get("provider"):
        # Another provider: nothing of the old block applies but its budgets.
        block = {k: v for k, v in block.items() if k in ("max_tokens", "timeout_s", "retry")}
        block["provider"] = provider
    if name is not None:
        block["name"] = name
    if base_url is not None:
        block["base_url"] = base_url
    if max_tokens is not None:
        block["max_tokens"] = max_tokens
    final = {**data, **extra, "model": block}
    final_text = yaml.safe_dump(final, sort_keys=False, allow_unicode=True)
    return load_scenario_text(final_text, file), final_text, file


def retrieval_job(job: dict[str, Any], question: str, searches: Sequence[str]) -> None:
    """Make ``job`` a retrieval-only ask (docs/design.md §7): the question is one subtask that runs
    ``searches`` on it, and the answer is built from the best passages, each cited."""
    job["subtasks"] = [{
        "id": QUESTION_ID, "query": question, "tools": list(searches),
        "plan": [{"call": tool, "args": {"query": question}} for tool in searches],
    }]
    job.pop("max_subtasks", None)
    job["answer"] = "extractive"


# --- ask() from Python -------------------------------------------------------------

ASK_SOURCE = "ask()"
"""The name every error of an ``ask()`` job carries where a file's would name the file."""


def model_block(model: str | Mapping[str, Any], base_url: str | None) -> dict[str, Any]:
    """``ask(model=)``: ``"PROVIDER[:NAME]"`` or a model block as a dict → the block
    (``base_url`` wins). A string is parsed as ``--model`` is, its errors naming
    ``model.provider`` or ``model.name``.

    Raises:
        InputFileError: an unknown provider, a ``PROVIDER:`` without its name, or a
            ``base_url`` that is not an http(s) URL.
        ValueError: ``model`` is neither a string nor a mapping.
    """
    if isinstance(model, str):
        provider, name = parse_model_flag(model, ASK_SOURCE, "model.")
        block: dict[str, Any] = {"provider": provider}
        if name:
            block["name"] = name
    elif isinstance(model, Mapping):
        block = dict(model)
    else:
        raise ValueError(
            f"model: expected 'PROVIDER:NAME' or a model block as a dict, got {model!r}"
        )
    if base_url is not None:
        block["base_url"] = check_base_url(base_url, ASK_SOURCE)
    return block


def _placeholder(tool: Tool) -> dict[str, Any]:
    # Stands in for a Python tool while the loader checks the names subtasks call; it is
    # dropped before anything runs (the Python tool is served instead).
    return {"description": tool.description, "responses": [{"empty": True}]}


def _without_lines(exc: InputFileErrors) -> InputFileErrors:
    return InputFileErrors(
        [InputFileError(ASK_SOURCE, None, e.field, e.expected, got=e.got) for e in exc.errors]
    )


def compose_ask_job(
    question: str,
    *,
    model: str | Mapping[str, Any] | None,
    base_url: str | None,
    python_tools: Mapping[str, Tool],
    mcp_servers: Mapping[str, Mapping[str, Any]],
    subtasks: Sequence[Mapping[str, Any]] | None,
    research: Mapping[str, Any] | None = None,
    max_subtasks: int,
    concurrency: int,
    deadline_s: float | None,
    seed: int | str,
) -> tuple[Scenario, str]:
    """The scenario ``ask()`` runs and the YAML text the run store keeps for it.

    The stored text holds no Python tools (they cannot be written down): a run recorded
    from Python can be read with ``fanout report``/``trace``, and ``fanout resume``
    refuses it, naming the tools it lacks, instead of running it without them. Errors
    name the field in ``ask()``: the composed text's line numbers would mean nothing to
    a caller and are dropped.

    Raises:
        InputFileErrors: every problem, each naming its field, in ``ask()``.
        ValueError: the question is empty or an option cannot be written as YAML.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question: expected a non-empty string, got {question!r}")
    job = job_options(question, max_subtasks, concurrency, deadline_s)
    if subtasks is not None:
        job["subtasks"] = [dict(s) if isinstance(s, Mapping) else s for s in subtasks]
    doc: dict[str, Any] = {"scenario": ask_slug(question), "seed": seed, "job": job}
    if mcp_servers:
        doc["mcp_servers"] = {k: dict(v) for k, v in mcp_servers.items()}
    if research:
        doc["research_tools"] = dict(research)
    if model is None and subtasks is None:
        _retrieval_only(job, question, research or {}, base_url)
    elif model is not None:
        try:
            doc["model"] = model_block(model, base_url)
        except InputFileError as exc:
            raise InputFileErrors([exc]) from None
    try:
        stored = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
        checked = yaml.safe_dump(
            {**doc, "tools": {n: _placeholder(t) for n, t in python_tools.items()}},
            sort_keys=False,
            allow_unicode=True,
        )
    except yaml.YAMLError as exc:
        raise ValueError(f"ask(): an option holds a value a job cannot: {exc}") from None
    try:
        scenario = load_scenario_text(checked, ASK_SOURCE)
    except InputFileErrors as exc:
        raise _without_lines(exc) from None
    scenario = scenario.model_copy(update={"tools": {}})
    return scenario, stored


def _retrieval_only(
    job: dict[str, Any], question: str, research: Mapping[str, Any], base_url: str | None
) -> None:
    """``ask()`` without a model (docs/design.md §7), as ``fanout ask`` without ``--model``: the
    question is one subtask that runs its searches (``"docs:DIR"``, ``"web"``), and the
    answer is built from the best passages, cited.

    Raises:
        InputFileErrors: no search to run, or a ``base_url`` without a model.
    """
    if base_url is not None:
        raise InputFileErrors([InputFileError(ASK_SOURCE, None, "model", "a model for base_url")])
    searches = search_tools(dict(research), None)
    if not searches:
        raise InputFileErrors([InputFileError(
            ASK_SOURCE, None, "model",
            "a model (\"PROVIDER:NAME\" or a model block); or, for a retrieval-only answer "
            "without one, a \"docs:DIR\" or \"web\" tool", got="no model and no search tool")])
    retrieval_job(job, question, searches)
