"""Bounding a fuzz case in time and memory: each runs in a forked child the parent can kill.

A fork costs milliseconds (the child shares the parent's imported modules), so every
case can have a hard wall-time bound (the parent SIGKILLs a child that hangs) and a
memory bound (``RLIMIT_AS`` in the child), and a case that hangs or explodes cannot take
the test session down with it.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """How a bounded case ended: its value, or why it did not return one."""

    value: str | None = None
    failure: str | None = None


def _address_space() -> int:
    """This process's current virtual size in bytes (the child's limit is set above it)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0  # pragma: no cover - Linux always reports it


def bounded(fn: Callable[[], str], *, seconds: float, extra_memory: int = 1 << 30) -> Outcome:
    """Run ``fn`` in a forked child with ``seconds`` of wall time and ``extra_memory`` bytes.

    The child returns ``fn()``'s string; an AssertionError or any other exception (a
    traceback), a hang past ``seconds`` or a death by memory becomes ``failure``.
    """
    read_end, write_end = os.pipe()
    limit = _address_space() + extra_memory
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 0
        try:
            os.close(read_end)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            try:
                message = "value:" + fn()
            except AssertionError as exc:
                message = f"failure:{exc}"
            except BaseException:  # the point of the child: report anything, then die
                message = "failure:" + traceback.format_exc()
            data = message.encode("utf-8", "replace")
            while data:
                data = data[os.write(write_end, data) :]
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + seconds
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                return Outcome(failure=f"still running after {seconds:g}s of wall time")
            ready, _, _ = select.select([read_end], [], [], left)
            if ready:
                chunk = os.read(read_end, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_end)
        _, code = os.waitpid(pid, 0)
    text = b"".join(chunks).decode("utf-8", "replace")
    if text.startswith("value:"):
        return Outcome(value=text[6:])
    if text.startswith("failure:"):
        return Outcome(failure=text[8:])
    return Outcome(failure=f"the case died (wait status {code}; out of memory?)")
