"""The job ``fanout ask`` runs: a question, its tools, a model.

Tools come from ``--docs DIR`` (your documents, ``docs.*``), ``--search BACKEND`` or
``FANOUT_SEARCH`` (the web, ``web.*``) and a tools file (``--tools``: ``tools``
(simulated), ``mcp_servers``, ``research_tools`` and optionally a ``model`` block). With
no tool at all, nothing runs: the error says how to give it some (DESIGN §7). The file is
validated as written (every error names its own line), then the question, the flags'
research tools and ``--model`` / ``--base-url`` are added. The composed job is kept as
YAML text, so the run store can resume it and ``--record`` can replay it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from coordinator.jobfile.loader import load_scenario_text
from coordinator.jobfile.scenario import Scenario
from coordinator.jobfile.yamlpos import parse_yaml
from shared.errors import InputFileError, InputFileErrors
from subagents.models.spend import TokenBudget

_ALLOWED = ("tools", "mcp_servers", "research_tools", "model")
_PROVIDERS = ("anthropic", "openai", "scripted")
_BACKENDS = ("searxng", "brave", "tavily")
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


def _slug(question: str) -> str:
    words = re.findall(r"[a-z0-9]+", question.lower())[:6]
    return "ask-" + ("-".join(words) or "question")


def parse_model_flag(value: str) -> tuple[str, str | None]:
    """``PROVIDER[:NAME]`` → (provider, name).

    Raises:
        InputFileError: an unknown provider (named as the ``--model`` option).
    """
    provider, _, name = value.partition(":")
    if provider not in _PROVIDERS:
        raise InputFileError(
            "--model",
            None,
            "provider",
            f"one of {', '.join(_PROVIDERS)} (PROVIDER:NAME)",
            got=repr(provider),
        )
    return provider, name or None


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
) -> tuple[Scenario, str, str]:
    """The scenario to run, its YAML text (for the store) and the file it names.

    ``docs`` and ``search`` are ``--docs`` and ``--search``; ``env_search`` is
    ``FANOUT_SEARCH``, used when ``--search`` is not given. ``tools_text`` is a tools
    file's text given inline (the service's ``POST /ask``), named ``tools_name`` in
    errors. A tools file's own
    ``research_tools`` keep what the flags do not replace (``web`` or ``docs`` whole).

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
    job: dict[str, Any] = {
        "query": question,
        "max_subtasks": max_subtasks,
        "concurrency": concurrency,
    }
    if deadline_s is not None:
        job["deadline_s"] = deadline_s
    if budget is not None:
        job["budget"] = budget.model_dump(exclude_defaults=True)
    provider, name = parse_model_flag(model) if model else (None, None)
    extra: dict[str, Any] = {"scenario": _slug(question), "job": job}
    if "model" not in data and provider is not None:
        extra["model"] = {"provider": provider}
    # Appended after the file's own lines: an error in the file keeps its line number.
    appended = yaml.safe_dump(extra, sort_keys=False)
    composed_text = text.rstrip("\n") + "\n" + appended
    if model is None and "model" not in data:
        raise InputFileErrors(
            [
                InputFileError(
                    "--model",
                    None,
                    "model",
                    "--model PROVIDER:NAME, or a model block in the tools file",
                    got="no model",
                )
            ]
        )
    scenario = load_scenario_text(composed_text, file)
    if model is None and base_url is None and not flags:
        return scenario, composed_text, file
    block = dict(data.get("model") or extra.get("model") or {})
    research = dict(data.get("research_tools") or {})
    research.update(flags)
    if research:
        extra["research_tools"] = research
    if model is None and base_url is None:
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
    final = {**data, **extra, "model": block}
    final_text = yaml.safe_dump(final, sort_keys=False, allow_unicode=True)
    return load_scenario_text(final_text, file), final_text, file
