"""What the ``fanout`` command line accepts: every subcommand's arguments, and which
handler runs it.

Building the parser imports nothing of what the commands do: each handler is named (a
:class:`Command`) and its module, which imports what its command needs (the engine, the
store, the service, the Temporal SDK), is loaded only when that command runs. So
``fanout --version`` and ``fanout --help`` load argparse, and a mistyped option is an
error before anything else is read.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from rich.console import Console

# The same defaults as coordinator.temporal.payloads, written out so that building the
# parser does not import the SDK (a test pins that they agree).
ADDRESS = "127.0.0.1:7233"
NAMESPACE = "default"
TASK_QUEUE = "fanout"
DEV_PORT = 7233
DEV_DB = str(Path(".fanout") / "temporal.sqlite")
WORKER_CONCURRENCY = 100
HEARTBEAT_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 20_000_000
"""``fanout index --max-bytes``: files larger than this are left out (and listed)."""


@dataclass(frozen=True)
class Command:
    """A subcommand's handler by name: ``Command("replay", "cmd_replay")`` is ``cmd_replay``
    of :mod:`coordinator.cli.replay`, imported when the command runs, not when the parser
    is built."""

    module: str
    name: str

    def __call__(self, args: argparse.Namespace, out: Console, err: Console) -> int:
        # Everything an import makes (modules, classes, pydantic schemas) lives until the
        # process ends: the collector's passes over it while importing (a tenth of a
        # replay's start-up) find nothing to free.
        collecting = gc.isenabled()
        gc.disable()
        try:
            module = importlib.import_module(f"coordinator.cli.{self.module}")
        finally:
            if collecting:
                gc.enable()
        code: int = getattr(module, self.name)(args, out, err)
        return code


class _Parser(argparse.ArgumentParser):
    """argparse without abbreviations: ``--doc`` is not taken for ``--docs``, nor any
    prefix for an option that happens to start with it (a future option would change what
    it means). A misspelled option or command is told the nearest one: "did you mean
    --docs?"."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        # The options it takes, kept as they are added (argparse lists them only in
        # private attributes).
        self.options: list[str] = []
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """argparse's ``add_argument``, the option's names kept for "did you mean"."""
        action = super().add_argument(*args, **kwargs)
        self.options += [o for o in action.option_strings if o.startswith("--")]
        return action

    def error(self, message: str) -> NoReturn:
        """Exit 2 with the usage and ``message``, and the nearest option or command."""
        super().error(message + did_you_mean(self.options, message))


def did_you_mean(options: Sequence[str], message: str) -> str:
    """" (did you mean --docs?)" for an argparse error about an unknown option close to
    one of ``options``, or an invalid choice close to one of its choices; else ""."""
    import difflib
    import re

    unknown = re.match(r"unrecognized arguments: (.*)", message)
    if unknown:
        guesses = []
        for word in unknown.group(1).split():
            if word.startswith("-"):
                close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1)
                guesses += close
        return f" (did you mean {' '.join(dict.fromkeys(guesses))}?)" if guesses else ""
    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        choices = re.findall(r"'([^']*)'", choice.group(2))
        close = difflib.get_close_matches(choice.group(1), choices, n=1)
        return f" (did you mean {close[0]!r}?)" if close else ""
    return ""


class _CommandParser(_Parser):
    """A subcommand's parser: an option it does not know is its error, shown with its own
    usage (argparse hands unknown options up to ``fanout``, whose usage names none)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class _Version(argparse.Action):
    """``--version``: the installed version is looked up only when asked for (reading the
    distribution's metadata is a visible share of a command's start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(version_text() + "\n")
        parser.exit()


def version_text() -> str:
    """``fanout X.Y.Z`` as installed (``fanout --version``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"fanout {version('fanout')}"
    except PackageNotFoundError:
        return "fanout (not installed: run from a source tree)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(
        prog="fanout",
        description="Fan-out research jobs that stay useful when things fail.",
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_CommandParser)

    p = sub.add_parser("run", help="run a job file in real time with a live display")
    p.add_argument("job", metavar="JOB.yaml")
    p.add_argument("--json", action="store_true", help="print the report as JSON only")
    p.add_argument("--speed", type=float, default=1.0, help="run simulated time X times faster")
    p.add_argument("--ask", action="store_true",
                   help="decide each escalation as it happens (it waits for you)")
    p.add_argument("--review", action="store_true",
                   help="approve, edit or reject the lead's plan before it runs")
    p.add_argument("--record", metavar="OUT.yaml", help="also write the run as a scenario")
    add_private_fetch_option(p)
    add_run_options(p)
    p.set_defaults(func=Command("run", "cmd_run"))

    p = sub.add_parser("replay", help="replay scenarios in virtual time and check expect")
    p.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or directories")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=Command("replay", "cmd_replay"))

    p = sub.add_parser("tools", help="list the tools of a job's MCP servers, with schemas")
    p.add_argument("job", metavar="JOB.yaml")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=Command("run", "cmd_tools"))

    p = sub.add_parser("schema", help="print the JSON Schema of the scenario format")
    p.set_defaults(func=Command("replay", "cmd_schema"))

    p = sub.add_parser("resume", help="finish an interrupted run")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--json", action="store_true", help="print the report as JSON only")
    p.add_argument("--speed", type=float, default=None,
                   help="run simulated time X times faster (default: the run's own speed)")
    p.add_argument("--ask", action="store_true",
                   help="decide each escalation as it happens (it waits for you), those "
                   "that waited when the run stopped first")
    p.set_defaults(func=Command("run", "cmd_resume"))

    p = sub.add_parser("runs", help="list stored runs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=Command("read", "cmd_runs"))

    p = sub.add_parser("report", help="a stored run's report")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID|latest")
    p.add_argument("--format", choices=("table", "json", "md", "html"), default="table")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=Command("read", "cmd_report"))

    p = sub.add_parser("gaps", help="the coverage-gap report of a stored run")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID|latest")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=Command("read", "cmd_gaps"))

    p = sub.add_parser("trace", help="every tool envelope of a run (JSONL with --json)")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID|latest")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=Command("read", "cmd_trace"))

    add_ask_parser(sub)
    add_index_parser(sub)
    p = sub.add_parser("record", help="write a finished stored run as a replayable scenario")
    p.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID|latest")
    p.add_argument("--output", "-o", metavar="OUT.yaml", required=True)
    p.set_defaults(func=Command("read", "cmd_record"))
    add_serve_parser(sub)
    add_mcp_parser(sub)
    add_temporal_commands(sub)
    for name in ("run", "resume", "runs", "report", "gaps", "trace", "record", "worker"):
        sub.choices[name].add_argument(
            "--store",
            metavar="PATH|URL",
            help="the run store: a SQLite file or a postgresql://user@host:port/db URL "
            "(default $FANOUT_STORE or .fanout/runs.sqlite)",
        )
    return parser


def add_private_fetch_option(parser: argparse.ArgumentParser) -> None:
    """``--allow-private-fetch``: the user's own permission for ``web.fetch`` to read
    loopback and private addresses (a job or tools file cannot give it)."""
    parser.add_argument(
        "--allow-private-fetch", action="store_true",
        help="let web.fetch read loopback, private and link-local addresses (a server on "
        "this machine or network); a job or tools file cannot allow it",
    )


def add_ask_parser(sub: Any) -> None:
    """Register ``fanout ask`` on the subcommand parser."""
    p = sub.add_parser("ask", help="decompose a question, fan out, synthesize the answer")
    p.add_argument("question", metavar="QUESTION")
    p.add_argument(
        "--tools",
        metavar="FILE",
        help="a tools file: tools (simulated), mcp_servers, research_tools, optionally a "
        "model block",
    )
    p.add_argument(
        "--docs", metavar="DIR", help="research your documents: docs.search and docs.read "
        "over DIR (indexed first when new or changed)",
    )
    p.add_argument(
        "--search", metavar="BACKEND", help="research the web: web.search and web.fetch "
        "through searxng:URL, brave (BRAVE_API_KEY) or tavily (TAVILY_API_KEY); default "
        "$FANOUT_SEARCH",
    )
    p.add_argument(
        "--model", metavar="PROVIDER:NAME",
        help="anthropic:NAME, openai:NAME, or scripted (with turns in --tools); without one, "
        "a retrieval-only answer from --docs/--search",
    )
    p.add_argument(
        "--base-url", metavar="URL",
        help="another endpoint: a gateway, vLLM, llama.cpp, Ollama (…/v1); default "
        "$OPENAI_BASE_URL for openai",
    )
    p.add_argument(
        "--max-tokens", type=int, default=None, metavar="N",
        help="the most tokens one model call may write (cut further to fit a small server's "
        "context window)",
    )
    p.add_argument("--max-subtasks", type=int, default=6, metavar="N")
    p.add_argument("--concurrency", type=int, default=4, metavar="N")
    p.add_argument("--deadline", type=float, default=None, metavar="SECONDS")
    p.add_argument(
        "--budget",
        metavar="TOKENS",
        help="the job's token budget: N (input and output together) or IN:OUT "
        "(either may be empty), e.g. 200000 or 150000:20000",
    )
    p.add_argument("--speed", type=float, default=1.0, help="run simulated time X times faster")
    p.add_argument("--json", action="store_true", help="print the report as JSON only")
    p.add_argument("--record", metavar="OUT.yaml", help="also write the run as a scenario")
    p.add_argument("--ask", action="store_true",
                   help="decide each escalation as it happens (it waits for you)")
    p.add_argument("--review", action="store_true",
                   help="approve, edit or reject the lead's plan before it runs")
    p.add_argument("--store", metavar="PATH|URL",
                   help="the run store: a SQLite file or a postgresql:// URL")
    add_private_fetch_option(p)
    add_run_options(p)
    p.set_defaults(func=Command("ask", "cmd_ask"))


def add_index_parser(sub: Any) -> None:
    """Register ``fanout index`` on the subcommand parser."""
    p = sub.add_parser("index", help="index a folder of documents for docs.search/docs.read")
    p.add_argument("folder", metavar="DIR")
    p.add_argument("--store", metavar="PATH", help="the run store; the index lives beside it")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, metavar="BYTES",
                   help="skip (and list) files larger than this (default 20,000,000)")
    p.add_argument("--json", action="store_true", help="print the refresh's figures as JSON")
    p.set_defaults(func=Command("index", "cmd_index"))


def add_serve_parser(sub: Any) -> None:
    """Add ``fanout serve`` to the subcommands (``sub`` is argparse's subparsers action)."""
    p = sub.add_parser("serve", help="serve the HTTP API and the web page (runs execute here)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; others need a token)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free one)")
    p.add_argument("--store", metavar="PATH|URL",
                   help="the run store: a SQLite file or a postgresql://user@host:port/db URL "
                   "(default $FANOUT_STORE or .fanout/runs.sqlite)")
    p.add_argument("--max-runs", type=int, default=4, metavar="N",
                   help="runs executing at once; the rest wait, queued (default 4)")
    p.add_argument("--token-file", metavar="F",
                   help="bearer token on the first line (default $FANOUT_TOKEN)")
    p.add_argument("--token-name", metavar="NAME",
                   help="who a decision made with the token is by (default: token; "
                   "local without a token)")
    p.add_argument("--max-streams", type=int, default=512, metavar="N",
                   help="event streams open at once (default 512; then 503)")
    p.add_argument("--max-queued", type=int, default=256, metavar="N",
                   help="runs waiting for a slot (default 256; then 503 with Retry-After)")
    p.add_argument("--max-connections", type=int, default=1024, metavar="N",
                   help="connections open at once, streams included (default 1024; then 503)")
    p.add_argument("--header-timeout", type=float, default=10.0, metavar="S",
                   help="seconds for a request's head to arrive (default 10; then 408)")
    p.add_argument("--body-timeout", type=float, default=30.0, metavar="S",
                   help="seconds for a request's body to arrive (default 30; then 408)")
    p.add_argument("--ping-interval", type=float, default=15.0, metavar="S",
                   help="seconds between keep-alive comments on a quiet stream (default 15)")
    p.add_argument("--allow-mcp", action="store_true",
                   help="accept jobs that declare mcp_servers (commands this server starts)")
    add_operator_options(p, asks="POST /ask", docs="jobs and asks may read with docs.* "
                         "(repeatable; none: no documents); web.* never reaches private "
                         "addresses from the service")
    p.add_argument("--log-level", default="info",
                   choices=("critical", "error", "warning", "info", "debug"))
    # `--executor temporal`: submitted runs go to Temporal workers (which must reach the
    # store); their events stream from the store.
    add_executor_options(p)
    p.set_defaults(func=Command("serve", "cmd_serve"))


def add_operator_options(p: argparse.ArgumentParser, *, asks: str, docs: str) -> None:
    """The operator's choices for the asks a server answers (``fanout serve``'s POST /ask,
    ``fanout mcp``'s ask): ``--docs``, ``--search``, ``--model``, ``--base-url``,
    ``--tools``. Requests never choose these."""
    p.add_argument("--docs", metavar="DIR", action="append", default=[],
                   help=f"a folder {docs}")
    p.add_argument("--search", metavar="BACKEND",
                   help=f"the web search of {asks}: searxng:URL, brave or tavily "
                   "(default $FANOUT_SEARCH)")
    p.add_argument("--model", metavar="PROVIDER:NAME",
                   help=f"the model of {asks} when the request names none; without one (nor "
                   "a model block in --tools), a retrieval-only answer")
    p.add_argument("--base-url", metavar="URL",
                   help="the endpoint of the server's openai models (a gateway, vLLM, "
                   "llama.cpp, Ollama: …/v1); default $OPENAI_BASE_URL. Requests never "
                   "name one")
    p.add_argument("--tools", metavar="FILE",
                   help=f"the tools file of {asks} when the request sends none (tools, "
                   "research_tools, a model block)")


def add_mcp_parser(sub: Any) -> None:
    """Add ``fanout mcp`` to the subcommands (``sub`` is argparse's subparsers action)."""
    p = sub.add_parser("mcp", help="serve fanout to other agents over MCP (stdio, or --http)")
    p.add_argument("--http", metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio "
                   "(a HOST other than loopback needs a token)")
    p.add_argument("--store", metavar="PATH|URL",
                   help="the run store: a SQLite file or a postgresql:// URL (default "
                   "$FANOUT_STORE or .fanout/runs.sqlite, under the working directory)")
    add_operator_options(p, asks="ask", docs="ask and run_job may read with docs.* "
                         "(repeatable; the first is ask's default); none: no documents")
    p.add_argument("--token-file", metavar="F",
                   help="--http's bearer token on the first line (default $FANOUT_TOKEN)")
    p.add_argument("--max-runs", type=int, default=4, metavar="N",
                   help="runs executing at once; the rest wait, queued (default 4)")
    p.add_argument("--max-queued", type=int, default=256, metavar="N",
                   help="runs waiting for a slot (default 256; then a tool error)")
    p.add_argument("--max-connections", type=int, default=1024, metavar="N",
                   help="--http connections open at once (default 1024; then 503)")
    p.add_argument("--header-timeout", type=float, default=10.0, metavar="S",
                   help="--http: seconds for a request's head to arrive (default 10; then 408)")
    p.add_argument("--body-timeout", type=float, default=30.0, metavar="S",
                   help="--http: seconds for a request's body to arrive (default 30; then 408)")
    p.add_argument("--wait", type=float, default=None, metavar="SECONDS",
                   help="how long ask and run_job wait for their run when the call gives "
                   "no wait_s (default: until it ends); then they answer with the run id "
                   "and the run goes on")
    p.add_argument("--log-level", default="warning",
                   choices=("critical", "error", "warning", "info", "debug"))
    # `--executor temporal`: runs go to Temporal workers, which must reach the store.
    add_executor_options(p)
    p.set_defaults(func=Command("mcp", "cmd_mcp"))


def _server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", default=ADDRESS, metavar="HOST:PORT",
                   help=f"the Temporal frontend (default {ADDRESS})")
    p.add_argument("--namespace", default=NAMESPACE, help=f"default {NAMESPACE}")
    p.add_argument("--task-queue", default=TASK_QUEUE, help=f"default {TASK_QUEUE}")


def add_temporal_commands(sub: Any) -> None:
    """Add ``fanout temporal dev`` and ``fanout worker`` to the subcommands ``sub``."""
    p = sub.add_parser("temporal", help="the Temporal dev server, for jobs on Temporal")
    tsub = p.add_subparsers(dest="temporal_command", required=True, metavar="COMMAND")
    d = tsub.add_parser("dev", help="start the Temporal dev server on loopback (offline)")
    d.add_argument("--port", type=int, default=DEV_PORT, help=f"gRPC port (default {DEV_PORT})")
    d.add_argument("--db-file", default=DEV_DB, metavar="PATH",
                   help=f"where history is kept across restarts (default {DEV_DB})")
    d.set_defaults(func=Command("temporal", "cmd_temporal_dev"))

    w = sub.add_parser("worker", help="run a Temporal worker for fanout jobs")
    _server_options(w)
    w.add_argument("--concurrency", type=int, default=WORKER_CONCURRENCY, metavar="N",
                   help=f"subagent rounds this worker runs at once (default {WORKER_CONCURRENCY})")
    w.set_defaults(func=Command("temporal", "cmd_worker"))


def add_executor_options(p: argparse.ArgumentParser) -> None:
    """Add ``--executor local|temporal`` and where Temporal is to the parser ``p``."""
    p.add_argument("--executor", choices=("local", "temporal"), default="local",
                   help="run in this process (local, the default) or on Temporal workers")
    _server_options(p)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Add ``--executor temporal`` and its options to the ``fanout run`` (and ``ask``)
    parser ``p``."""
    add_executor_options(p)
    p.add_argument("--detach", action="store_true",
                   help="with --executor temporal: print the run and workflow ids and return")
    p.add_argument("--heartbeat-timeout", type=float, default=HEARTBEAT_TIMEOUT, metavar="S",
                   help="with --executor temporal: a worker silent this long is lost and its "
                   f"rounds resume on another (default {HEARTBEAT_TIMEOUT:g} s)")
