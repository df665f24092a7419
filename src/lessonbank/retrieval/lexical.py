"""Lexical recall: the query's keywords searched with BM25, then blended with use and recency.

Candidates carry only what scoring needs; full lessons are loaded for the ``k`` winners.
"""

from __future__ import annotations

from lessonbank.models import Hit
from lessonbank.retrieval.scoring import blend, temporal_score
from lessonbank.stores.base import LessonQuery, Store
from lessonbank.text import keywords

MAX_QUERY_TERMS = 32
CANDIDATES_PER_RESULT = 4


def recall_lexical(store: Store, text: str, query: LessonQuery, *, k: int, now: float) -> list[Hit]:
    """The ``k`` best lessons for ``text`` that pass the filters in ``query``."""
    terms = keywords(text)[:MAX_QUERY_TERMS]
    if not terms or k <= 0:
        return []
    candidates = store.search(query, terms, limit=max(k * CANDIDATES_PER_RESULT, 20))
    lexical = [c.relevance for c in candidates]
    temporal = [temporal_score(c.access_count, c.confidence, c.last_used, c.pinned, now) for c in candidates]
    ranked = sorted(
        zip(blend(lexical, temporal), lexical, temporal, candidates, strict=True),
        key=lambda item: item[0],
        reverse=True,
    )[:k]
    lessons = {lesson.id: lesson for lesson in store.get_lessons([item[3].lesson_id for item in ranked])}
    return [
        Hit(lesson=lessons[c.lesson_id], score=score, lexical=lex, temporal=tmp)
        for score, lex, tmp, c in ranked
        if c.lesson_id in lessons
    ]
