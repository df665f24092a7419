"""References for lexical recall: bm25s (a plain in-memory BM25 over a sparse matrix) and an exhaustive
BM25 of our own, both over exactly the bank's lessons and tokens.

- ``Exhaustive`` scores every lesson holding a query word with the BM25 of ``lessonbank.stores.lexical``
  (same tokens, field weights, k1, b and IDF as the bank), in plain Python from its own postings: the
  ranking the bank's lexical recall must return.
- ``Bm25sReference`` indexes the same stemmed tokens (content, tags and provenance, unweighted: bm25s
  has no fields) with bm25s's Lucene variant at the textbook k1 = 1.2, b = 0.75 (not the bank's
  tuned constants: the reference is what a plain BM25 gives).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from lessonbank.codeterms import query_words
from lessonbank.stores.lexical import (
    BM25_B,
    BM25_K1,
    FIELD_WEIGHTS,
    query_terms,
    text_field_terms,
    weighted_frequencies,
)

MAX_QUERY_TERMS = 64  # as the bank's retriever
REFERENCE_K1, REFERENCE_B = 1.2, 0.75


def lesson_terms(lesson: dict[str, Any]) -> dict[str, list[str]]:
    return text_field_terms(lesson["content"], lesson.get("tags") or [], lesson.get("learned_from"))


def query_of(text: str) -> list[str]:
    return query_terms(query_words(text, MAX_QUERY_TERMS))


class Exhaustive:
    """Every posting of every query word, scored from scratch."""

    def __init__(self, lessons: Sequence[dict[str, Any]], ids: Sequence[str]) -> None:
        self.ids = list(ids)
        self.lengths: list[int] = []
        self.postings: dict[str, list[tuple[int, float]]] = {}
        for doc, lesson in enumerate(lessons):
            frequencies, length = weighted_frequencies(lesson_terms(lesson), FIELD_WEIGHTS)
            self.lengths.append(length)
            for term, tf in frequencies.items():
                self.postings.setdefault(term, []).append((doc, tf))
        self.avg = sum(self.lengths) / max(1, len(self.lengths))

    def scores(self, terms: Sequence[str]) -> dict[str, float]:
        docs = len(self.lengths)
        acc: dict[int, float] = {}
        for term in terms:
            postings = self.postings.get(term, [])
            if not postings:
                continue
            df = len(postings)
            weight = math.log(1 + (docs - df + 0.5) / (df + 0.5)) * (BM25_K1 + 1)
            for doc, tf in postings:
                norm = BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[doc] / self.avg)
                acc[doc] = acc.get(doc, 0.0) + weight * tf / (tf + norm)
        return {self.ids[doc]: score for doc, score in acc.items()}

    def top(self, text: str, k: int) -> list[tuple[str, float]]:
        scores = self.scores(query_of(text))
        return sorted(scores.items(), key=lambda item: -item[1])[:k]


class Bm25sReference:
    """bm25s over the lessons; ``allowed`` (one flag per lesson) masks out those recall may not return."""

    def __init__(
        self, lessons: Sequence[dict[str, Any]], ids: Sequence[str], allowed: Sequence[bool]
    ) -> None:
        import bm25s
        import numpy as np

        self.ids = list(ids)
        self.mask = np.asarray(allowed, dtype=np.float32)
        corpus = [[t for terms in lesson_terms(lesson).values() for t in terms] for lesson in lessons]
        start = time.perf_counter()
        self.model = bm25s.BM25(k1=REFERENCE_K1, b=REFERENCE_B, method="lucene")
        self.model.index(corpus, show_progress=False)
        self.index_seconds = time.perf_counter() - start
        self.vocab = self.model.vocab_dict

    def top_ids(self, text: str, k: int) -> list[str]:
        terms = [t for t in query_of(text) if t in self.vocab]
        if not terms:
            return []
        docs, scores = self.model.retrieve(
            [terms], k=k, show_progress=False, n_threads=0, weight_mask=self.mask
        )
        return [self.ids[int(doc)] for doc, score in zip(docs[0], scores[0], strict=True) if score > 0]


def overlap_with_exact(
    found: Sequence[str], exact: Sequence[tuple[str, float]], scores: dict[str, float]
) -> float:
    """Share of the exact top-k the bank returned; a lesson tied with the exact k-th score counts as
    found (which of equal scores comes first is arbitrary)."""
    if not exact:
        return 1.0
    cut = exact[-1][1] - 1e-9 * max(1.0, abs(exact[-1][1]))
    hits = sum(1 for lesson_id in found[: len(exact)] if scores.get(lesson_id, -1.0) >= cut)
    return hits / len(exact)
