"""The ``fanout`` command: the parser and one module of handlers per group of commands."""

from coordinator.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
