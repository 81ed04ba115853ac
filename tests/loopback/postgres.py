"""A throwaway Postgres cluster from Debian's server binaries, on a free loopback port.

    with PostgresCluster.start() as cluster:
        url = cluster.new_database()   # postgresql://fanout@127.0.0.1:PORT/fanout_3

``initdb`` refuses to run as root, so as root the cluster belongs to ``nobody`` (its
folder is made outside pytest's private tmp folders, which ``nobody`` cannot enter).
The server process is asked to die with the process that started it (``prctl``
``PR_SET_PDEATHSIG``), so a killed test run leaves no Postgres behind. ``fsync`` is off
unless asked for: tests need a real server, not a durable one.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_USER = "fanout"


def server_binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` that has initdb and postgres."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    found = [p for p in found if (p / "postgres").exists()]
    return found[-1] if found else None


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresCluster:
    """A running Postgres server that the test session owns."""

    bindir: Path
    root: Path
    port: int
    proc: subprocess.Popen[bytes]
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def admin_url(self) -> str:
        """The URL of the maintenance database."""
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        """The URL of ``database`` in this cluster."""
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "fanout") -> str:
        """Create an empty database; its URL."""
        import psycopg

        name = f"{prefix}_{next(self._names)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    @classmethod
    def start(cls, *, durable: bool = False, timeout: float = 60) -> PostgresCluster:
        """initdb and start a cluster; raise RuntimeError (with the log) if it cannot."""
        bindir = server_binaries()
        if bindir is None:
            raise RuntimeError("no Postgres server binaries under /usr/lib/postgresql")
        root = Path(tempfile.mkdtemp(prefix="fanout-pg-"))
        as_root = os.geteuid() == 0
        user = group = None
        if as_root:  # initdb refuses root
            import pwd

            entry = pwd.getpwnam("nobody")
            user, group = entry.pw_uid, entry.pw_gid
            os.chown(root, user, group)
        data, sockets, log = root / "data", root / "sockets", root / "server.log"

        def run(*args: str) -> None:
            done = subprocess.run(args, capture_output=True, text=True, user=user, group=group,
                                  cwd=root, check=False, timeout=timeout)
            if done.returncode != 0:
                raise RuntimeError(f"{args[0]} failed:\n{done.stdout}\n{done.stderr}")

        run(str(bindir / "initdb"), "-D", str(data), "-U", _USER, "--auth=trust",
            "-E", "UTF8", "--no-sync", "--no-instructions")
        run("mkdir", "-p", str(sockets))
        port = free_port()
        settings = ["-c", f"port={port}", "-c", "listen_addresses=127.0.0.1",
                    "-c", f"unix_socket_directories={sockets}", "-c", "max_connections=200"]
        if not durable:
            settings += ["-c", "fsync=off", "-c", "synchronous_commit=off",
                         "-c", "full_page_writes=off"]
        with open(log, "wb") as sink:
            proc = subprocess.Popen(
                [str(bindir / "postgres"), "-D", str(data), *settings],
                stdout=sink, stderr=subprocess.STDOUT, user=user, group=group, cwd=root,
                preexec_fn=_die_with_parent,
            )
        cluster = cls(bindir, root, port, proc)
        cluster._wait_ready(timeout, log)
        return cluster

    def _wait_ready(self, timeout: float, log: Path) -> None:
        import psycopg

        end = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited:\n{log.read_text(errors='replace')}")
            try:
                psycopg.connect(self.admin_url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > end:
                    self.stop()
                    raise RuntimeError(
                        f"postgres did not start:\n{log.read_text(errors='replace')}"
                    ) from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its folder."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self.stop()
