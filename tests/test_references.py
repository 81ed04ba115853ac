"""Comments and documents name what exists: the files they point to, the functions they cite."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("coordinator", "subagents", "shared")
# A path into the repository, as comments, docstrings and documents write one.
_PATH = re.compile(
    r"(?<![\w/.-])((?:coordinator|subagents|shared|tests|benchmarks|docs|scenarios)"
    r"/[\w/.*-]*[\w*])"
)
# `name()` in a comment: a function the comment says something about.
_CALL = re.compile(r"#.*?\b([a-z_][a-z0-9_]*)\(\)")
# Functions of other libraries that comments cite by name.
_ELSEWHERE = {"create"}  # the Anthropic SDK's messages.create()


def _sources() -> list[Path]:
    files = [p for top in (*PACKAGES, "tests", "benchmarks") for p in (ROOT / top).rglob("*.py")]
    return [*files, ROOT / "pyproject.toml", ROOT / "README.md", ROOT / "Makefile",
            *(ROOT / "benchmarks").glob("*.md"), *(ROOT / "docs").glob("*.md")]


def _placeholder(ref: str) -> bool:
    """``scenarios/NAME.yaml``, ``subagents/s`` (a rate): a pattern or a unit, not a file."""
    return ref.endswith("/s") or any(part.split(".")[0].isupper() for part in ref.split("/"))


def test_every_path_named_in_the_sources_exists() -> None:
    """A file or folder a comment, docstring or document names is there (a glob matches
    something): the models' names.py and profiles.py had moved into compat/, the MCP
    modules into a folder of their own."""
    missing = []
    for source in _sources():
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            for match in _PATH.finditer(line):
                ref = match.group(1).rstrip(".")
                if _placeholder(ref):
                    continue
                found = any(ROOT.glob(ref)) if "*" in ref else (ROOT / ref).exists()
                if not found:
                    missing.append(f"{source.relative_to(ROOT)}:{number}: {ref}")
    assert missing == []


def test_every_function_a_comment_cites_is_defined() -> None:
    """`name()` in a comment of the packages is a function defined in them (or a builtin,
    or another library's, listed above): `one()` was cited after it was inlined away."""
    files = [p for top in PACKAGES for p in (ROOT / top).rglob("*.py")]
    defined = {m.group(1) for p in files
               for m in re.finditer(r"\bdef ([a-z_][a-z0-9_]*)\(", p.read_text(encoding="utf-8"))}
    unknown = []
    for source in files:
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            for name in _CALL.findall(line):
                if name not in defined and not hasattr(builtins, name) and name not in _ELSEWHERE:
                    unknown.append(f"{source.relative_to(ROOT)}:{number}: {name}()")
    assert unknown == []
