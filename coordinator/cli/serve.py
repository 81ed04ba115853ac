"""`fanout serve`: the HTTP API and the web page over the run store (docs/design.md §8)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from coordinator.cli.common import EXIT_BAD_INPUT, EXIT_OK, check_store
from coordinator.store.backend import redact
from coordinator.store.runs import StoreError, store_path

if TYPE_CHECKING:
    from coordinator.engine.executor import TemporalTarget


def ask_settings(args: argparse.Namespace) -> str | None:
    """Check ``--model``, ``--base-url`` and ``--tools`` now (exit 2, not a 422 per ask);
    the tools file's text. ``--base-url`` becomes the process's endpoint for its provider
    (``OPENAI_BASE_URL``, as the SDK reads it): the operator's choice for every run."""
    from coordinator.jobfile.ask import check_base_url, parse_model_flag

    provider = parse_model_flag(args.model)[0] if args.model else "openai"
    if args.base_url is not None:
        check_base_url(args.base_url)
        if provider not in ("openai", "anthropic"):
            from shared.errors import InputFileError

            raise InputFileError("--base-url", None, "model", "--model openai:NAME too",
                                 got=repr(args.model))
        os.environ[f"{provider.upper()}_BASE_URL"] = args.base_url
    if args.tools is None:
        return None
    from coordinator.jobfile.ask import build_ask_job
    from shared.errors import InputFileError

    try:
        text = Path(args.tools).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(args.tools, None, "<file>", "a readable tools file",
                             got=str(exc)) from None
    # Composed once as an ask would compose it: a bad file is exit 2 here (with the first
    # served folder: a file holding only a model block researches the documents).
    build_ask_job("check", args.tools, model=args.model,
                  docs=args.docs[0] if args.docs else None)
    return text


def _temporal_target(args: argparse.Namespace) -> TemporalTarget | None:
    """Where ``--executor temporal`` sends runs (None: this process runs them)."""
    if getattr(args, "executor", "local") != "temporal":
        return None
    from coordinator.engine.executor import TemporalTarget

    return TemporalTarget(args.address, args.namespace, args.task_queue)


def cmd_serve(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Check the settings, bind, then serve until SIGTERM or SIGINT (exit 0)."""
    # The service's dependencies (FastAPI, uvicorn) load only for this command.
    from coordinator.serve import (
        ServeConfig,
        ServeError,
        bind_socket,
        check_bind,
        read_token,
        run_server,
        url_of,
    )

    for name, value, low in (("--max-runs", args.max_runs, 1),
                             ("--max-streams", args.max_streams, 1),
                             ("--max-queued", args.max_queued, 0),
                             ("--max-connections", args.max_connections, 2),
                             ("--ping-interval", args.ping_interval, 0.01),
                             ("--header-timeout", args.header_timeout, 0.1),
                             ("--body-timeout", args.body_timeout, 0.1)):
        if value < low:
            err.print(f"[bold red]error:[/] {name}: expected at least {low}, got {value}")
            return EXIT_BAD_INPUT
    if args.search is not None:
        from coordinator.jobfile.ask import parse_search_flag

        parse_search_flag(args.search)  # a bad backend is exit 2 now, not a 422 per ask
    ask_tools = ask_settings(args)
    try:
        token = read_token(args.token_file, os.environ)
        check_bind(args.host, token)
        target = store_path(args.store)
        check_store(target)  # create or migrate it now; an unusable store is exit 2
        docs = tuple(Path(d).expanduser().resolve() for d in args.docs)
        missing = [str(d) for d in docs if not d.is_dir()]
        if missing:
            raise ServeError(f"--docs {missing[0]}: expected a folder of documents")
        sock = bind_socket(args.host, args.port)
    except (ServeError, StoreError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    config = ServeConfig(
        store=target, host=args.host, port=sock.getsockname()[1], max_runs=args.max_runs,
        token=token, token_name=args.token_name, max_streams=args.max_streams,
        ping_interval_s=args.ping_interval,
        allow_mcp=args.allow_mcp, max_queued=args.max_queued,
        max_connections=args.max_connections, header_timeout_s=args.header_timeout,
        body_timeout_s=args.body_timeout,
        docs=docs, search=args.search, ask_model=args.model, ask_tools=ask_tools,
        temporal=_temporal_target(args),
    )
    guard = "a bearer token required" if token else "no token: loopback only"
    err.print(
        f"fanout serve: listening on {url_of(sock)}/ (store {escape(redact(target))}, "
        f"{args.max_runs} runs at once, {guard})",
        highlight=False,
    )
    try:
        run_server(config, sock, log_level=args.log_level)
    finally:
        sock.close()
    return EXIT_OK
