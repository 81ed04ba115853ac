"""The checked copy of the model's weights: a later load reads it instead of inflating the
zip, gets the same weights, vectors and hybrid ranking, and trusts neither the copy nor a
zip that may have changed since the copy was made.

Like test_embedding.py these need the ``semantic`` extra and the model package (skipped
without them, failed under CI); the zips they make are pointed at through
:func:`~subagents.research.embedding.locate_model`, the module's one seam.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from subagents.research import embedding, modelcopy
from subagents.research.docindex import DocIndex
from subagents.research.embedding import (
    EXTRA_PACKAGES,
    MODEL_NAME,
    WEIGHTS_SHA256,
    Embedder,
    load_embedder,
    locate_model,
    preload,
    semantic_unavailable_reason,
)

QUERIES = ["hello world", "How do I undo the last commit?", "", "credential helpers " * 40]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI installs the semantic extra: `make test` does)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def real_zip() -> Path:
    """The installed model's zip; a skip (a failure under CI) without the extra or model."""
    missing = [n for n in EXTRA_PACKAGES if importlib.util.find_spec(n) is None]
    found = locate_model()
    if missing or found is None:
        _unavailable(f"the semantic extra or the model is not installed (no "
                     f"{', '.join(missing) or embedding.MODEL_DIST})")
        raise AssertionError("unreachable")
    return found


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> Iterator[None]:
    """The copies and zips a test made (87 MB each) leave with it, not with pytest's
    kept temporary folders."""
    yield
    for made in [*tmp_path.rglob("*.safetensors"), *tmp_path.rglob("*.zip")]:
        made.unlink()


@pytest.fixture
def forget(monkeypatch: pytest.MonkeyPatch, real_zip: Path) -> Iterator[Callable[[], None]]:
    """A callable that makes the process forget its loaded model (and any background
    load), as a new process would start; the process's own model comes back after."""

    def reset() -> None:
        monkeypatch.setattr(embedding, "_loaded", None)
        monkeypatch.setattr(embedding, "_embedders", {})
        monkeypatch.setattr(embedding, "_preloading", None)

    reset()
    yield reset


@pytest.fixture(scope="module")
def plain(real_zip: Path) -> Any:
    """The query vectors of a load straight from the zip, with no copy anywhere (a load
    of its own: the process's model may have come through a copy)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embedding, "_loaded", None)
        patch.setattr(embedding, "_embedders", {})
        embedder = load_embedder()
        assert embedder is not None, semantic_unavailable_reason()
        return embedder.encode(QUERIES)


def _copies(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"{MODEL_NAME}-*.safetensors"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _loaded(copy_dir: Path | None) -> Embedder:
    embedder = load_embedder(copy_dir=copy_dir)
    assert embedder is not None, semantic_unavailable_reason(copy_dir)
    return embedder


def _same(a: Any, b: Any) -> None:
    import numpy as np

    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b), "not the same vectors, bit for bit"


def test_the_first_load_keeps_a_checked_copy_and_the_next_reads_it(
    tmp_path: Path, forget: Callable[[], None], plain: Any,
) -> None:
    """A load given a folder leaves one copy there, the pinned weights; a later load from
    it gives the same vectors, bit for bit, as a load from the zip."""
    folder = tmp_path / "model"
    _same(_loaded(folder).encode(QUERIES), plain)
    (copy,) = _copies(folder)
    assert _sha(copy) == WEIGHTS_SHA256
    forget()
    _same(_loaded(folder).encode(QUERIES), plain)
    assert _copies(folder) == [copy]


def test_a_load_from_the_copy_does_not_read_the_zips_weights(
    tmp_path: Path, forget: Callable[[], None], plain: Any, real_zip: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a copy of a zip, the zip's weights are not read at all: a zip whose weights
    member is zeros of the right length loads, through its copy, the same vectors."""
    with zipfile.ZipFile(real_zip) as archive:
        weights = archive.read("model.safetensors")
        tokenizer = archive.read("tokenizer.json")
    fake = tmp_path / "model.zip"
    with zipfile.ZipFile(fake, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("model.safetensors", bytes(len(weights)))
        archive.writestr("tokenizer.json", tokenizer)
    monkeypatch.setattr(embedding, "locate_model", lambda: fake)
    assert load_embedder() is None  # the zip's own weights are refused
    forget()
    folder = tmp_path / "copies"
    name = modelcopy.copy_name(MODEL_NAME, WEIGHTS_SHA256, fake, os.stat(fake))
    modelcopy.keep_copy(folder / name, weights)
    _same(_loaded(folder).encode(QUERIES), plain)


def test_a_changed_copy_is_not_used_and_is_written_again(
    tmp_path: Path, forget: Callable[[], None], plain: Any,
) -> None:
    """A copy with one byte changed (its length kept) is refused by its sha256: the load
    reads the zip, gives the same vectors, and the copy is whole again."""
    folder = tmp_path / "model"
    _loaded(folder)
    (copy,) = _copies(folder)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0xFF
    copy.write_bytes(bytes(data))
    forget()
    _same(_loaded(folder).encode(QUERIES), plain)
    assert _copies(folder) == [copy] and _sha(copy) == WEIGHTS_SHA256


def test_a_zip_changed_since_its_copy_is_checked_again(
    tmp_path: Path, forget: Callable[[], None], real_zip: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same path rewritten with other weights has no copy (its size, times and inode
    are the copy's key): it is read and refused, as without a copy."""
    installed = tmp_path / "site" / "model.zip"
    installed.parent.mkdir()
    shutil.copyfile(real_zip, installed)
    monkeypatch.setattr(embedding, "locate_model", lambda: installed)
    folder = tmp_path / "model"
    _loaded(folder)
    assert len(_copies(folder)) == 1
    forget()
    with zipfile.ZipFile(installed, "w") as archive:
        archive.writestr("model.safetensors", b"not the weights")
        archive.writestr("tokenizer.json", b"{}")
    assert load_embedder(copy_dir=folder) is None
    reason = semantic_unavailable_reason(folder)
    assert reason is not None and "model.safetensors has sha256" in reason


def test_a_folder_that_cannot_be_written_leaves_the_load_as_it_was(
    tmp_path: Path, plain: Any,
) -> None:
    """A copy folder that cannot be made (a file is in its place) costs nothing but the
    copy: the model loads from the zip and gives the same vectors."""
    blocked = tmp_path / "model"
    blocked.write_text("a file, not a folder")
    _same(_loaded(blocked).encode(QUERIES), plain)


def test_preloading_starts_one_load_that_the_next_caller_joins(
    tmp_path: Path, forget: Callable[[], None], plain: Any,
) -> None:
    """Two preloads start one background load; load_embedder then gets its embedder,
    and a preload after the model is loaded starts nothing."""
    folder = tmp_path / "model"
    preload(folder)
    started = embedding._preloading
    preload(folder)
    assert started is not None and embedding._preloading is started
    embedder = _loaded(folder)
    started.join()
    assert load_embedder() is embedder
    _same(embedder.encode(QUERIES), plain)
    forget()
    _loaded(folder)
    preload(folder)
    assert embedding._preloading is None


def _folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "push.md").write_text(
        "# Pushing\n\nUse git push --delete origin topic to remove a branch from the server.\n")
    (docs / "cats.md").write_text("# Cats\n\nThe cat sat on the mat and purred all day long.\n")
    (docs / "undo.md").write_text(
        "# Undoing\n\nTo undo the last commit and keep its changes, run git reset --soft "
        "HEAD~1; git revert makes a new commit that undoes an older one.\n")
    return docs


def test_hybrid_search_ranks_the_same_from_the_copy_as_from_the_zip(
    tmp_path: Path, forget: Callable[[], None], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An index searched with the model loaded straight from the zip, loaded in the
    background while the index opens (writing the copy), and loaded from that copy
    gives the same results, scores and judgement, bit for bit."""
    monkeypatch.delenv("FANOUT_SEMANTIC", raising=False)
    docs, store = _folder(tmp_path), tmp_path / "store"
    queries = ["erasing something stored remotely", "how do I undo the last commit",
               "cat on a mat"]

    def found() -> list[Any]:
        index = DocIndex.for_folder(docs, store)
        try:
            if index.is_stale():
                index.refresh()
            return [(f.results, f.match) for f in (index.find(q, 5) for q in queries)]
        finally:
            index.close()

    _loaded(None)  # the zip, no copy: the index's own load is then this one
    from_zip = found()
    model_dir = DocIndex.for_folder(docs, store, semantic="off").model_dir
    assert _copies(model_dir) == []
    forget()
    in_background = found()  # opening the index preloads, from the zip, keeping a copy
    assert len(_copies(model_dir)) == 1
    forget()
    from_copy = found()
    assert from_zip == in_background == from_copy
    assert from_zip[0][1]["by"] == "semantic" and "similarity" in from_zip[0][0][0]


@pytest.mark.process
def test_a_process_that_ends_during_the_background_load_waits_for_it(
    tmp_path: Path, real_zip: Path,
) -> None:
    """A process that preloads and ends at once exits cleanly once the load is done (the
    copy is written): it is not stopped inside numpy's or the tokenizer's native code."""
    import subprocess
    import sys

    folder = tmp_path / "model"
    code = ("import sys; from pathlib import Path; "
            "from subagents.research.embedding import preload; "
            f"preload(Path({str(folder)!r})); sys.exit(0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(_copies(folder)) == 1 and _sha(_copies(folder)[0]) == WEIGHTS_SHA256
