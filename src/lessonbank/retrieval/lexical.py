"""Lexical recall: the query's keywords searched with BM25, then blended with use, recency and utility.

Kept as a function for callers that hold a store and no retriever; the work is done by
:class:`lessonbank.retrieval.hybrid.Retriever` in ``lexical`` mode.
"""

from __future__ import annotations

from lessonbank.models import Hit
from lessonbank.ports import LessonQuery, Store
from lessonbank.retrieval.hybrid import Retriever


def recall_lexical(store: Store, text: str, query: LessonQuery, *, k: int, now: float) -> list[Hit]:
    """The ``k`` best lessons for ``text`` that pass the filters in ``query``."""
    return Retriever(store).recall(text, query, k=k, now=now, mode="lexical")
