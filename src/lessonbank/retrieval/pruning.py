"""Exact top-k BM25 without scoring every posting (MaxScore over slot-ordered postings).

A query word's contribution to any lesson is at most its *bound*: its weight times
``tf / (tf + norm)`` at the word's highest term frequency and the shortest lesson holding it (the
ratio grows with ``tf`` and falls with the length, so the pair bounds every posting whatever the
mean length of the moment). Words are taken in falling bound order (rare words first, they are
short to read and weigh most). Once the ``want``-th best partial score among the lessons seen so
far exceeds the sum of the bounds of the words left, no lesson outside those seen can reach the top
``want``: the words left, usually the common ones holding most postings, are then only looked up
for the surviving candidates (a binary search in their slot-ordered postings), and each word looked
up shrinks the candidates again.

Exactness: a lesson is dropped only when even its bound is below a score that ``want`` lessons
already reach, with a relative margin far above floating-point rounding; the survivors' scores are
then summed again word by word in the query's order, which is the order the exhaustive scorer
(``LexicalIndex`` with ``exhaustive=True``) adds them in, so the scores are the same to the last bit
and ties fall the same way (by slot, that is write order).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lessonbank.stores.lexical import BM25_B, BM25_K1

MARGIN = 1e-9  # relative slack on every pruning comparison: rounding is ~1e-16 per addition
LOOKUP_COST = 16  # a binary search for a candidate costs about this many postings read in a row


@dataclass
class Word:
    """One query word's postings: a base slice (slot order; it may hold dead slots, which are never
    candidates) and the delta's (live, slot order, every slot past the base's), its weight and an
    upper bound of its contribution to any lesson."""

    docs: Any
    tf: Any
    extra_docs: Any
    extra_tf: Any
    weight: float  # idf · (k1 + 1)
    bound: float


def impact_bound(max_tf: float, min_length: float, impact: float, at: float, per_token: float) -> float:
    """An upper bound of ``tf / (tf + norm)`` over a word's postings, with BM25's norm at
    ``per_token`` (k1·b / mean length): from the highest tf and the shortest lesson, and from
    ``impact``, the exact maximum when the norm's per-token term was ``at`` (a norm that grew can only
    lower it; one that shrank by a factor raises it by that factor at most)."""
    if max_tf <= 0:
        return 0.0
    loose = max_tf / (max_tf + BM25_K1 * (1.0 - BM25_B) + per_token * min_length)
    if at <= 0 or per_token <= 0:
        return loose
    return min(loose, impact * max(1.0, at / per_token))


class WordBounds:
    """Per word of one base (its postings ``docs``/``tf`` in one slice per word, from ``starts``):
    its highest weighted frequency, the shortest lesson holding it and its highest
    ``tf / (tf + norm)`` with the norm's per-token term ``at_token`` (dead slots included: a bound may
    be loose, never low). Each word's are computed the first time a query holds it, so a new
    process's first query reads only its own words' postings."""

    def __init__(self, words: int, at_token: float) -> None:
        self.max_tf = np.full(words, np.nan)
        self.min_length = np.zeros(words)
        self.impact = np.zeros(words)
        self.at_token = at_token

    def fill(self, starts: Any, docs: Any, tf: Any, length: Any, words: Sequence[int]) -> None:
        for word in words:
            if not np.isnan(self.max_tf[word]):
                continue
            lo, hi = int(starts[word]), int(starts[word + 1])
            held, lengths = tf[lo:hi].astype(np.float64), length[docs[lo:hi]]
            self.min_length[word] = lengths.min()
            self.impact[word] = (held / (held + (BM25_K1 * (1.0 - BM25_B) + self.at_token * lengths))).max()
            self.max_tf[word] = held.max()  # last: a word is done once this is set

    def bound(self, word: int, per_token: float) -> float:
        """The word's ``impact_bound`` with the norm's per-token term ``per_token``."""
        return impact_bound(
            float(self.max_tf[word]),
            float(self.min_length[word]),
            float(self.impact[word]),
            self.at_token,
            per_token,
        )


def posting_count(terms: Any, starts: Any, hashes: Sequence[int]) -> int:
    """How many postings a base (word hashes ``terms``, sorted; slices from ``starts``) holds for
    ``hashes``."""
    if not len(terms) or not hashes:
        return 0
    wanted = np.fromiter(hashes, np.uint64, len(hashes))  # a Python int would compare as a float
    at = np.minimum(np.searchsorted(terms, wanted), len(terms) - 1)
    return int(np.where(terms[at] == wanted, starts[at + 1] - starts[at], 0).sum())


def dead_in(docs: Any, dead: Any, alive: Any) -> int:
    """How many of ``docs`` (ascending) are among ``dead`` (ascending): one binary search per dead
    slot when they are few beside the postings, else one look at every posting."""
    if len(dead) * 16 > len(docs):
        return int(np.count_nonzero(~alive[docs]))
    at = np.searchsorted(docs, dead)
    np.minimum(at, len(docs) - 1, out=at)
    return int(np.count_nonzero(docs[at] == dead))


class Scratch:
    """Per-slot work arrays kept between searches (one search at a time), all zero between them: a
    fresh zeroed array per search would cost a page fault per 4 KB it touches."""

    def __init__(self) -> None:
        self.partial = np.zeros(0)
        self.pooled = np.zeros(0, dtype=bool)

    def take(self, size: int) -> tuple[Any, Any]:
        if len(self.partial) < size:
            self.partial, self.pooled = np.zeros(size), np.zeros(size, dtype=bool)
        return self.partial[:size], self.pooled[:size]


def top_slots(
    words: Sequence[Word], norm: Any, keep: Any, want: int, scratch: Scratch | None = None
) -> tuple[Any, Any]:
    """The ``want`` best slots by BM25 and their scores, best first (ties by slot): exactly the
    head of the exhaustive ranking. ``keep`` (a boolean per slot, or None) is the slots that may
    score (live, inside the recall's scope); ``norm`` is BM25's length normalisation per slot."""
    words = [w for w in words if len(w.docs) or len(w.extra_docs)]
    if not words or want <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    scratch = scratch or Scratch()
    partial, pooled = scratch.take(len(norm))  # the words read so far, per slot
    touched: list[Any] = []
    try:
        return _top_slots(words, norm, keep, want, partial, pooled, touched)
    except BaseException:
        partial[:] = 0.0
        pooled[:] = False
        raise
    finally:
        for docs in touched:
            partial[docs] = 0.0


def _top_slots(
    words: list[Word], norm: Any, keep: Any, want: int, partial: Any, pooled: Any, touched: list[Any]
) -> tuple[Any, Any]:
    bounds = np.array([w.bound for w in words])
    order = np.argsort(-bounds, kind="stable").tolist()
    left = np.concatenate((np.cumsum(bounds[order][::-1])[::-1], [0.0]))  # bounds of words i.. in order
    pool = np.zeros(0, dtype=np.int64)  # the `want` slots of best partial score so far
    seen = touched  # every slot written to `partial`, to clear it after
    threshold = 0.0  # a score that `want` slots are known to reach
    done = 0
    for index in order:
        docs, contribution = _scored(words[index], norm, keep)
        partial[docs] += contribution  # a word holds a slot once
        seen.append(docs)
        done += 1
        # Only this word's slots changed, and only those now past the threshold can enter the pool.
        fresh = docs[partial[docs] > threshold] if threshold > 0 else docs
        if len(fresh):
            pooled[pool] = True
            fresh = fresh[~pooled[fresh]]
            pooled[pool] = False
            pool = np.concatenate((pool, fresh))
            if len(pool) >= want:
                values = partial[pool]
                best = np.argpartition(values, len(pool) - want)[len(pool) - want :]
                pool = pool[best]
                threshold = float(values[best].min())
        if _below(float(left[done]), threshold):
            break  # no slot unseen so far can reach the top `want`
    # The candidates: slots seen whose partial score plus the words left can reach the threshold.
    rest = float(left[done])
    if sum(len(docs) for docs in seen) > len(norm) // 4:
        candidates = np.flatnonzero(_reaches(partial, rest, threshold) & (partial > 0))
    else:  # the reachable slots of each word read, each once (`pooled` marks those taken)
        parts = []
        for docs in seen:
            reachable = docs[_reaches(partial[docs], rest, threshold)]
            reachable = reachable[~pooled[reachable]]
            pooled[reachable] = True
            parts.append(reachable)
        candidates = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        pooled[candidates] = False
    # The words left: looked up for the candidates when they are few beside the word's postings,
    # else read whole; each word done narrows the candidates again.
    for position in range(done, len(order)):
        word = words[order[position]]
        if len(candidates) * LOOKUP_COST < len(word.docs) + len(word.extra_docs):
            partial[candidates] += _looked_up(word, candidates, norm)
        else:
            docs, contribution = _scored(word, norm, keep)
            partial[docs] += contribution
            touched.append(docs)
        scores = partial[candidates]
        if len(candidates) >= want:
            threshold = max(threshold, _kth(scores, want))
        candidates = candidates[_reaches(scores, float(left[position + 1]), threshold)]
    candidates = candidates[_reaches(partial[candidates], 0.0, threshold)]
    # Exact scores, summed in the query's order as the exhaustive scorer sums them.
    exact = np.zeros(len(candidates))
    for word in words:
        exact += _looked_up(word, candidates, norm)
    ranked = np.lexsort((candidates, -exact))[:want]
    return candidates[ranked].astype(np.int64), exact[ranked]


def _below(rest: float, threshold: float) -> bool:
    """Whether ``rest`` is surely below ``threshold``, rounding included."""
    return rest * (1 + MARGIN) < threshold * (1 - MARGIN)


def _reaches(scores: Any, rest: float, threshold: float) -> Any:
    """Which partial scores, plus at most ``rest``, may reach ``threshold`` (rounding included)."""
    return (scores + rest) * (1 + MARGIN) >= threshold * (1 - MARGIN)


def _scored(word: Word, norm: Any, keep: Any) -> tuple[Any, Any]:
    """Every scoring posting of ``word``: slots and contributions."""
    docs, tf = word.docs, word.tf
    if len(word.extra_docs):
        docs = np.concatenate((docs, word.extra_docs))
        tf = np.concatenate((tf, word.extra_tf))
    if keep is not None:
        kept = keep[docs]
        docs, tf = docs[kept], tf[kept]
    return docs, _contribution(word.weight, tf, norm[docs])


def _contribution(weight: float, tf: Any, norm: Any) -> Any:
    """weight · tf / (tf + norm), with the exhaustive scorer's operations in its order."""
    tf = tf.astype(np.float64)
    out = norm + tf
    np.divide(tf, out, out=out)
    np.multiply(out, weight, out=out)
    return out


def _looked_up(word: Word, candidates: Any, norm: Any) -> Any:
    """``word``'s contribution to each candidate (0 where it does not hold the word)."""
    out = None
    for docs, tf in ((word.docs, word.tf), (word.extra_docs, word.extra_tf)):
        if not len(docs):
            continue
        at = np.searchsorted(docs, candidates)
        np.minimum(at, len(docs) - 1, out=at)
        found = np.where(docs[at] == candidates, _contribution(word.weight, tf[at], norm[candidates]), 0.0)
        out = found if out is None else out + found  # a slot is in one of the two parts at most
    return out if out is not None else np.zeros(len(candidates))


def _kth(scores: Any, want: int) -> float:
    return float(np.partition(scores, len(scores) - want)[len(scores) - want])


def ranked_batches(slots: Any, scores: Any, first: int) -> Iterator[tuple[Any, Any]]:
    """The exhaustive scorer's ranking, lazily: every matching slot best first (ties in slot order,
    that is write order), ``first`` of them, then twice as many each time."""
    if not len(slots) or first <= 0:
        return
    top_slots, top_scores = head(slots, scores, first)
    yield top_slots, top_scores
    if len(top_slots) == len(slots):
        return
    taken = np.zeros(int(slots.max()) + 1, dtype=bool)
    taken[top_slots] = True
    rest = np.flatnonzero(~taken[slots])
    rest = rest[np.lexsort((slots[rest], -scores[rest]))]
    start, size = 0, first * 2
    while start < len(rest):
        chunk = rest[start : start + size]
        yield slots[chunk], scores[chunk]
        start, size = start + size, size * 2


def head(slots: Any, scores: Any, want: int) -> tuple[Any, Any]:
    """The ``want`` best of ``slots`` by score, ties by slot, best first: every slot tied with the
    ``want``-th score is sorted with the others, so the cut falls as a full sort's would."""
    if len(slots) > want:
        kth = np.partition(scores, len(scores) - want)[len(scores) - want]
        kept = np.flatnonzero(scores >= kth)
        slots, scores = slots[kept], scores[kept]
    order = np.lexsort((slots, -scores))[:want]
    return slots[order], scores[order]
