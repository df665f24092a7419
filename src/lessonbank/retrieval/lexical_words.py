"""The query's words for a pruned lexical search: each word's postings (base and delta, dead slots
and the recall's scope accounted), its BM25 weight from the document frequency of the moment, its
upper bound and the codes of its base postings (:mod:`lessonbank.retrieval.pruning`).

Part of :class:`~lessonbank.retrieval.lexical_index.LexicalIndex` (a base class of it), kept apart
so each module stays readable; it reads the index's arrays and never changes them, except the
per-base cache of word bounds and dead slots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lessonbank.stores.lexical import BM25_B, BM25_K1, idf

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lessonbank.retrieval.pruning import Word
    from lessonbank.retrieval.snapshot import WordFigures
    from lessonbank.retrieval.word_bounds import WordBounds


class IndexArrays:
    """The index's base arrays, as its parts read them (declared for the type checker only; see
    LexicalIndex._clear)."""

    if TYPE_CHECKING:
        _np: Any
        _terms: Any
        _starts: Any
        _docs: Any
        _tf: Any


class PrunedWords(IndexArrays):
    """The word-side half of a pruned search over an index's base and delta."""

    if TYPE_CHECKING:  # the rest of the index's state it reads (see LexicalIndex._clear)
        _length: Any
        _alive: Any
        _live: int
        _total_length: float
        _delta: dict[int, list[tuple[int, float]]]
        _bounds: WordBounds | None
        _base_dead: int
        _base_slots: int
        _dead: tuple[int, Any] | None

    def _words(self, terms: Sequence[int], mask: Any, docs: int, norm: Any, per_token: float) -> list[Word]:
        """The query's words with their postings, weights and bounds, in the query's order (words
        no scoring lesson holds are left out, as the exhaustive scorer leaves them). A long query's
        words are looked up, bounded and sliced as arrays: a 64-word query paid ~25 µs of Python a
        word when each was worked out alone."""
        from lessonbank.retrieval import pruning  # numpy too: only a search gets here

        np = self._np
        wanted = np.fromiter(terms, np.uint64, len(terms))
        where = np.searchsorted(self._terms, wanted)
        if len(self._terms):
            holds = self._terms[np.minimum(where, len(self._terms) - 1)] == wanted
        else:
            holds = np.zeros(len(wanted), dtype=bool)
        at_held = where[holds]
        bounds = self._term_bounds(sorted(set(at_held.tolist())))
        highest, unit = bounds.bounds(at_held, per_token)
        lo, hi = self._starts[at_held].tolist(), self._starts[at_held + 1].tolist()
        base = iter(zip(at_held.tolist(), lo, hi, highest.tolist(), unit.tolist(), strict=True))
        no_docs, no_tf = self._docs[:0], self._tf[:0]
        out = []
        for term, held in zip(wanted.tolist(), holds.tolist(), strict=True):
            base_docs, base_tf, top, codes, step, within, member = no_docs, no_tf, 0.0, None, 0.0, None, None
            if held:
                at, start, end, top, step = next(base)
                base_docs, base_tf = self._docs[start:end], self._tf[start:end]
                within, member, codes = (
                    (self._docs, self._tf, start),
                    bounds.members.get(at),
                    bounds.word_codes(at, self._starts),
                )
            delta = (
                [(slot, tf) for slot, tf in self._delta.get(term, ()) if self._alive[slot]]
                if self._delta
                else []
            )
            if mask is not None:
                delta = [(slot, tf) for slot, tf in delta if mask[slot]]
                df = int(np.count_nonzero(mask[base_docs])) + len(delta)
            else:
                df = len(base_docs) - self._dead_in(base_docs) + len(delta)
            if not df:
                continue
            extra_docs, extra_tf = no_docs, no_tf
            if delta:
                extra_docs = np.fromiter((d[0] for d in delta), np.int32, len(delta))
                extra_tf = np.fromiter((d[1] for d in delta), np.float32, len(delta))
                ratio = extra_tf.astype(np.float64) / (extra_tf + norm[extra_docs])
                top = max(top, float(ratio.max()))
            weight = idf(docs, df) * (BM25_K1 + 1.0)
            word = pruning.Word(base_docs, base_tf, extra_docs, extra_tf, weight, weight * top, codes, step)
            word.within, word.member = within, member
            out.append(word)
        return out

    def _term_bounds(self, words: list[int]) -> WordBounds:
        """The base's word bounds, those of ``words`` computed if they are not yet."""
        if self._bounds is None:
            self._bounds = self._new_bounds()
        self._bounds.fill(self._starts, self._docs, self._tf, self._length, words)
        return self._bounds

    def _bound_every_word(self) -> None:
        """Compute every base word's bounds and codes now (a base just built from rows: its postings
        are at hand), so that no query pays for a word's first use."""
        self._bounds = self._new_bounds()
        self._bounds.fill_all(self._starts, self._docs, self._tf, self._length)

    def _word_figures(self) -> WordFigures:
        """Every base word's figures and codes, for a snapshot (computed now if they are not yet)."""
        from lessonbank.retrieval.snapshot import WordFigures

        if self._bounds is None or self._bounds.coded is None:
            self._bound_every_word()
        assert self._bounds is not None
        bounds = self._bounds
        return WordFigures(bounds.max_tf, bounds.min_length, bounds.impact, bounds.coded, bounds.at_token)

    def _restore_figures(self, figures: WordFigures) -> None:
        """Take every base word's figures and codes from a snapshot."""
        from lessonbank.retrieval import word_bounds  # numpy too: only a search gets here

        self._bounds = word_bounds.WordBounds.whole(
            figures.max_tf, figures.min_length, figures.impact, figures.codes, figures.at_token
        )

    def _new_bounds(self) -> WordBounds:
        from lessonbank.retrieval import word_bounds

        at_token = BM25_K1 * BM25_B * self._live / (self._total_length or 1.0)
        return word_bounds.WordBounds(len(self._terms), at_token)

    def _dead_in(self, docs: Any) -> int:
        """How many of a base word's postings are dead slots."""
        from lessonbank.retrieval import pruning

        if not self._base_dead or not len(docs):
            return 0
        if self._dead is None or self._dead[0] != self._base_dead:
            self._dead = (self._base_dead, self._np.flatnonzero(~self._alive[: self._base_slots]))
        return int(pruning.dead_in(docs, self._dead[1], self._alive))
