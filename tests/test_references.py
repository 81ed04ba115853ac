"""Comments and documents name what exists: the files they point to, the functions they cite."""

from __future__ import annotations

import builtins
import re
import subprocess
from pathlib import Path

import pytest

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


# --- the design lives in docs/: citations point there, never outside the repository ---

DOCS = ROOT / "docs"
SECTION = "\u00a7"  # escaped: this file must pass its own checks
# The design the code cites is docs/design.md; these forms named one outside the
# repository (written without the literal words, for the same reason).
_OUTSIDE = re.compile(
    "DES" + r"IGN\s*(?:#\s*)?" + SECTION
    + "|DES" + r"IGN's\b"
    + "|DES" + r"IGN\.md"
    + r"|\.\./shared/"
)
INDEX = "docs/design.md"
_CITED = re.compile(re.escape(INDEX) + r"(?:\s*#)?\s*" + SECTION + r"(\d+(?:\.\d+)*)")
_BARE = re.compile(SECTION + r"(?=\d)")
_HEADED = re.compile(re.escape(INDEX) + r"(?:\s*#)?\s*$")
# The end of an earlier section of the same citation: the section sign and its number,
# maybe a quoted name of a part of it, then "and", "or", a comma, a dash or a slash.
_CHAIN = re.compile(
    SECTION + r"\d+(?:\.\d+)*(?:'s)?(?:,?\s*\"[^\"\n]{1,80}\")?"
    r"(?:\s*,\s*|\s+and\s+|\s+or\s+|\s*[–-]\s*|\s*/\s*)$"
)
# A quoted name right after the number: a heading's words, maybe broken across two lines.
_NAMED = re.compile(
    SECTION + r"\d+(?:\.\d+)*,?[ \t]*\"([A-Za-z][^\"\n]{0,79}(?:\n[ \t]*#?[ \t]*[^\"\n]{1,80})?)\""
)
_HEADING = re.compile(r"^#+\s+(.+?)\s*$", re.MULTILINE)


def _citing_sources() -> list[Path]:
    """The sources and documents that cite the design (docs/ aside: it is the design),
    the scenario and job files with them."""
    yaml = [p for top in ("scenarios", "tests") for p in (ROOT / top).rglob("*.y*ml")]
    return [p for p in (*_sources(), *yaml) if not p.is_relative_to(DOCS)]


def _design_sections() -> set[str]:
    """The section numbers docs/design.md has headings for (a heading that starts with
    the section sign and the number)."""
    text = (DOCS / "design.md").read_text(encoding="utf-8")
    return set(re.findall(r"^#+\s*" + SECTION + r"(\d+(?:\.\d+)*)", text, re.MULTILINE))


def _headed(text: str, at: int) -> bool:
    """Whether the section sign at ``at`` belongs to a citation of docs/design.md."""
    before = text[max(0, at - 400):at]
    while not _HEADED.search(before):
        chain = _CHAIN.search(before)
        if chain is None:
            return False
        before = before[:chain.start()]
    return True


def test_every_design_citation_names_a_section_of_docs_design() -> None:
    """A comment, docstring or scenario that cites a section of the design names
    docs/design.md, and the section is there: the old citations named a document outside
    the repository, which whoever cloned it could not read."""
    sections = _design_sections()
    problems = []
    for source in _citing_sources():
        text = source.read_text(encoding="utf-8")
        where = source.relative_to(ROOT)
        for match in _BARE.finditer(text):
            if not _headed(text, match.start()):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{where}:{line}: a section not headed by docs/design.md")
        for number in _CITED.findall(text):
            if number not in sections:
                problems.append(f"{where}: docs/design.md has no section {number}")
    assert problems == []


def test_every_named_part_of_a_section_is_a_heading_in_docs() -> None:
    """A citation that names a part of a section (a quoted name after the number, such as
    "Answer checks") names a heading of one of docs/'s files, where the index leads."""
    headings = {
        " ".join(h.lower().split())
        for doc in DOCS.glob("*.md")
        for h in _HEADING.findall(doc.read_text(encoding="utf-8"))
    }
    missing = []
    for source in _citing_sources():
        for name in _NAMED.findall(source.read_text(encoding="utf-8")):
            wanted = " ".join(re.sub(r"\n\s*#?", " ", name).lower().split())
            if not any(h == wanted or h.startswith(wanted) for h in headings):
                missing.append(f"{source.relative_to(ROOT)}: {name!r}")
    assert missing == []


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's rule) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_links_between_docs_lead_somewhere() -> None:
    """Every link from one file of docs/ to another names a file there and, after ``#``,
    one of its headings (or an explicit anchor)."""
    anchors = {
        doc.name: {_slug(h) for h in _HEADING.findall(text)}
        | set(re.findall(r'<a id="([^"]+)"', text))
        for doc in DOCS.glob("*.md")
        for text in [doc.read_text(encoding="utf-8")]
    }
    broken = []
    for doc in DOCS.glob("*.md"):
        for target, anchor in re.findall(r"\]\(([\w.-]+\.md)(?:#([\w-]+))?\)",
                                         doc.read_text(encoding="utf-8")):
            if target not in anchors or (anchor and anchor not in anchors[target]):
                broken.append(f"docs/{doc.name}: {target}#{anchor}")
    assert broken == []


@pytest.mark.process
def test_no_tracked_file_points_outside_the_repository() -> None:
    """No tracked file cites the design that used to live outside the repository (the
    old citation form, the old file's name, a path beside the repository): whoever clones
    the project can read everything its files point to."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                            check=True).stdout.decode("utf-8").split("\0")
    outside = []
    for name in filter(None, listed):
        path = ROOT / name
        if not path.is_file():
            continue  # deleted in the work tree
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not text
        for match in _OUTSIDE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            outside.append(f"{name}:{line}: {match.group(0)!r}")
    assert outside == []
