"""Where a slot falls in a long posting list, without a binary search: a bit per slot (held or not)
and, per 64 slots, how many postings come before them.

A pruned search looks up many candidates in the longest lists of its words (a binary search there
misses the cache at nearly every step); with these bits a lookup is a few vectorised operations per
word whatever the list's length. The bits of a base word are built with the base when it is built
from rows (``word_bounds.WordBounds.fill_all``), else (a base read from a snapshot) the first time a search
looks up many slots in it (``pruning.BITS_FROM``), and live as long as that base
(``word_bounds.WordBounds``): a rebuild, a reload or a restored snapshot starts a new base and so new bits. They never change the results:
``Membership.searchsorted`` is ``numpy.searchsorted(docs, needles)``, to the element. At a million
lessons one word's bits and counts take 190 KB; only lists of 1/32 of the lessons or more get them
(``word_bounds.MEMBER_SHARE``), whose postings alone take more.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_ONE = np.uint64(1)


class Membership:
    """The slots ``docs`` (ascending, each once, every one below ``slots``) as bits, with a running
    count per 64-bit word: built on the first search that asks, unless made at once (``build``)."""

    def __init__(self, docs: Any, slots: int) -> None:
        self.docs, self.slots, self.size = docs, slots, len(docs)
        self.bits: Any = None
        self.before: Any = None  # postings below each word (and in all)

    def build(self) -> None:
        words = (self.slots + 63) // 64
        flags = np.zeros(words * 64, dtype=bool)
        flags[self.docs] = True
        self.bits = np.packbits(flags, bitorder="little").view("<u8")
        self.before = np.zeros(words + 1, dtype=np.int32)
        np.cumsum(np.bitwise_count(self.bits), out=self.before[1:])

    def searchsorted(self, needles: Any) -> Any:
        """For each needle, how many postings are below it (``numpy.searchsorted``, side left)."""
        if self.bits is None:
            self.build()
        needles = np.asarray(needles, dtype=np.int64)
        last = len(self.bits) * 64 - 1
        at = held_at([self], np.minimum(needles, last))[1][0]
        at[needles > last] = self.size  # past every slot the list was built over
        return at

    @property
    def nbytes(self) -> int:
        return 0 if self.bits is None else int(self.bits.nbytes + self.before.nbytes)


def held_at(members: list[Membership], slots: Any) -> tuple[Any, Any]:
    """For each of ``members`` (built, their bits reaching past the highest of ``slots``) and each
    slot: whether the list holds it, and how many of its postings are below it; one set of
    vectorised operations for them all (a dozen numpy calls per list is most of the cost for a few
    slots)."""
    word = np.asarray(slots, dtype=np.int64) >> 6
    shift = (np.asarray(slots) & 63).astype(np.uint64)
    bits = np.stack([member.bits[word] for member in members])
    at = np.stack([member.before[word] for member in members]).astype(np.int64)
    at += np.bitwise_count(bits & ((_ONE << shift) - _ONE))
    return ((bits >> shift) & _ONE).astype(bool), at
