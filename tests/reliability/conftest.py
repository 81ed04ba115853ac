"""The reliability suites' hypothesis profile (profiles.py) and the counts they print."""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests.reliability import profiles  # noqa: F401 - registers and loads the profile
from tests.reliability.counts import COUNTS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print what the reliability suites generated, injected, fuzzed, killed and sent."""
    if not COUNTS:
        return
    c = COUNTS
    write = terminalreporter.write_line
    terminalreporter.section("reliability")
    faults = sorted((k.split(":", 1)[1], n) for k, n in c.items() if k.startswith("fault:"))
    by_kind = ", ".join(f"{kind} {n}" for kind, n in faults)
    write(
        f"profile {settings.get_current_profile_name()}: {c['cases']} chaos cases generated, "
        f"{c['faults']} faults injected" + (f" ({by_kind})" if by_kind else "")
    )
    write(
        f"fuzzed inputs: {c['files']} files ({c['files:cli']} through the CLI), "
        f"{c['results']} tool results, {c['mcp']} MCP replies, {c['model']} model replies"
    )
    write(
        f"kills: {c['kills']} SIGKILLs of `fanout run` ({c['kills:store_write']} inside a "
        f"store write, {c['kills:retry_round']} in the retry round), "
        f"{c['kills:virtual']} simulated in virtual time "
        f"({c['kills:during_effect']} during a non-idempotent call), "
        f"{c['kills:serve']} of `fanout serve` during 50 runs"
    )
    write(f"requests: {c['requests']} sent to `fanout serve`")
