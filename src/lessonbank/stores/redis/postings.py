"""The Redis token postings: compact, append-only strings instead of a sorted set per token.

A sorted set costs Redis ~100 bytes an entry; a million 1 KB lessons hold ~80M (token, lesson)
pairs, more memory than a shared Redis has. Each pair is now 12 bytes in a string per token.

Keys of namespace ``ns`` (see ``db.py`` for ``B`` and the encoding of each part):

- ``B{ns}:post:{token}`` string: records of 12 bytes, little-endian (document number u32, the
  token's BM25 factor in that lesson f64: the double a sorted set scored it by, so scores and
  their ties, and the near-duplicate check's candidates, are what they were), appended as lessons
  are written;
- ``B{ns}:docctr`` counter of document numbers; ``B{ns}:docs`` hash document number → lesson id;
  the lesson hash holds its own ``docno`` and ``terms`` (its tokens' key parts, ``\\x1f``-separated);
- ``B{ns}:dead`` bitmap: bit n set when document n no longer holds its lesson's tokens;
- ``B{ns}:df`` hash token → how many live lessons hold it (BM25's document frequency).

Invariants: a lesson whose indexed words change gets a new document number in the same script
that marks the old one dead, appends the new records and moves the counts (``INDEX`` in
``db.BATCH_SCRIPT``, queued in the lesson's MULTI/EXEC), so a reader never counts a lesson twice;
``UNINDEX`` retires it on removal. Dead records are dropped by whoever reads a posting holding more
dead records than live ones (under WATCH, so an append meanwhile wins); a posting whose last live
lesson goes is deleted with its count. Document numbers are never reused, so the dead bitmap is
only ever set, and a reader holding an old copy of it at worst keeps a record the ids drop.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from redis.exceptions import WatchError

from lessonbank.stores.redis.db import RedisDatabase, key_part

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("lessonbank.stores")

RECORD_BYTES = 12
# A posting is rewritten without its dead records once they outnumber its live ones (and at least
# this many): reads stay within twice the live work, and small postings are left alone.
COMPACT_MIN = 256


def _record_type() -> Any:
    import numpy as np

    return np.dtype([("doc", "<u4"), ("w", "<f8")])


class RedisPostings:
    """Reads (and compacts) the postings of one Redis database; ``db.BATCH_SCRIPT`` writes them."""

    def __init__(self, db: RedisDatabase) -> None:
        self.db = db

    def base(self, namespace: str) -> str:
        """The namespace's key prefix ``B{ns}:``, as the ``INDEX``/``UNINDEX`` batch commands take it."""
        return self.db.k(namespace, "")

    def post_key(self, namespace: str, term: str) -> str:
        return self.db.k(namespace, "post", term)

    def frequencies(self, namespace: str, terms: list[str]) -> tuple[dict[str, int], int]:
        """Each term's live document frequency, and the namespace's lesson count."""
        pipe = self.db.r.pipeline(transaction=False)
        pipe.hmget(self.db.k(namespace, "df"), [key_part(term) for term in terms])
        pipe.hget(self.db.k(namespace, "corpus"), "docs")
        counts, docs = pipe.execute()
        return {term: int(count or 0) for term, count in zip(terms, counts, strict=True)}, int(docs or 0)

    def ranked(self, namespace: str, weights: dict[str, float], *, most: int | None = None) -> Ranking:
        """Live documents scored ``Σ weight × factor`` over the weighted terms' postings (the first
        ``most`` of them only, when given), best first as ``Ranking.top`` hands them out."""
        import numpy as np

        terms = list(weights)
        pipe = self.db.raw.pipeline(transaction=False)
        for term in terms:
            pipe.get(self.post_key(namespace, term))
        pipe.get(self.db.k(namespace, "dead"))
        *blobs, dead_blob = pipe.execute()
        # Redis numbers bits from the first byte's top bit, as unpackbits does.
        dead_bits = np.unpackbits(np.frombuffer(dead_blob or b"", np.uint8))
        docs: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        for term, blob in zip(terms, blobs, strict=True):
            records = self._records(namespace, term, blob)
            dead = _dead(records["doc"], dead_bits)
            gone = int(dead.sum())
            if gone > max(COMPACT_MIN, len(records) - gone) or len(blob or b"") % RECORD_BYTES:
                self._compact(namespace, term, dead_bits)
            if not len(records):
                continue
            records = records[~dead]
            docs.append(records["doc"])
            scores.append(records["w"] * weights[term])
        if not docs:
            return Ranking(np.zeros(0, np.uint32), np.zeros(0, np.float64), most)
        if len(docs) == 1:
            return Ranking(docs[0], scores[0], most)
        # Summed by document number in a dense array: no sort of every posting read.
        every = np.concatenate(docs)
        total = np.bincount(every, weights=np.concatenate(scores))
        found = np.flatnonzero(np.bincount(every)).astype(np.uint32)
        return Ranking(found, total[found], most)

    def lesson_ids(self, namespace: str, docs: Any) -> list[str | None]:
        """The lesson id of each document number (None: retired since it was read)."""
        if not len(docs):
            return []
        ids: list[str | None] = self.db.r.hmget(self.db.k(namespace, "docs"), [str(int(d)) for d in docs])
        return ids

    def _records(self, namespace: str, term: str, blob: bytes | None) -> np.ndarray:
        import numpy as np

        blob = blob or b""
        extra = len(blob) % RECORD_BYTES
        if extra:  # never written so (by hand, say): the whole records count, the reader cuts the rest
            log.warning(
                "Redis posting %s ends with %d stray bytes; they are ignored and removed",
                self.post_key(namespace, term),
                extra,
            )
            blob = blob[: len(blob) - extra]
        records: np.ndarray = np.frombuffer(blob, _record_type())
        return records

    def _compact(self, namespace: str, term: str, dead_bits: np.ndarray) -> None:
        """Rewrite a posting without its dead records; given up when a write changes it meanwhile."""
        key = self.post_key(namespace, term)
        with self.db.raw.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(key)
                records = self._records(namespace, term, pipe.get(key))
                kept = records[~_dead(records["doc"], dead_bits)]
                pipe.multi()
                if len(kept):
                    pipe.set(key, kept.tobytes())
                else:
                    pipe.delete(key)
                pipe.execute()
            except WatchError:
                pass


class Ranking:
    """Scored documents, sorted only as far as a reader pages: ``top(n)`` is the best ``n`` (ties:
    the newer document first). A narrow filter may page deep; most reads stop at the first page."""

    def __init__(self, docs: np.ndarray, scores: np.ndarray, most: int | None) -> None:
        self.docs, self.scores = docs, scores
        self.size = len(docs) if most is None else min(most, len(docs))
        self._sorted = 0
        self._order: np.ndarray | None = None

    def __len__(self) -> int:
        return self.size

    def top(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        n = min(n, self.size)
        if self._order is None or n > self._sorted:
            want = min(len(self.docs), max(n, 4 * self._sorted, 1024))
            if want < len(self.docs):
                # Every document scoring at least the want-th best score, so ties are ordered whole.
                cut = np.partition(-self.scores, want - 1)[want - 1]
                pick = np.flatnonzero(-self.scores <= cut)
            else:
                pick = np.arange(len(self.docs))
            order = pick[np.lexsort((-self.docs[pick].astype(np.int64), -self.scores[pick]))]
            self._order, self._sorted = order, len(order) if want < len(self.docs) else len(self.docs)
        chosen = self._order[:n]
        return self.docs[chosen], self.scores[chosen]


def _dead(docs: np.ndarray, dead_bits: np.ndarray) -> np.ndarray:
    """Which of ``docs`` have their bit set in the dead bitmap (unpacked)."""
    import numpy as np

    out = np.zeros(len(docs), dtype=bool)
    inside = docs < len(dead_bits)
    out[inside] = dead_bits[docs[inside]].astype(bool)
    return out
