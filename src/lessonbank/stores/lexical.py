"""Lexical relevance, the same in every store: terms, BM25, the postings budget, field weights.

Invariants:

- Lexical relevance is FTS5's BM25 (k1 = 1.2, b = 0.75, IDF floored at 1e-6) over one
  document per lesson: its content, tags and ``learned_from`` tokenised and Porter-stemmed
  (:func:`field_terms`) as SQLite's FTS5 ``porter`` tokenizer does, so every backend matches
  the same words; each field's term frequencies are scaled by its weight and the document
  length counts every field, exactly as FTS5's ``bm25()`` with column weights does.
- Recall reads a bounded number of postings (``POSTINGS_BUDGET``): words held by more
  lessons act as stopwords; when every word is that common, the newest lessons holding the
  rarest word are taken, all with the same relevance (as SQLite does).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from lessonbank.models import Lesson
from lessonbank.text import stem, words

# Lexical recall reads at most about this many postings per query; words held by more lessons
# act as stopwords.
POSTINGS_BUDGET = 1500
# At most this many query words are matched (rarest first).
MAX_MATCH_TERMS = 12
# Document frequencies at or above this are cached (counting them is what costs; rare words are
# cheap to count and their counts matter exactly).
CACHED_MIN_DF = 64
# BM25 weight of each indexed field: where a lesson was learned counts, but less than what it says.
# SQLite's FTS5 columns are (content, tags, learned_from) in this order.
FIELD_WEIGHTS: dict[str, float] = {"content": 1.0, "tags": 1.0, "learned_from": 0.5}
BM25_K1 = 1.2
BM25_B = 0.75


def field_terms(lesson: Lesson) -> dict[str, list[str]]:
    """The stemmed tokens of each indexed field of a lesson (repeats kept)."""
    return {
        "content": [stem(w) for w in words(lesson.content)],
        "tags": [stem(w) for tag in lesson.tags for w in words(tag)],
        "learned_from": [stem(w) for w in words(lesson.learned_from or "")],
    }


def weighted_terms(lesson: Lesson, weights: Mapping[str, float]) -> tuple[dict[str, float], int]:
    """Each token's term frequency summed over the fields, each field's scaled by its weight
    (missing: 1.0), and the document length in tokens (all fields, unweighted, as FTS5 counts)."""
    frequencies: dict[str, float] = {}
    length = 0
    for name, terms in field_terms(lesson).items():
        weight = weights.get(name, 1.0)
        length += len(terms)
        for term in terms:
            frequencies[term] = frequencies.get(term, 0.0) + weight
    return frequencies, length


def bm25_factors(frequencies: Mapping[str, float], length: int, avg_len: float) -> dict[str, float]:
    """Each term's BM25 factor in one document from its (weighted) term frequencies and length;
    indexes store them with the document, so ranking needs no per-document work at query time."""
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / (avg_len or length or 1.0))
    return {term: tf * (BM25_K1 + 1.0) / (tf + norm) for term, tf in frequencies.items() if tf > 0}


def query_terms(terms: Sequence[str]) -> list[str]:
    """Query words as the index holds them: stemmed, each once."""
    return list(dict.fromkeys(stem(term.lower()) for term in terms if term))


def idf(docs: int, df: int) -> float:
    """FTS5's BM25 inverse document frequency, floored at 1e-6 as FTS5 does."""
    ratio = (docs - df + 0.5) / (df + 0.5)  # docs can lag df for a moment (cached counts)
    return max(1e-6, math.log(ratio)) if ratio > 0 else 1e-6


def common_idf(docs: int, df: int) -> float:
    """The relevance every candidate gets when all query words are too common to rank by."""
    size = max(1, docs, df)
    return math.log(1.0 + (size - df + 0.5) / (df + 0.5))


def choose_terms(frequencies: dict[str, int]) -> tuple[list[str], tuple[int, str] | None]:
    """Rarest terms first while their postings fit the budget; plus the rarest term overall."""
    ranked = sorted((df, term) for term, df in frequencies.items() if df > 0)
    if not ranked:
        return [], None
    chosen, postings = [], 0
    for df, term in ranked[:MAX_MATCH_TERMS]:
        if postings + df > POSTINGS_BUDGET:
            break
        chosen.append(term)
        postings += df
    return chosen, ranked[0]
