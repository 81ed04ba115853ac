"""The ``fanout`` command: the parser and one module of handlers per group of commands."""

from coordinator.cli.main import main
from coordinator.cli.parser import build_parser

__all__ = ["build_parser", "main"]
