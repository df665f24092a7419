"""The memory store's lexical index of one namespace: content hashes and postings of stemmed terms,
with each lesson's weighted term frequencies (what BM25 in :mod:`lessonbank.stores.lexical` reads)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from lessonbank.models import Lesson
from lessonbank.stores.lexical import FIELD_WEIGHTS, field_terms, weighted_terms


@dataclass
class Doc:
    """One lesson in the lexical index: its row number (write order) and weighted term frequencies."""

    row: int
    terms: dict[str, float]  # every field, each scaled by its weight
    content: dict[str, float]  # the content field alone (the near-duplicate check)
    length: int  # tokens in every field, unweighted (as FTS5 counts a document's length)


@dataclass
class Space:
    """What one namespace indexes: content hashes, and postings of stemmed terms."""

    by_hash: dict[str, str] = field(default_factory=dict)
    docs: dict[str, Doc] = field(default_factory=dict)  # in row order
    postings: dict[str, set[str]] = field(default_factory=dict)
    content_postings: dict[str, set[str]] = field(default_factory=dict)
    length: int = 0

    def add(self, lesson: Lesson, row: int) -> None:
        terms, length = weighted_terms(lesson, FIELD_WEIGHTS)
        content = {term: float(n) for term, n in Counter(field_terms(lesson)["content"]).items()}
        self.docs[lesson.id] = Doc(row, terms, content, length)
        self.by_hash[lesson.content_hash] = lesson.id
        self.length += length
        for postings, found in ((self.postings, terms), (self.content_postings, content)):
            for term in found:
                postings.setdefault(term, set()).add(lesson.id)

    def remove(self, lesson: Lesson) -> int:
        """Take ``lesson`` out of the index; returns its row number."""
        doc = self.docs.pop(lesson.id)
        if self.by_hash.get(lesson.content_hash) == lesson.id:
            del self.by_hash[lesson.content_hash]
        self.length -= doc.length
        for postings, found in ((self.postings, doc.terms), (self.content_postings, doc.content)):
            for term in found:
                holders = postings[term]
                holders.discard(lesson.id)
                if not holders:
                    del postings[term]
        return doc.row
