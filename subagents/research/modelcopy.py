"""A checked copy of the embedding model's weights beside the index, for the next process.

The model's zip holds its weights deflated: inflating the 87 MB costs ~0.4 s of a
process's first :func:`~subagents.research.embedding.load_embedder` (checking their
sha256 ~0.05 s more), paid again by every ``fanout ask`` for its query's vector. So the
first load of a process that was given a folder (the index's ``model/``, beside the
folders' indexes under the store) keeps the weights there as they are in the zip, once
their sha256 was found to be the pinned one, and a later load reads that file instead of
inflating the zip (docs/design.md §10; ``benchmarks/README.md`` has the figures).

What is trusted, and what is not:

- **The copy is never trusted.** Every load hashes the bytes it read and uses them only
  when their sha256 is the pinned one — the same check the zip's member gets; the bytes
  hashed are the bytes used (read into memory once, not mapped: a file changed under a
  mapping would change the weights after their check). A changed, cut or foreign copy is
  ignored and written again. Whatever is done to the store's folder, the weights used
  are the pinned ones.
- **The zip is checked again when it may have changed.** A copy's name holds a digest of
  the zip's path, device, inode, size, mtime_ns and ctime_ns: another zip, or the same
  one rewritten, reinstalled or touched, has no copy yet, so the zip is read and checked
  whole again (a tampered one is refused, as without a copy). The trade-off: a zip
  rewritten in place with the same size and its mtime set back keeps its key only if its
  ctime is the same too, which takes setting the clock back; such a zip's weights would
  not be reported as changed — but they would not be used either (the copy's are, which
  are the pinned ones). The tokenizer is read from the zip and checked at every load.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from pathlib import Path

__all__ = ["copy_name", "keep_copy", "read_copy"]

_SUFFIX = ".safetensors"
# A temporary file older than this was left by a process that died while writing it.
_STALE_TMP_S = 3600.0


def copy_name(stem: str, pinned: str, archive: Path, st: os.stat_result) -> str:
    """The file name of the copy of the zip at ``archive`` (``st``: the zip as opened):
    the model, its pinned weights, and a digest of the zip's identity."""
    identity = "\0".join(str(v) for v in (
        os.path.realpath(archive), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
        st.st_ctime_ns))
    key = hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"{stem}-{pinned[:12]}-{key}{_SUFFIX}"


def read_copy(path: Path, pinned: str, size: int) -> bytes | None:
    """The weights from the copy at ``path``, or None: no copy, or one whose length is
    not ``size`` (the weights' in the zip) or whose sha256 is not ``pinned`` (removed)."""
    try:
        with open(path, "rb") as f:
            data = f.read() if os.fstat(f.fileno()).st_size == size else None
    except OSError:
        return None
    if data is not None and hashlib.sha256(data).hexdigest() == pinned:
        return data
    with contextlib.suppress(OSError):
        path.unlink()
    return None


def keep_copy(path: Path, data: bytes) -> None:
    """Keep ``data`` (the zip's weights, whose sha256 was found to be the pinned one) at
    ``path`` for the next process; remove the copies of other zips or models beside it
    (the same stem, the part of the name before the pinned digest).

    Best effort: the copy only spares a later process the zip's inflation, so a folder
    that cannot be written (read-only, full) leaves the load as it was, saying nothing.
    Written under a temporary name and renamed: a reader sees a whole copy or none.
    """
    folder, stem = path.parent, path.name.rsplit("-", 2)[0]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{stem}-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    now = time.time()
    with contextlib.suppress(OSError):
        for other in folder.iterdir():
            stale_tmp = (other.name.startswith(f".{stem}-") and other.suffix == ".tmp"
                         and now - other.stat().st_mtime > _STALE_TMP_S)
            old_copy = (other.name.startswith(f"{stem}-") and other.suffix == _SUFFIX
                        and other.name != path.name)
            if stale_tmp or old_copy:
                with contextlib.suppress(OSError):
                    other.unlink()
