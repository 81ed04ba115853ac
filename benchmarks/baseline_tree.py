"""The baseline of a ``make bench`` run: an earlier tree's benchmarks, run side by side.

Every ``÷ baseline`` in the table divides two figures measured in the same run, on the
same machine, minutes apart: the current tree's, and the same benchmark of the
baseline tree (``git archive`` of a ref into a temporary directory, its module run in a
fresh interpreter on this one, right after the current tree's). Nothing is read from a
file of figures taken in another session.

The baseline tree's benchmark runs with the current tree's parameters for the run's
mode (``make bench``'s sizes, or ``make bench-full``'s), not with its own registry's: the
two sides of a ratio measure the same workload, and a tree from before a mode existed
(or with other sizes in it) is still run at this run's size.

The ref is ``--baseline-ref``; by default the newest release tag, and without one the
first parent of ``HEAD`` (on ``main`` after a merge: the tree before that merge).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NO_SUCH_BENCHMARK = 3
"""The driver's exit status when the baseline tree's registry has no such key."""

# Run in the baseline tree (its own ``benchmarks`` package first on the path): its
# registry's entry for the key names the module; the parameters are this run's.
_DRIVER = """
import importlib, json, sys
from pathlib import Path
from benchmarks.registry import REGISTRY

def decode(value):
    if isinstance(value, dict):
        if set(value) == {"__path__"}:
            return Path.cwd() / value["__path__"]
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(decode(v) for v in value)
    return value

key, params, out = sys.argv[1], decode(json.loads(sys.argv[2])), sys.argv[3]
entry = next((e for e in REGISTRY if e.key == key), None)
if entry is None:
    sys.exit(NO_SUCH_BENCHMARK)
result = importlib.import_module(entry.module).run(**params)
Path(out).write_text(json.dumps({"benchmarks": {key: result.to_json()}}))
""".replace("NO_SUCH_BENCHMARK", str(NO_SUCH_BENCHMARK))


def encode_params(params: Mapping[str, Any]) -> str:
    """``params`` as JSON for the driver: tuples as lists (read back as tuples), a path
    inside this tree as its place relative to the tree (read back inside the baseline
    tree, so it runs on its own files), any other path as it is."""

    def encode(value: Any) -> Any:
        if isinstance(value, Path):
            inside = value.resolve().is_relative_to(ROOT)
            return {"__path__": str(value.resolve().relative_to(ROOT) if inside else value)}
        if isinstance(value, Mapping):
            return {str(k): encode(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [encode(v) for v in value]
        return value

    return json.dumps(encode(params))

__all__ = ["BaselineTree", "default_ref"]


def _git(*args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()[:300]}")
    return proc.stdout.strip()


def default_ref() -> str:
    """The newest release tag, or ``HEAD~1`` when the repository has none."""
    try:
        return _git("describe", "--tags", "--abbrev=0")
    except RuntimeError:
        return "HEAD~1"


@dataclass
class BaselineTree:
    """A ref checked out (``git archive``) in a temporary directory, run benchmark by
    benchmark; ``unavailable`` says why it cannot run at all (no git, an unknown ref)."""

    ref: str
    commit: str = ""
    path: Path | None = None
    unavailable: str = ""
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> BaselineTree:
        try:
            self.commit = _git("rev-parse", "--short", f"{self.ref}^{{commit}}")
            archive = subprocess.run(["git", "archive", "--format=tar", self.commit],
                                     cwd=ROOT, capture_output=True, check=True).stdout
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            self.unavailable = f"baseline {self.ref!r} unavailable: {exc}"[:300]
            return self
        self._tmp = tempfile.TemporaryDirectory(prefix="fanout-baseline-")
        self.path = Path(self._tmp.name)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(self.path, filter="data")
        imported = self._python("import coordinator; print(coordinator.__file__)")
        if not imported.startswith(str(self.path)):
            self.unavailable = f"the baseline tree imports another checkout: {imported}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    def _env(self) -> dict[str, str]:
        assert self.path is not None
        return {**os.environ, "PYTHONPATH": str(self.path)}

    def _python(self, code: str) -> str:
        proc = subprocess.run([sys.executable, "-c", code], cwd=self.path, env=self._env(),
                              capture_output=True, text=True, check=False)
        return proc.stdout.strip() or proc.stderr.strip()[-300:]

    def run(self, key: str, params: Mapping[str, Any]) -> dict[str, Any] | str:
        """The baseline tree's figures of benchmark ``key`` run with ``params`` (its results
        entry), or why not."""
        if self.unavailable or self.path is None:
            return self.unavailable or "no baseline tree"
        out = self.path / f"baseline-{key}.json"
        command = [sys.executable, "-c", _DRIVER, key, encode_params(params), str(out)]
        proc = subprocess.run(command, cwd=self.path, env=self._env(), capture_output=True,
                              text=True, check=False)
        if proc.returncode == NO_SUCH_BENCHMARK:
            return f"the baseline tree ({self.commit}) has no {key} benchmark"
        if not out.exists():
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            return f"the baseline tree's {key} did not run: {tail[0][:200]}"
        doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        bench: dict[str, Any] | None = doc.get("benchmarks", {}).get(key)
        if bench is None:
            return f"the baseline tree ({self.commit}) gave no {key} figures"
        self.runs[key] = bench
        return bench

    def describe(self) -> dict[str, Any]:
        """What results.json records of the baseline: ref, commit and its own figures."""
        return {"ref": self.ref, "commit": self.commit, "unavailable": self.unavailable or None,
                "benchmarks": self.runs}
