"""The ``fanout`` command line (placeholder until the CLI issue lands)."""

from __future__ import annotations


def main() -> int:
    """Entry point of the ``fanout`` console script."""
    print("fanout: the CLI arrives with the scenario/CLI issue")
    return 0
