"""``HashEmbedder``: a deterministic embedder without a model, for tests and trying vector recall.

Identity: the name is ``hash-DIM``; the vector of a text depends only on its stems and character
trigrams (stable blake2b buckets, never Python's salted ``hash()``), so it is the same in every process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from lessonbank.retrieval.embedders.base import check_text, check_texts, normalize_rows, require_numpy
from lessonbank.text import STOPWORDS, stem, words

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

# Long texts are cut before hashing: a lesson or a query never needs more, and a 2 MB field must
# not cost seconds. The cut is part of the vector, so it is part of the name's contract.
_HASH_MAX_CHARS = 20_000
# Trigrams carry spelling closeness (typos, inflections the stemmer misses); word stems carry
# meaning. Stems weigh more so that sharing a word beats sharing a few letters.
_TRIGRAM_WEIGHT = 0.35


@lru_cache(maxsize=200_000)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Stable bucket and sign of a feature: blake2b, never Python's salted ``hash()``."""
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return digest % dim, 1.0 if (digest >> 63) & 1 else -1.0


class HashEmbedder:
    """Deterministic embedder without a model: signed feature hashing of stems and character trigrams.

    Meant for tests and for trying vector recall without installing a model: similar wording gives
    a clearly higher cosine than unrelated text, but it knows no synonyms. ``__test__ = False`` keeps
    pytest from collecting it.
    """

    __test__ = False

    releases_gil = False  # pure Python: another thread would only wait for the GIL

    def __init__(self, dim: int = 256) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise ValueError(f"HashEmbedder dim must be an integer >= 8, got {dim!r}")
        require_numpy()
        self._dim = dim

    @property
    def name(self) -> str:
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self._dim})"

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        items = check_texts(texts)
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        for row, text in enumerate(items):
            self._fill(out[row], text)
        return normalize_rows(out)

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self.embed_documents([check_text(text)])[0]
        return vector

    def _fill(self, row: Vectors, text: str) -> None:
        tokens = [w for w in words(text[:_HASH_MAX_CHARS]) if w not in STOPWORDS]
        for token in tokens:
            index, sign = _bucket("w:" + stem(token), self._dim)
            row[index] += sign
            padded = f"<{token}>"
            for start in range(len(padded) - 2):
                index, sign = _bucket("t:" + padded[start : start + 3], self._dim)
                row[index] += sign * _TRIGRAM_WEIGHT
