"""What the pruned search (``pruning``) keeps per word of a base: its upper bounds, one byte per posting
bounding that posting's ratio, and the long lists' bits. Computed for every word at once where the base is
built from rows, word by word as queries first hold them where it is read from a snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lessonbank.retrieval.membership import Membership
from lessonbank.stores.lexical import BM25_B, BM25_K1

LEVELS = 255  # codes of a posting's ratio: 1..LEVELS of the word's highest ratio
MEMBER_SHARE = 32  # a base word held by this share of the slots or more is kept as bits too
FILL_CHUNK = 1 << 18  # postings coded at once when a base's every word is (``WordBounds.fill_all``)


def drift(at: float, per_token: float) -> float:
    """How much a ratio taken with the norm's per-token term ``at`` can grow at ``per_token``."""
    return max(1.0, at / per_token) if per_token > 0 else float("inf")


def quantize(ratio: Any, impact: float) -> Any:
    """One byte per ratio, rounded up: ``ratio ≤ code × impact / LEVELS`` (``impact`` ≥ every ratio)."""
    if impact <= 0:
        return np.ones(len(ratio), dtype=np.uint8)
    codes = np.ceil(ratio * (LEVELS / impact))
    np.clip(codes, 1, LEVELS, out=codes)
    return codes.astype(np.uint8)


class WordBounds:
    """Per word of one base (its postings ``docs``/``tf`` in one slice per word, from ``starts``):
    its highest weighted frequency, the shortest lesson holding it, its highest ``tf / (tf + norm)``
    with the norm's per-token term ``at_token`` and that ratio's code per posting (``quantize``; dead
    slots included: a bound may be loose, never low), and the long lists' bits. A base built from rows
    has every word's computed at once (``fill_all``: no query then pays for a word's first use); one
    read from a snapshot computes each word's the first time a query holds it (``fill``), so a new
    process's first query reads only its own words' postings."""

    def __init__(self, words: int, at_token: float) -> None:
        self.max_tf = np.full(words, np.nan)
        self.min_length = np.zeros(words)
        self.impact = np.zeros(words)
        self.codes: dict[int, Any] = {}
        self.coded: Any = None  # every word's codes at once, one per base posting (``fill_all``)
        self.members: dict[int, Membership] = {}  # the long lists' bits (``membership``)
        # Every word's figures and bits are here (``fill_all``): ``fill`` has nothing to do.
        self.complete = False
        self.at_token = at_token

    @classmethod
    def whole(cls, max_tf: Any, min_length: Any, impact: Any, coded: Any, at_token: float) -> WordBounds:
        """Every word's figures as ``fill_all`` left them (read from a snapshot); the long lists' bits
        are made on first use."""
        bounds = cls(0, at_token)
        bounds.max_tf, bounds.min_length, bounds.impact, bounds.coded = max_tf, min_length, impact, coded
        return bounds

    def fill(self, starts: Any, docs: Any, tf: Any, length: Any, words: Sequence[int]) -> None:
        if self.complete:
            return
        for word in words:
            lo, hi = int(starts[word]), int(starts[word + 1])
            if (hi - lo) * MEMBER_SHARE >= len(length) and word not in self.members:
                self.members[word] = Membership(docs[lo:hi], len(length))
            if not np.isnan(self.max_tf[word]):
                continue
            held, lengths = tf[lo:hi].astype(np.float64), length[docs[lo:hi]]
            ratio = held / (held + (BM25_K1 * (1.0 - BM25_B) + self.at_token * lengths))
            self.min_length[word] = lengths.min()
            self.impact[word] = ratio.max()
            self.codes[word] = quantize(ratio, float(self.impact[word]))
            self.max_tf[word] = held.max()  # last: a word is done once this is set

    def fill_all(self, starts: Any, docs: Any, tf: Any, length: Any) -> None:
        """Every word's figures and the long lists' bits at once, a run of words of about
        ``FILL_CHUNK`` postings at a time (what ``fill`` computes word by word, to the bit): a base
        built from rows has read every posting anyway. At a million lessons this takes about a second
        and 40 MB of codes (more bits: 190 KB per long list), and the first query using a long word
        no longer pays 5-20 ms for its pass over the postings."""
        words = len(starts) - 1
        self.coded = np.empty(len(docs), dtype=np.uint8)
        first = 0
        while first < words:
            last = int(np.searchsorted(starts, starts[first] + FILL_CHUNK, side="right")) - 1
            last = min(words, max(last, first + 1))
            lo, hi = int(starts[first]), int(starts[last])
            held, lengths = tf[lo:hi].astype(np.float64), length[docs[lo:hi]]
            ratio = held / (held + (BM25_K1 * (1.0 - BM25_B) + self.at_token * lengths))
            cuts = starts[first:last] - lo
            impact = np.maximum.reduceat(ratio, cuts)
            self.min_length[first:last] = np.minimum.reduceat(lengths, cuts)
            self.impact[first:last] = impact
            scale = np.divide(LEVELS, impact, out=np.zeros_like(impact), where=impact > 0)
            ratio *= np.repeat(scale, np.diff(starts[first : last + 1]))
            np.ceil(ratio, out=ratio)
            np.clip(ratio, 1, LEVELS, out=ratio)
            self.coded[lo:hi] = ratio
            self.max_tf[first:last] = np.maximum.reduceat(held, cuts)
            first = last
        for word in np.flatnonzero(np.diff(starts) * MEMBER_SHARE >= len(length)).tolist():
            lo, hi = int(starts[word]), int(starts[word + 1])
            self.members[word] = Membership(docs[lo:hi], len(length))
            self.members[word].build()
        self.complete = True

    def word_codes(self, word: int, starts: Any) -> Any:
        """The codes of ``word``'s postings (``fill`` or ``fill_all`` computed them)."""
        if self.coded is not None:
            return self.coded[int(starts[word]) : int(starts[word + 1])]
        return self.codes[word]

    def bounds(self, words: Any, per_token: float) -> tuple[Any, Any]:
        """Per word of ``words`` (an array): an upper bound of ``tf / (tf + norm)`` over its postings
        with BM25's norm at ``per_token`` (k1·b / mean length), from the highest tf and the shortest
        lesson, and from ``impact``, the exact maximum when the norm's per-token term was ``at_token``
        (a norm that grew can only lower it; one that shrank by a factor raises it by that factor at
        most); and the unit a posting's code is counted in (a ratio is at most its code times it)."""
        max_tf, min_length, impact = self.max_tf[words], self.min_length[words], self.impact[words]
        loose = np.zeros(len(words))
        np.divide(
            max_tf,
            max_tf + BM25_K1 * (1.0 - BM25_B) + per_token * min_length,
            out=loose,
            where=max_tf > 0,
        )
        grown = drift(self.at_token, per_token)
        bound = loose if self.at_token <= 0 or per_token <= 0 else np.minimum(loose, impact * grown)
        return bound, impact * grown / LEVELS

    def nbytes(self) -> int:
        codes = sum(int(codes.nbytes) for codes in self.codes.values())
        codes += int(self.coded.nbytes) if self.coded is not None else 0
        return codes + sum(m.nbytes for m in self.members.values()) + 3 * 8 * len(self.max_tf)
