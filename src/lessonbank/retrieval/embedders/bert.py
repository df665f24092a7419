"""The BERT encoder of all-MiniLM-L6-v2 in NumPy: weights, tokenizer and the forward pass.

It reproduces sentence-transformers' output for this model (cosine > 0.9999, pinned by
``tests/data/minilm_reference.json``): WordPiece ids truncated to 256 tokens, embeddings + 6
post-LayerNorm encoder layers with exact (erf) GELU, mean pooling over the real tokens, L2
normalisation. Documents are sorted by length and batched so padding stays small.

With ``backend="onnx"`` the six encoder layers run instead as an ONNX graph built from the same weight
arrays (:mod:`lessonbank.retrieval.embedders.bert_onnx`); the embedding lookup, its LayerNorm and the
pooling stay here. The NumPy layers remain the path wherever onnxruntime is missing or cannot load the
graph, and the one :func:`lessonbank.retrieval.embedders.static.distill` runs, so a static model
distilled anywhere is the same matrix.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lessonbank.errors import ConfigError
from lessonbank.retrieval.blas import blas_controller, one_blas_thread
from lessonbank.retrieval.embedders.base import normalize_rows
from lessonbank.retrieval.embedders.bert_onnx import OnnxEncoder

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

    Vectors = npt.NDArray[np.float32]

log = logging.getLogger("lessonbank.retrieval")

BATCH = 32  # texts per forward pass
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


class Bert:
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

    def encode_id_lists(self, id_lists: Sequence[Sequence[int]], batch_size: int = BATCH) -> Vectors:
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
            with contextlib.nullcontext() if self._onnx is not None else blas_limit(ids.size):
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

    def encode_texts(self, texts: Sequence[str], batch_size: int = BATCH) -> Vectors:
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


def blas_limit(tokens: int) -> contextlib.AbstractContextManager[Any]:
    if tokens > _SINGLE_THREAD_TOKENS:
        return contextlib.nullcontext()
    if blas_controller() is None:
        log.info("threadpoolctl is not installed; small MiniLM batches may be slow on a busy machine")
    return one_blas_thread()


@lru_cache(maxsize=4)
def load_bert(directory: str, max_seq_length: int, backend: str = "numpy") -> Bert:
    """One copy of the weights (90 MB) per process and backend, shared by every embedder that uses them."""
    started = time.perf_counter()
    bert = Bert(Path(directory), max_seq_length, backend)
    log.info("loaded MiniLM (%s) from %s in %.2fs", backend, directory, time.perf_counter() - started)
    return bert
