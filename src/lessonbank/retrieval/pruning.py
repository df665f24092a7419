"""Exact top-k BM25 without scoring every posting (MaxScore with a threshold from exact scores).

A query word's contribution to any lesson is at most its *bound*: its weight times
``tf / (tf + norm)`` at the word's highest term frequency and the shortest lesson holding it (the
ratio grows with ``tf`` and falls with the length, so the pair bounds every posting whatever the
mean length of the moment). Words are taken in falling bound order (rare words first: they are
short to read and weigh most).

1. *Seed.* The rarest words (``SEED_POSTINGS`` postings in all) are read; the few lessons of best
   partial score are scored exactly (every word looked up), and the ``want``-th of those exact
   scores is the threshold: ``want`` real lessons reach it, so the true ``want``-th score does too.
2. *Essential words.* Words are read whole while the bounds of the words left add up to the
   threshold or more (a lesson holding none of the words read could still reach it). Reading is
   the cost that counts, so it adds *upper bounds* in float32: each base posting carries a one-byte
   code of its ratio (``WordBounds.codes``: ratio ≤ code × step), so a word is read as a cast and a
   product, with no look at the lessons' lengths. The compiled loops (``_postings.c``) read a list
   in one pass; numpy's steps, where they were not built, take ``np.add.at`` (a long list alone,
   the short ones laid end to end) to the same sums.
3. *Candidates.* The lessons whose partial bound plus the bounds of the words left reach the
   threshold (every other one is out for good). The threshold is raised first, by scoring exactly
   the best few of the slots whose partial bound alone reaches it (few: a pass over those read, not a
   look at every candidate), so that the candidates are taken with the higher one. While they would
   be many beside the next word's postings (counted, not listed), that word is read whole too; then
   they are listed, and each word left is looked up for them (a binary search in its slot-ordered
   postings, or its bits for a long list: ``Word.member``) or, when they are many beside its
   postings, read whole, and each narrows the candidates again.

Exact scores (``exact_scores``) take one search per word (the long lists' built bits are read for
all of them at once: ``membership.held_at``), one gather of every word's frequencies from the base
arrays (``Word.within``) and the arithmetic of every word at once; with a few lessons numpy's calls
per word are most of their cost, with many the searches, so few lessons are scored (``SEED_SHARE``),
each once a search.

Exactness: a lesson is dropped only when an upper bound of its score is below a score that
``want`` lessons reach exactly, with a relative margin (``UPPER_MARGIN``) far above the rounding of
float32 sums; the survivors' scores are then summed again in float64 word by word in the query's
order, which is the order the exhaustive scorer (``LexicalIndex`` with ``exhaustive=True``) adds them
in, so the scores are the same to the last bit and ties fall the same way (by slot, that is write
order).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lessonbank.retrieval.membership import Membership, held_at

try:  # the reads and the candidates' passes in C (setup.py builds them where a compiler is at hand)
    from lessonbank.retrieval import _postings
except ImportError:  # numpy runs the same steps, to the same bounds
    _postings = None  # type: ignore[assignment]

MARGIN = 1e-9  # relative slack on comparisons of float64 sums: rounding is ~1e-16 per addition
UPPER_MARGIN = 1e-4  # ... and of float32 sums of upper bounds (~6e-8 per addition, 64 words at most)
NARROW_SHARE = 4  # candidates are narrowed before a word's read when fewer than this many times its postings
LOOKUP_COST = 16  # a binary search for a candidate costs about this many postings read in a row
SEED_POSTINGS = 4_096  # postings of the rarest words read to find the first exact threshold
SEED_SHARE = 2  # lessons scored exactly for a threshold, per lesson wanted
SAMPLE = 64  # every this many partial bounds are a sample that bounds the best few from below
RELIST_SHARE = 4  # a count narrows the last list when it holds under this share of the slots
BITS_FROM = 256  # a long list's bits (``word_bounds.MEMBER_SHARE``) are searched for this many slots or more (fewer: a binary search is cheaper)
READ_CHUNK = 1 << 15  # postings of short lists read at once laid end to end, at most; longer ones alone
# Compiled reads of this many postings or more, and passes over as many slots, take two threads, each
# on one half of the slots (its half of the sums stays in its core's cache: a heavy query's lists are
# read 1.5-1.9 times faster).
THREADS_FROM = 1 << 17
READ_THREADS = 2 if (os.cpu_count() or 1) >= 2 else 1


@dataclass
class Word:
    """One query word's postings: a base slice (slot order; it may hold dead slots, which are never
    candidates) and the delta's (live, slot order, every slot past the base's), its weight and an
    upper bound of its contribution to any lesson. ``codes`` (one byte per base posting, or None)
    bound each base posting's contribution by ``code × unit``. ``within`` (or None): the arrays the
    base slice is cut from and where it starts in them, so exact scores gather every word at once;
    ``member`` (or None) finds slots in the base slice without a binary search."""

    docs: Any
    tf: Any
    extra_docs: Any
    extra_tf: Any
    weight: float  # idf · (k1 + 1)
    bound: float
    codes: Any = None
    unit: float = 0.0
    within: tuple[Any, Any, int] | None = None
    member: Membership | None = None  # the base slice as bits (long lists only)


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


def compiled() -> bool:
    """Whether the compiled loops (``_postings``) run the reads and passes, rather than numpy."""
    return _postings is not None


class Scratch:
    """Per-slot work arrays kept between searches (one search at a time): the partial bounds, all
    zero between searches (a fresh zeroed array per search would cost a page fault per 4 KB it
    touches), and room for as many slots, where the compiled pass lists the slots that reach."""

    def __init__(self) -> None:
        self.partial = np.zeros(0, dtype=np.float32)
        self.slots = np.zeros(0, dtype=np.int32)

    def take(self, size: int) -> Any:
        if len(self.partial) < size:
            self.partial = np.zeros(size, dtype=np.float32)
        return self.partial[:size]

    def room(self, size: int) -> Any:
        if len(self.slots) < size:
            self.slots = np.empty(size, dtype=np.int32)
        return self.slots[:size]


def top_slots(
    words: Sequence[Word],
    norm: Any,
    keep: Any,
    want: int,
    scratch: Scratch | None = None,
    seed: int | None = None,
) -> tuple[Any, Any]:
    """The ``want`` best slots by BM25 and their scores, best first (ties by slot): exactly the
    head of the exhaustive ranking. ``keep`` (a boolean per slot, or None) is the slots that may
    score (live, inside the recall's scope); ``norm`` is BM25's length normalisation per slot;
    ``seed`` the postings read for the first threshold (``SEED_POSTINGS``)."""
    words = [w for w in words if len(w.docs) or len(w.extra_docs)]
    if not words or want <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    scratch = scratch or Scratch()
    partial = scratch.take(len(norm))  # upper bounds of the words read so far, per slot
    search = _Search(words, norm, keep, want, partial, SEED_POSTINGS if seed is None else seed, scratch)
    try:
        return search.run()
    finally:
        if search.read > len(norm) // 8:
            partial.fill(0.0)
        else:
            for docs in search.touched:
                partial[docs] = 0.0


class _Search:
    def __init__(
        self,
        words: list[Word],
        norm: Any,
        keep: Any,
        want: int,
        partial: Any,
        seed: int,
        scratch: Scratch | None = None,
    ) -> None:
        self.words, self.norm, self.keep, self.want, self.partial = words, norm, keep, want, partial
        self.seed, self.scratch = seed, scratch or Scratch()
        self.touched: list[Any] = []  # slots of every posting read, to clear `partial` after
        self.read = 0
        self.threshold = 0.0  # a score that `want` slots reach exactly
        # The slots scored exactly so far (ascending) and their scores: the lessons that raised the
        # threshold are most of the last candidates, and a slot's score is the same in any batch.
        self.scored = np.zeros(0, dtype=np.int64)
        self.scores = np.zeros(0)
        # The compiled count's list (in ``scratch.room``): the postings read then, the floor, how many.
        self.listed: tuple[int, float, int] | None = None

    def run(self) -> tuple[Any, Any]:
        words = self.words
        bounds = np.array([w.bound for w in words])
        sizes = np.array([len(w.docs) + len(w.extra_docs) for w in words])
        order = np.argsort(-bounds, kind="stable").tolist()
        left = np.concatenate((np.cumsum(bounds[order][::-1])[::-1], [0.0]))  # bounds of words i.. in order
        held = np.cumsum(sizes[order])
        # The rarest words up to `seed` postings, and enough of them to hold the lessons scored for a
        # threshold (with fewer there is none: every word would be read whole).
        enough = int(np.searchsorted(held, SEED_SHARE * self.want)) + 1
        seed = min(len(order), max(1, int(np.searchsorted(held, self.seed, side="right")), enough))
        self._read(*(words[index] for index in order[:seed]))
        self._raise(self._kept(_distinct(self.touched)))
        # Every word the threshold leaves essential, read at once (the threshold stays as it is).
        done = seed
        while done < len(order) and not _below(float(left[done]), self.threshold):
            done += 1
        self._read(*(words[index] for index in order[seed:done]))
        above = self._above()  # the slots whose bound alone reaches the threshold: few
        if len(above) >= self.want:  # raised first, so that fewer slots are candidates
            self._raise(above)
            # A word whose postings are few beside the candidates is read whole (as the loop below
            # does) before they are listed: counting them costs a tenth of listing them, and the
            # list taken after such reads is shorter (a common word read raises the floor).
            while done < len(order) and self.read > len(self.norm) // 8:
                if self._count(float(left[done])) * LOOKUP_COST < sizes[order[done]]:
                    break
                self._read(words[order[done]])
                done += 1
            candidates = self._seen(float(left[done]))
        else:
            candidates = self._seen(float(left[done]))
            values = self.partial[candidates]  # many: taken once for the raise and the narrowing
            self._raise(candidates, values)
            floor = self._floor(float(left[done]))
            candidates = candidates if floor is None else candidates[values >= floor]
        stale = False  # whether words were read since the candidates were narrowed (they only shrink)
        for position in range(done, len(order)):
            word = words[order[position]]
            size = len(word.docs) + len(word.extra_docs)
            if stale and len(candidates) < NARROW_SHARE * size:  # a pass over them may spare reading it
                candidates, stale = self._reaching(candidates, float(left[position])), False
            if len(candidates) * LOOKUP_COST < size:
                self.partial[candidates] += _looked_up(word, candidates, self.norm)
                self.listed = None  # bounds changed without a read
                candidates = self._reaching(candidates, float(left[position + 1]))
            else:  # many candidates: narrowed again only when that may spare a read
                self._read(word)
                stale = True
        candidates = self._reaching(candidates, 0.0)
        # Exact scores, summed in the query's order as the exhaustive scorer sums them.
        exact = self._exact(candidates)
        candidates, exact = candidates[exact > 0], exact[exact > 0]  # as the exhaustive scorer leaves them
        ranked = np.lexsort((candidates, -exact))[: self.want]
        return candidates[ranked].astype(np.int64), exact[ranked]

    def _read(self, *read: Word) -> None:
        """Add an upper bound of each word's contribution to every slot holding it. Compiled, a
        list is one pass over its postings (``_postings.add_coded_lists``, every coded list in one
        call, two threads for many postings; ``add_scored`` for a delta's). With numpy
        the short lists are laid end to end, up to ``READ_CHUNK`` postings at a time, for one
        ``np.add.at`` (it sums a slot held by several words; numpy's calls per word cost more than a
        rare word's postings); a long one is added alone (copying it costs more than the calls)."""
        parts = [
            (word, docs, tf, codes)
            for word in read
            for docs, tf, codes in ((word.docs, word.tf, word.codes), (word.extra_docs, word.extra_tf, None))
            if len(docs)
        ]
        if _postings is not None:
            coded = [(word, docs, codes) for word, docs, _, codes in parts if codes is not None]
            self.touched += [docs for _, docs, _, _ in parts]  # first: cleared after even if a call fails
            if coded:
                size = sum(len(docs) for _, docs, _ in coded)
                _postings.add_coded_lists(
                    self.partial,
                    [docs for _, docs, _ in coded],
                    [codes for _, _, codes in coded],
                    np.array([word.weight * word.unit for word, _, _ in coded], dtype=np.float32),
                    self._threads(size),
                )
            for word, docs, tf, codes in parts:
                if codes is None:
                    _postings.add_scored(self.partial, docs, tf, self.norm, word.weight)
            self.read += sum(len(docs) for _, docs, _, _ in parts)
            return
        short: list[tuple[Word, Any, Any, Any]] = []
        size = 0
        for part in parts:
            if len(part[1]) >= READ_CHUNK:
                self._add([part], len(part[1]))
                continue
            if size + len(part[1]) > READ_CHUNK:
                self._add(short, size)
                short, size = [], 0
            short.append(part)
            size += len(part[1])
        if short:
            self._add(short, size)

    def _add(self, parts: list[tuple[Word, Any, Any, Any]], size: int) -> None:
        # The slots in the platform's index type: np.add.at's own cast of them is slower.
        slots, upper = np.empty(size, dtype=np.intp), np.empty(size, dtype=np.float32)
        start = 0
        for word, docs, tf, codes in parts:
            end = start + len(docs)
            slots[start:end] = docs
            if codes is not None:
                bound = upper[start:end]
                bound[:] = codes
                bound *= np.float32(word.weight * word.unit)
            else:
                upper[start:end] = _contribution(word.weight, tf, self.norm[docs])
            self.touched.append(docs)
            start = end
        np.add.at(self.partial, slots, upper)
        self.read += size

    def _above(self) -> Any:
        """The slots read whose partial bound alone reaches the threshold, each once."""
        floor = np.float32(self.threshold)
        if self.read > len(self.norm) // 8:  # one pass over every slot
            return self._passed(floor)
        return self._kept(_distinct([docs[self.partial[docs] >= floor] for docs in self.touched]))

    def _seen(self, rest: float) -> Any:
        """Every slot read so far that may score and, with at most ``rest`` more, reach the threshold."""
        floor = self._floor(rest)
        if floor is None:  # every slot read
            if self.read > len(self.norm) // 8:
                return self._passed(None)
            return self._kept(_distinct(self.touched))
        if self.read > len(self.norm) // 8:  # one pass over every slot
            return self._passed(floor)
        # The slots of each word read that reach, then each once.
        return self._kept(_distinct([docs[self.partial[docs] >= floor] for docs in self.touched]))

    def _count(self, rest: float) -> int:
        """How many slots ``_seen(rest)`` would list, by one pass over every slot's bound."""
        floor = self._floor(rest)
        if floor is None:
            return len(self.norm)
        if _postings is not None:  # listed as counted: ``_passed`` takes the list if no read came between
            room = self.scratch.room(len(self.partial))
            listed = self.listed
            if listed is not None and listed[1] <= floor and listed[2] * RELIST_SHARE < len(self.partial):
                # Every slot left out of the last list is out for good (its bound then, with the
                # bounds of every word left then, fell short), so the new list is the last one's
                # slots that still reach: a look at those few, not a pass over every slot.
                slots = room[: listed[2]]
                kept = slots[self.partial[slots] >= floor]
                found = len(kept)
                room[:found] = kept
            else:
                threads = self._threads(len(self.partial))
                found = _postings.reaching(self.partial, floor, self.keep, room, threads)
            self.listed = (self.read, float(floor), found)
            return found
        reaching = self.partial >= floor
        if self.keep is not None:  # it may run past the slots (an index's capacity): none beyond scores
            size = min(len(reaching), len(self.keep))
            reaching = reaching[:size] & self.keep[:size]
        return int(np.count_nonzero(reaching))

    def _passed(self, floor: Any) -> Any:
        """The slots that may score whose partial bound reaches ``floor`` (None: is above 0, that
        is, some word read holds them), ascending, in the postings' type: one pass over every slot."""
        if _postings is not None:
            room = self.scratch.room(len(self.partial))
            lowest = np.float32(np.finfo(np.float32).smallest_subnormal)  # bounds are never negative
            floor = lowest if floor is None else floor
            listed = self.listed
            if listed is None or listed[:2] != (self.read, float(floor)):
                threads = self._threads(len(self.partial))
                listed = (
                    self.read,
                    float(floor),
                    _postings.reaching(self.partial, floor, self.keep, room, threads),
                )
            return room[: listed[2]].copy()
        reaching = self.partial > 0 if floor is None else self.partial >= floor
        return self._kept(np.flatnonzero(reaching).astype(np.int32))

    @staticmethod
    def _threads(size: int) -> int:
        """The threads a compiled read of ``size`` postings, or pass over as many slots, takes."""
        return READ_THREADS if size >= THREADS_FROM else 1

    def _kept(self, slots: Any) -> Any:
        return slots if self.keep is None else slots[self.keep[slots]]

    def _reaching(self, slots: Any, rest: float) -> Any:
        """Which ``slots``, with at most ``rest`` more, may reach the threshold."""
        floor = self._floor(rest)
        return slots if floor is None else slots[self.partial[slots] >= floor]

    def _floor(self, rest: float) -> Any:
        """The least partial bound that, with at most ``rest`` more, may reach the threshold (margin
        included), in float32 rounded down; None when any may."""
        cut = self.threshold * (1 - UPPER_MARGIN) / (1 + UPPER_MARGIN) - rest
        return np.nextafter(np.float32(cut), np.float32(-np.inf)) if cut > 0 else None

    def _raise(self, slots: Any, values: Any = None) -> None:
        """Raise the threshold to the ``want``-th exact score of the best few ``slots`` by bound
        (``values``: their partial bounds, if taken already)."""
        size = SEED_SHARE * self.want
        if len(slots) < self.want:
            return
        if len(slots) > size:
            values = self.partial[slots] if values is None else values
            top = values >= np.float32(self.threshold)  # bound alone reaches: few
            if np.count_nonzero(top) >= self.want:
                slots, values = slots[top], values[top]
        if len(slots) > size:
            slots = slots[_best(values, size)]
        self.threshold = max(self.threshold, _kth(self._exact(slots), self.want))

    def _exact(self, slots: Any) -> Any:
        """The exact scores of ``slots``, each slot scored once per search."""
        if not len(slots):
            return np.zeros(0)
        known = np.zeros(len(slots), dtype=bool)
        at = np.zeros(len(slots), dtype=np.int64)
        if len(self.scored):
            at = np.minimum(np.searchsorted(self.scored, slots), len(self.scored) - 1)
            known = self.scored[at] == slots
        out = np.empty(len(slots))
        out[known] = self.scores[at[known]]
        fresh = slots[~known]
        if len(fresh):
            out[~known] = found = exact_scores(self.words, fresh, self.norm)
            order = np.argsort(np.concatenate((self.scored, fresh)), kind="stable")
            self.scored = np.concatenate((self.scored, fresh))[order]
            self.scores = np.concatenate((self.scores, found))[order]
        return out


def _distinct(parts: list[Any]) -> Any:
    """The slots of ``parts`` (each without repeats), each once, ascending (a sort: numpy's hashed
    ``unique`` is several times slower on these)."""
    if len(parts) == 1:
        return parts[0]
    slots = np.sort(np.concatenate(parts))
    return slots[np.concatenate(([True], slots[1:] != slots[:-1]))] if len(slots) else slots


def _best(values: Any, size: int) -> Any:
    """Where ``size`` of the highest ``values`` are: those below the ``size``-th highest of every
    ``SAMPLE``-th value cannot be among them, so a partition runs over the rest only."""
    if len(values) >= 4 * SAMPLE * size:
        sample = values[::SAMPLE]
        kept = np.flatnonzero(values >= np.partition(sample, len(sample) - size)[len(sample) - size])
        return kept[np.argpartition(values[kept], len(kept) - size)[len(kept) - size :]]
    return np.argpartition(values, len(values) - size)[len(values) - size :]


def _below(rest: float, threshold: float) -> bool:
    """Whether ``rest`` is surely below ``threshold``, rounding included."""
    return rest * (1 + MARGIN) < threshold * (1 - MARGIN)


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
    for docs, tf, member in ((word.docs, word.tf, word.member), (word.extra_docs, word.extra_tf, None)):
        if not len(docs):
            continue
        at = _positions(docs, member, candidates)
        np.minimum(at, len(docs) - 1, out=at)
        found = np.where(docs[at] == candidates, _contribution(word.weight, tf[at], norm[candidates]), 0.0)
        out = found if out is None else out + found  # a slot is in one of the two parts at most
    return out if out is not None else np.zeros(len(candidates))


def _positions(docs: Any, member: Membership | None, slots: Any) -> Any:
    """How many of ``docs`` (ascending) are below each slot: by the bits for many slots when there
    are some, else by binary search (``_lower_bounds``)."""
    if member is not None and len(slots) >= BITS_FROM:
        return member.searchsorted(slots)
    return _lower_bounds(docs, slots)


def _lower_bounds(docs: Any, slots: Any) -> Any:
    """``np.searchsorted(docs, slots)``: compiled, the slots' searches run side by side
    (``_postings.lower_bounds``); with numpy, in the postings' own type (another would convert every
    posting on each call)."""
    needle = slots.astype(docs.dtype, copy=False)
    if _postings is None or docs.dtype != np.int32:
        return np.searchsorted(docs, needle)
    at = np.empty(len(slots), dtype=np.int64)
    _postings.lower_bounds(docs, _FROM_START, np.array([len(docs)]), np.ascontiguousarray(needle), at)
    return at


_FROM_START = np.zeros(1, dtype=np.int64)


def exact_scores(words: Sequence[Word], slots: Any, norm: Any) -> Any:
    """The BM25 scores of ``slots``: a binary search per word and part, then the arithmetic of every
    word at once, each word's contributions added in ``words``' order (``_contribution``'s operations,
    as the exhaustive scorer's per-slot sum does: the same to the last bit)."""
    if not len(slots) or not words:
        return np.zeros(len(slots))
    tf = np.zeros((len(words), len(slots)))  # each slot's frequency of each word (0: not held)
    _base_tf(words, slots, tf)
    for row, word in zip(tf, words, strict=True):
        if len(word.extra_docs):  # a slot is in the base or in the delta, never both
            row += _tf_at(word.extra_docs, word.extra_tf, slots)
    contribution = norm[slots][None, :] + tf
    np.divide(tf, contribution, out=contribution)
    np.multiply(contribution, np.array([word.weight for word in words])[:, None], out=contribution)
    # Word by word, in order: a running sum down the rows adds each to the sum of those before.
    return np.cumsum(contribution, axis=0)[-1]


def _base_tf(words: Sequence[Word], slots: Any, tf: Any) -> None:
    """Each word's base frequency of each slot, into its row of ``tf``. The words cut from one pair
    of arrays (``Word.within``) take one binary search each (compiled: every word's in one call, the
    slots' searches side by side), or a look at their bits for the long lists that have them built
    (``held_at``: a binary search there misses the cache at every step), and are gathered from the
    pair at once: with a few slots, numpy's calls per word cost more than the searches themselves."""
    rows: list[int] = []
    found: list[Any] = []
    bounds: list[tuple[int, int]] = []
    bitted: list[tuple[int, Membership, int]] = []  # (row, bits, where the slice starts)
    pool: tuple[Any, Any, int] | None = None
    needle, highest = slots, int(slots.max())
    for row, word in enumerate(words):
        if not len(word.docs):
            continue
        within = word.within
        if within is None or (pool is not None and (within[0] is not pool[0] or within[1] is not pool[1])):
            tf[row] = _tf_at(word.docs, word.tf, slots)
            continue
        if pool is None:
            pool, needle = within, slots.astype(word.docs.dtype, copy=False)
        member = word.member
        if member is not None and member.bits is not None and highest < member.slots:
            bitted.append((row, member, within[2]))
            continue
        rows.append(row)
        bounds.append((within[2], len(word.docs)))
        if _postings is None:
            found.append(
                word.docs.searchsorted(needle)
                if member is None or len(slots) < BITS_FROM
                else member.searchsorted(slots)
            )
    if pool is None:
        return
    if rows:
        start, size = np.array(bounds, dtype=np.int64).T.copy()  # each contiguous
        if _postings is not None:  # every word's searches in one call, from the pool's start
            at = np.empty((len(rows), len(slots)), dtype=np.int64)
            _postings.lower_bounds(pool[0], start, size, np.ascontiguousarray(needle), at)
        else:
            at = np.stack(found)
            at += start[:, None]  # where each word's slice starts in the pool
        np.minimum(at, (start + size - 1)[:, None], out=at)
        tf[rows] = np.where(pool[0][at] == slots, pool[1][at], 0.0)
    if bitted:
        held, at = held_at([member for _, member, _ in bitted], slots)
        at += np.array([start for _, _, start in bitted])[:, None]
        np.minimum(at, len(pool[1]) - 1, out=at)  # a slot past a list's last posting is not held
        tf[[row for row, _, _ in bitted]] = np.where(held, pool[1][at], 0.0)


def _tf_at(docs: Any, tf: Any, slots: Any) -> Any:
    """``tf`` of each slot among ``docs`` (ascending), 0 where it is not."""
    at = _lower_bounds(docs, slots)
    np.minimum(at, len(docs) - 1, out=at)
    return np.where(docs[at] == slots, tf[at], 0.0)


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
