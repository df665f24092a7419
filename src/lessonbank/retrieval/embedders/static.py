"""``StaticEmbedder``: a model2vec-style static model distilled locally from MiniLM.

Every vocabulary token is run through MiniLM once, the 384-d outputs are reduced by PCA, and rows are
weighted by a Zipf estimate of token frequency (SIF). A text is then the normalised mean of its
tokens' rows: no matrix products at query time.

Identity and caching: the name carries the dimensions, the recipe version and any vocabulary limit.
The matrix is cached under ``$LESSONBANK_HOME/models/`` with a header recording the recipe and the
source model, rebuilt when either changes, and written to a temporary file then renamed, so a reader
never sees half a matrix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import struct
import tempfile
import threading
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lessonbank.retrieval.embedders.base import check_text, check_texts, normalize_rows, require_numpy
from lessonbank.retrieval.embedders.bert import blas_limit, clip, load_bert
from lessonbank.retrieval.embedders.minilm import MAX_SEQ_LENGTH, BundledModel, require_runtime

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

    Vectors = npt.NDArray[np.float32]

log = logging.getLogger("lessonbank.retrieval")

_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
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


class StaticEmbedder(BundledModel):
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
        super().__init__(model_path)
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
                require_runtime()
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
                # Mapped, not read: a query touches a few hundred of its ~30k rows, and reading all
                # 31 MB was most of a new process's first hybrid recall's embedding cost.
                mapped = _mapped_member(path, "vectors.npy")
                matrix = mapped if mapped is not None else data["vectors"]
                matrix = np.ascontiguousarray(matrix, dtype=np.float32)
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


def _mapped_member(path: Path, member: str) -> Vectors | None:
    """The array ``member`` of the ``.npz`` at ``path`` mapped read-only where it lies (``np.savez``
    stores members uncompressed), or None when it is compressed or not a plain array."""
    import numpy as np

    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(30)  # the member's local header: its name and extra field follow
        if len(local) != 30 or local[:4] != b"PK\x03\x04":
            raise ValueError(f"{member} has no local header")
        name_length, extra_length = struct.unpack("<HH", local[26:30])
        handle.seek(info.header_offset + 30 + name_length + extra_length)
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            return None
        offset = handle.tell()
    if fortran_order or dtype.hasobject or len(shape) != 2:
        return None
    if offset + dtype.itemsize * shape[0] * shape[1] > path.stat().st_size:
        raise ValueError(f"{member} is cut short")
    mapped: Vectors = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
    return mapped


def distill(directory: Path, *, dim: int = 256, vocab_limit: int | None = None) -> Vectors:
    """The static matrix (vocab, dim): MiniLM output per token, PCA to ``dim``, SIF-weighted by rank.

    Each token is encoded as ``[CLS] token [SEP]`` and its own output state is kept (recipe 3; the
    mean over all three positions, as a one-token sentence would be pooled, retrieves worse: recall@5
    0.73 against 0.79 on the ruff-docs benchmark). Special and ``[unused*]`` tokens keep zero rows (they never carry meaning). Token id
    stands in for frequency rank, as model2vec does: WordPiece vocabularies are roughly ordered that way.
    """
    import numpy as np

    bert = load_bert(str(directory), MAX_SEQ_LENGTH)
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
        with blas_limit(batch.size):
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
