"""What dense embeddings cost (subagents/research/embedding.py): time, memory, install size.

``passages`` passages of about 200 words each — Git's documentation
(``/usr/share/doc/git-doc/*.txt``, Debian's git-doc) cut every 200 words where it is
installed, made-up English-like text otherwise — are encoded at each (max word pieces,
workers) of ``configs``, every repetition in a fresh interpreter (``python -m
benchmarks.embedding_cost --child``) so its peak RSS (VmHWM) is that run's alone: the
interpreter, numpy, the model and the encoding. Figures: seconds per 1,000 passages
(wall; the CPU seconds in the note), the first ``load_embedder()`` (reading the zip,
checking its sha256, arranging the weights), the same load from the checked copy of the
weights that a first load keeps beside the index (``copy_dir``: no inflating; each in a
fresh interpreter too), the peak RSS, and what the extra adds to an install: the
packages ``fanout[semantic]`` brings beyond fanout's own dependencies, plus the model
package, summed from their installed files. No target: the figures are what
hybrid search pays, weighed by whoever turns it on.
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from benchmarks.docs_child import peak_rss_mib
from benchmarks.stats import BenchResult, Figure, Stats

KEY = "embedding_cost"
ROOT = Path(__file__).resolve().parent.parent
GIT_DOCS = "/usr/share/doc/git-doc/*.txt"
WORDS_PER_PASSAGE = 200

_FALLBACK = (
    "the a of to in is for on with that by this be are from as an or it not can you "
    "when which each file commit branch index repository change history merge remote "
    "server request cache credential token option value default configuration command "
    "output input path name user entry object tree working copy record message author "
    "date time update delete create read write run check test build release version "
    "tag reference pointer log show list add remove reset revert rebase push pull fetch"
)


def passages(n: int) -> tuple[list[str], str]:
    """``n`` passages of about 200 words, and where their words come from."""
    words: list[str] = []
    for path in sorted(glob.glob(GIT_DOCS)):
        with open(path, encoding="utf-8", errors="replace") as f:
            words += re.findall(r"\S+", f.read())
        if len(words) >= n * WORDS_PER_PASSAGE:
            chunks = range(0, n * WORDS_PER_PASSAGE, WORDS_PER_PASSAGE)
            return [" ".join(words[i:i + WORDS_PER_PASSAGE]) for i in chunks], "git-doc"
    rng = random.Random(7)
    vocabulary = _FALLBACK.split()
    made = [" ".join(rng.choices(vocabulary, k=WORDS_PER_PASSAGE)) for _ in range(n)]
    return made, "generated"


def child(n: int, max_tokens: int, workers: int) -> dict[str, float]:
    """One run, in this interpreter: load the model, encode the passages once."""
    from subagents.research.embedding import load_embedder, semantic_unavailable_reason

    texts, _ = passages(n)
    began = time.perf_counter()
    embedder = load_embedder(max_tokens)
    loaded = time.perf_counter() - began
    if embedder is None:
        raise RuntimeError(f"no embedder: {semantic_unavailable_reason()}")
    cpu, wall = time.process_time(), time.perf_counter()
    vectors = embedder.encode(texts, workers=workers)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = peak_rss_mib()  # before counting the word pieces, which is not encoding's cost
    assert vectors.shape == (n, embedder.dim)
    return {"load_s": loaded, "wall_s": wall, "cpu_s": cpu, "peak_rss_mib": peak,
            "mean_pieces": sum(embedder.token_counts(texts)) / n}


def load_child(copy_dir: str) -> dict[str, float]:
    """One load, in this interpreter, keeping (or reading) the weights' copy in ``copy_dir``."""
    from subagents.research.embedding import load_embedder, semantic_unavailable_reason

    began, cpu = time.perf_counter(), time.process_time()
    if load_embedder(copy_dir=Path(copy_dir)) is None:
        raise RuntimeError(f"no embedder: {semantic_unavailable_reason(Path(copy_dir))}")
    return {"load_s": time.perf_counter() - began, "cpu_s": time.process_time() - cpu}


def _in_child(n: int, max_tokens: int, workers: int) -> dict[str, float]:
    return _child("--child", str(n), str(max_tokens), str(workers))


def _child(*args: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.embedding_cost", *args],
        capture_output=True, text=True, check=False, timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the embedding run failed: {done.stderr.strip()[-500:]}")
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def _closure(requirements: Sequence[str]) -> set[str]:
    """The installed distributions these requirements bring, transitively (by name)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = list(requirements)
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo += dist.requires or []
    return seen


def _installed_mib(name: str) -> float:
    dist = metadata.distribution(name)
    total = 0
    for file in dist.files or []:
        path = dist.locate_file(file)
        if os.path.isfile(str(path)):
            total += os.path.getsize(str(path))
    return total / 2**20


def install_size() -> tuple[float, str]:
    """MiB the semantic extra and the model add to fanout's install, and what they are."""
    from subagents.research.embedding import MODEL_DIST

    # This tree's pyproject.toml, not the installed metadata (which may be another tree's).
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    base, semantic = project["dependencies"], project["optional-dependencies"]["semantic"]
    added = [*sorted(_closure(semantic) - _closure(base)), MODEL_DIST]
    sizes = {name: _installed_mib(name) for name in added}
    listed = ", ".join(f"{name} {mib:.1f}" for name, mib in sizes.items())
    return sum(sizes.values()), listed


def run(
    *, passages_n: int = 1_000, configs: Sequence[tuple[int, int]] = ((128, 1),),
    repeat: int = 3,
) -> BenchResult:
    """Encode ``passages_n`` passages at each (max word pieces, workers), ``repeat`` times."""
    _, source = passages(passages_n)
    result = BenchResult(
        KEY, "Embedding cost",
        f"all-MiniLM-L6-v2 in numpy: {passages_n} passages of ~200 words ({source})",
        {"passages": passages_n, "configs": [list(c) for c in configs], "repeat": repeat,
         "source": source},
    )
    from benchmarks.registry import MISSING
    from subagents.research.embedding import MODEL_PIN, locate_model

    if locate_model() is None:  # the extra's packages are the registry's `needs`
        result.figures.append(Figure("not run", "", None, note=f"{MISSING}: {MODEL_PIN}"))
        return result
    loads: list[float] = []
    for max_tokens, workers in configs:
        runs = [_in_child(passages_n, max_tokens, workers) for _ in range(repeat)]
        loads += [r["load_s"] for r in runs]
        per = 1_000 / passages_n
        cpu = Stats.of([r["cpu_s"] * per for r in runs])
        where = f"max {max_tokens} word pieces, {workers} worker{'s' * (workers > 1)}"
        result.figures.append(Figure(
            f"encode, {where}", "s per 1,000 passages",
            Stats.of([r["wall_s"] * per for r in runs]),
            note=f"CPU {cpu.median:.1f} s per 1,000; "
                 f"{runs[0]['mean_pieces']:.0f} word pieces a passage on average"))
        result.figures.append(Figure(
            f"peak RSS, {where}", "MiB", Stats.of([r["peak_rss_mib"] for r in runs])))
    result.figures.append(Figure("first load_embedder()", "s", Stats.of(loads),
                                 note="read the zip, check sha256, arrange the weights"))
    with tempfile.TemporaryDirectory() as copy_dir:
        _child("--load", copy_dir)  # the first load keeps the copy
        copied = [_child("--load", copy_dir) for _ in range(repeat)]
    result.figures.append(Figure(
        "first load_embedder() from the checked copy", "s",
        Stats.of([r["load_s"] for r in copied]),
        note=f"read the copy, check sha256, arrange the weights; CPU "
             f"{Stats.of([r['cpu_s'] for r in copied]).median:.2f} s"))
    mib, listed = install_size()
    result.figures.append(Figure("install size of the semantic extra and the model", "MiB",
                                 Stats.of([mib]), note=f"MiB each: {listed}"))
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        n, max_tokens, workers = (int(a) for a in sys.argv[2:5])
        sys.stdout.write(json.dumps(child(n, max_tokens, workers)) + "\n")
    elif sys.argv[1:2] == ["--load"]:
        sys.stdout.write(json.dumps(load_child(sys.argv[2])) + "\n")
    else:
        sys.stdout.write(json.dumps(run().to_json(), indent=2) + "\n")
