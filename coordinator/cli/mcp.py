"""`fanout mcp`: fanout as an MCP server for other agents (docs/design.md §16).

Over stdio by default (the client starts it; stdout is the protocol's, so everything for
people goes to stderr), or streamable HTTP at ``http://HOST:PORT/mcp`` with ``--http``.
The model, documents and search backend are the operator's flags, as for ``fanout
serve``; the token and the limits too.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from coordinator.cli.common import EXIT_BAD_INPUT, EXIT_OK, check_store
from coordinator.cli.serve import ask_settings
from coordinator.store.backend import redact
from coordinator.store.runs import StoreError, store_path


def _host_port(value: str) -> tuple[str, int]:
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or not host:
        from shared.errors import InputFileError

        raise InputFileError("--http", None, "http", "HOST:PORT, e.g. 127.0.0.1:8766",
                             got=repr(value))
    return host.strip("[]"), int(port)


def cmd_mcp(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Check the settings, then serve until the client leaves (stdio) or a signal (HTTP)."""
    import anyio

    from coordinator.mcpserve import DoorConfig, serve_http, serve_stdio
    from coordinator.serve import ServeError, bind_socket, check_bind, read_token, url_of

    for name, value, low in (("--max-runs", args.max_runs, 1),
                             ("--max-queued", args.max_queued, 0),
                             ("--max-connections", args.max_connections, 2),
                             ("--header-timeout", args.header_timeout, 0.1),
                             ("--body-timeout", args.body_timeout, 0.1),
                             ("--wait", 0 if args.wait is None else args.wait, 0)):
        if value < low:
            err.print(f"[bold red]error:[/] {name}: expected at least {low}, got {value}")
            return EXIT_BAD_INPUT
    from coordinator.jobfile.ask import parse_search_flag

    if args.search is not None:
        parse_search_flag(args.search)  # a bad backend is exit 2 now, not an error per ask
    elif os.environ.get("FANOUT_SEARCH"):
        parse_search_flag(os.environ["FANOUT_SEARCH"], "FANOUT_SEARCH")
    tools_text = ask_settings(args)
    endpoint = _host_port(args.http) if args.http else None
    try:
        target = store_path(args.store)
        check_store(target)  # create or migrate it now; an unusable store is exit 2
        docs = tuple(Path(d).expanduser().resolve() for d in args.docs)
        missing = [str(d) for d in docs if not d.is_dir()]
        if missing:
            raise ServeError(f"--docs {missing[0]}: expected a folder of documents")
        token = read_token(args.token_file, os.environ) if endpoint else None
        sock = None
        if endpoint is not None:
            check_bind(endpoint[0], token)
            sock = bind_socket(*endpoint)
    except (ServeError, StoreError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    config = DoorConfig(
        store=target, docs=docs, search=args.search, model=args.model, tools_text=tools_text,
        max_runs=args.max_runs, max_queued=args.max_queued, wait_s=args.wait,
        log_level=args.log_level, executor=args.executor,
        temporal=({"address": args.address, "namespace": args.namespace,
                   "task_queue": args.task_queue} if args.executor == "temporal" else None),
    )
    if sock is None:
        anyio.run(serve_stdio, config)
        return EXIT_OK
    guard = "a bearer token required" if token else "no token: loopback only"
    # Told to stop before uvicorn handles the signals (it takes them over once it
    # serves): a clean exit 0, as afterwards, not death by SIGTERM. Nothing ran yet.
    signal.signal(signal.SIGTERM, _stop_before_serving)
    err.print(f"fanout mcp: streamable HTTP on {url_of(sock)}/mcp (store "
              f"{escape(redact(target))}, {args.max_runs} runs at once, {guard})",
              highlight=False)
    try:
        anyio.run(lambda: serve_http(config, sock, token=token,
                                     max_connections=args.max_connections,
                                     header_timeout_s=args.header_timeout,
                                     body_timeout_s=args.body_timeout,
                                     log_level=args.log_level))
    finally:
        sock.close()
    return EXIT_OK


def _stop_before_serving(signum: int, frame: object) -> None:
    raise SystemExit(EXIT_OK)
