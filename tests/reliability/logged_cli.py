"""``fanout`` with every simulated tool execution logged, for the SIGKILL tests.

Run as ``python -m tests.reliability.logged_cli ARGS...``: the CLI as ``fanout ARGS``,
except that each execution of a simulated tool appends one JSON line (subtask, tool,
response kind) to ``$FANOUT_EXEC_LOG`` with a single ``write`` to an ``O_APPEND`` file,
which the kernel keeps whatever happens to the process an instant later.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from coordinator.cli import main
from subagents.simulated.spec import ResponseSpec, SimToolSpec
from subagents.simulated.tools import SimulatedTools

_original = SimulatedTools._next_response


def _logged(
    self: SimulatedTools, name: str, spec: SimToolSpec, subtask_id: str, args: Mapping[str, Any]
) -> ResponseSpec:
    chosen = _original(self, name, spec, subtask_id, args)
    line = json.dumps({"subtask": subtask_id, "tool": name, "kind": chosen.kind,
                       "error": chosen.error}) + "\n"
    fd = os.open(os.environ["FANOUT_EXEC_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return chosen


if __name__ == "__main__":
    SimulatedTools._next_response = _logged  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
