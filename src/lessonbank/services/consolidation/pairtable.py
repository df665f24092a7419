"""The pair scorer's features (:mod:`.scorer`) for many pairs of one scope at once, with NumPy: the
pre-pass scores every candidate pair of a bank in a few array operations instead of a Python call
each (about a millisecond a pair).

:class:`TermTable` holds the scope's texts as sparse rows of term ids (sorted), each term's IDF weight
(:meth:`.paraphrase.Weights.weight`) and its BM25 contribution in that text. From it:

- :meth:`TermTable.likely_pairs`: the candidate pairs by words, each text's :data:`NEIGHBOURS`
  likeliest partners by weighted Dice from a floor, among the texts sharing one of their rarest terms
  (the shared weights of a block are one matrix product);
- :meth:`TermTable.features`: the scorer's features of given pairs, equal to :func:`.scorer.features`
  except ``template`` (a word-sequence alignment, left at 0: its coefficient is negative, so a
  probability computed with 0 is an upper bound, and only the pairs whose bound reaches a threshold
  are aligned one by one).
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

import numpy as np

from lessonbank.services.consolidation import scorer
from lessonbank.services.consolidation.paraphrase import Weights, lower_words, terms
from lessonbank.text import literals, words

TEMPLATE = scorer.FEATURES.index("template")
CHUNK = 8_192  # pairs whose shared terms are found at once (a few MB of int64 keys per chunk)


class TermTable:
    """One scope's texts as rows of term ids with their weights (see the module docstring)."""

    def __init__(self, texts: Sequence[str], weights: Weights) -> None:
        self.texts = list(texts)
        vocabulary: dict[str, int] = {}
        ids: list[int] = []
        idf: list[float] = []
        contribution: list[float] = []
        indptr = [0]
        average = max(weights.average_length(), 1.0)
        lengths, names = [], []
        literal_ids: dict[frozenset[str], int] = {}
        for text in self.texts:
            counts = scorer._counts(text)
            length = sum(counts.values())
            norm = scorer.BM25_K1 * (1.0 - scorer.BM25_B + scorer.BM25_B * length / average)
            row = sorted((vocabulary.setdefault(term, len(vocabulary)), term) for term in terms(text))
            for term_id, term in row:
                weight = weights.weight(term)
                count = counts.get(term, 0)
                ids.append(term_id)
                idf.append(weight)
                contribution.append(
                    weight * count * (scorer.BM25_K1 + 1.0) / (count + norm) if count else 0.0
                )
            indptr.append(len(ids))
            lengths.append(len(words(text)))
            named = literals(text)
            names.append(literal_ids.setdefault(named, len(literal_ids)) if named else -1)
        self.vocabulary = len(vocabulary)
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.ids = np.asarray(ids, dtype=np.int64)
        self.idf = np.asarray(idf, dtype=np.float64)
        self.contribution = np.asarray(contribution, dtype=np.float64)
        row_of = np.repeat(np.arange(len(self.texts), dtype=np.int64), np.diff(self.indptr))
        self.total = np.bincount(row_of, weights=self.idf, minlength=len(self.texts))
        self.best = np.bincount(row_of, weights=self.contribution, minlength=len(self.texts))
        self.lengths = np.asarray(lengths, dtype=np.float64)
        self.names = np.asarray(names, dtype=np.int64)
        self.frequency = np.bincount(self.ids, minlength=self.vocabulary)
        self.top = weights.weight("\x00")  # a term no lesson has: the highest weight there is

    def _rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions in :attr:`ids` of the given rows' terms, and for each the row's index in ``rows``."""
        starts = self.indptr[rows]
        counts = self.indptr[rows + 1] - starts
        owner = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
        offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        return np.repeat(starts, counts) + offsets, owner

    def likely_pairs(self, rare_terms: int, max_block: int, floor: float, neighbours: int) -> np.ndarray:
        """Pairs (i < j, an array of shape (m, 2)) of texts sharing one of their ``rare_terms`` rarest
        terms in a block of at most ``max_block`` texts, at weighted Dice ≥ ``floor``, each text's
        ``neighbours`` likeliest partners (ties to the later partner)."""
        n = len(self.texts)
        # Each text's rarest terms (by frequency, then term id), all texts at once.
        row_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.indptr))
        order = np.lexsort((self.ids, self.frequency[self.ids], row_of))
        rank = np.arange(len(order)) - self.indptr[row_of[order]]
        kept = order[rank < rare_terms]
        # Blocks: the texts holding each such term, in term order.
        by_term = kept[np.lexsort((row_of[kept], self.ids[kept]))]
        terms_sorted = self.ids[by_term]
        bounds = np.flatnonzero(np.r_[True, terms_sorted[1:] != terms_sorted[:-1], True])
        firsts, seconds, likeness = [], [], []
        for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            if stop - start < 2 or stop - start > max_block:
                continue
            rows = row_of[by_term[start:stop]]
            positions, owner = self._rows(rows)
            columns, local, counts = np.unique(self.ids[positions], return_inverse=True, return_counts=True)
            useful = counts[local] >= 2  # a term of one text of the block is shared by no pair
            dense = np.zeros((len(rows), len(columns)), dtype=np.float32)
            dense[owner[useful], local[useful]] = self.idf[positions[useful]]
            shared = dense @ (dense > 0).T.astype(np.float32)
            totals = self.total[rows]
            sums = totals[:, None] + totals[None, :]
            dice = np.divide(2.0 * shared, sums, out=np.zeros(sums.shape), where=sums > 0)
            keep = dice >= floor
            np.fill_diagonal(keep, False)
            if len(rows) > neighbours + 1:
                # A text's likeliest partners overall are among its likeliest in every block holding
                # them: keep each text's own best of the block only (ties to the later text, as below).
                ranked = np.where(keep, dice + np.arange(len(rows))[None, :] * 1e-12, -1.0)
                best = np.argpartition(-ranked, neighbours - 1, axis=1)[:, :neighbours]
                mine = np.zeros_like(keep)
                np.put_along_axis(mine, best, True, axis=1)
                keep &= mine | mine.T
            i, j = np.nonzero(np.triu(keep, k=1))
            firsts.append(rows[i])
            seconds.append(rows[j])
            likeness.append(dice[i, j])
        if not firsts:
            return np.zeros((0, 2), dtype=np.int64)
        a, b, value = np.concatenate(firsts), np.concatenate(seconds), np.concatenate(likeness)
        low, high = np.minimum(a, b), np.maximum(a, b)
        keys, first = np.unique(low * n + high, return_index=True)
        low, high, value = keys // n, keys % n, value[first]
        # Each text's likeliest partners: both directions, by text then likeness (descending), ranked.
        text = np.concatenate([low, high])
        partner = np.concatenate([high, low])
        both = np.concatenate([value, value])
        pair = np.concatenate([np.arange(len(keys)), np.arange(len(keys))])
        order = np.lexsort((-partner, -both, text))
        text, pair = text[order], pair[order]
        starts = np.flatnonzero(np.r_[True, text[1:] != text[:-1]])
        rank = np.arange(len(text)) - np.repeat(starts, np.diff(np.r_[starts, len(text)]))
        kept = np.unique(pair[rank < neighbours])
        return np.stack([low[kept], high[kept]], axis=1)

    def features(self, pairs: np.ndarray) -> np.ndarray:
        """The scorer's features of the pairs (rows of two text indexes), one row each in
        :data:`.scorer.FEATURES` order, with ``template`` 0 (see the module docstring)."""
        out = np.zeros((len(pairs), len(scorer.FEATURES)))
        for start in range(0, len(pairs), CHUNK):
            chunk = pairs[start : start + CHUNK]
            out[start : start + len(chunk)] = self._features(chunk[:, 0], chunk[:, 1])
        return out

    def _features(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        m = len(a)
        positions_a, owner_a = self._rows(a)
        positions_b, owner_b = self._rows(b)
        keys_a = owner_a * self.vocabulary + self.ids[positions_a]  # sorted: rows are sorted by term id
        keys_b = owner_b * self.vocabulary + self.ids[positions_b]
        _, at_a, at_b = np.intersect1d(keys_a, keys_b, assume_unique=True, return_indices=True)
        owner = owner_a[at_a]
        weight = self.idf[positions_a[at_a]]
        shared = np.bincount(owner, weights=weight, minlength=m)
        rarest = np.zeros(m)
        np.maximum.at(rarest, owner, weight)
        into_b = np.bincount(owner, weights=self.contribution[positions_b[at_b]], minlength=m)
        into_a = np.bincount(owner, weights=self.contribution[positions_a[at_a]], minlength=m)
        total_a, total_b = self.total[a], self.total[b]
        sums = total_a + total_b

        def share(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
            out = np.zeros(m)
            np.divide(part, whole, out=out, where=whole > 0)
            return out

        values = np.empty((m, len(scorer.FEATURES)))
        values[:, 0] = share(2.0 * shared, sums)
        values[:, 1] = np.maximum(share(shared, total_a), share(shared, total_b))
        values[:, 2] = rarest / self.top
        values[:, 3] = np.minimum(1.0, shared / (scorer.MASS * self.top))
        values[:, 4] = np.minimum(share(into_b, self.best[b]), share(into_a, self.best[a]))
        values[:, TEMPLATE] = 0.0
        values[:, 6] = share(
            np.minimum(self.lengths[a], self.lengths[b]), np.maximum(self.lengths[a], self.lengths[b])
        )
        values[:, 7] = (self.names[a] >= 0) & (self.names[a] == self.names[b])
        return np.minimum(values, 1.0)


def alignments(pairs: Sequence[tuple[str, str]]) -> list[float]:
    """:func:`.paraphrase.template_likeness` of each pair, the pairs of one second text aligned by one
    matcher (difflib indexes the second sequence once: a fifth of an alignment's cost)."""
    found = [0.0] * len(pairs)
    order = sorted(range(len(pairs)), key=lambda n: pairs[n][1])
    matcher = SequenceMatcher(None, autojunk=False)
    second: str | None = None
    for n in order:
        a, b = pairs[n]
        if b != second:
            matcher.set_seq2(lower_words(b))
            second = b
        matcher.set_seq1(lower_words(a))
        found[n] = matcher.ratio()
    return found


def probabilities(model: scorer.Model, values: np.ndarray, cosines: np.ndarray | None = None) -> np.ndarray:
    """The model's probability for each row of feature values (:func:`.scorer.probability`)."""
    z = model.intercept + values @ np.asarray(model.coefficients[: values.shape[1]])
    if model.vectors:
        assert cosines is not None
        z = z + model.coefficients[-1] * cosines
    return np.where(z > -60, 1.0 / (1.0 + np.exp(-np.maximum(z, -60))), 0.0)
