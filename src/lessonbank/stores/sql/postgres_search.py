"""PostgreSQL lexical search in the server: the lessons table's index columns and BM25 over them.

Recall does not come here when numpy is installed: each lesson's term vector is written with it
(``PostgresDialect.write_term_vectors``) and the in-process exact index ranks them. This search
serves the near-duplicate check on every write, and recall where numpy is missing.

Invariants: every column of ``lessons`` but ``data`` is a copy of a lesson field (or derived
from it: ``terms``, the tsvector of its tokens, and ``weights``, each token's BM25 factor),
always written in the same statement as ``data``; search finds candidates through the GIN index
on ``terms`` and ranks them in SQL by every query word.

Where the ranking differs from SQLite's exact BM25: a lesson's factors are taken with the
namespace's mean length when it was written (cached a few seconds), and frequent words'
document frequencies are cached until the namespace's size moves by 10 %.

The tokens of content, tags and ``learned_from`` all sit in ``terms``; their weights
(:data:`~lessonbank.stores.lexical.FIELD_WEIGHTS`) enter the BM25 factors in ``weights``, computed
as SQLite's FTS5 ``bm25()`` with column weights does, so the stores rank alike. (tsvector
``setweight`` labels are not used: they live on lexeme positions, which these position-free
vectors do not keep, and ``ts_rank`` is not BM25.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from lessonbank.models import Lesson
from lessonbank.ports import Candidate, LessonQuery
from lessonbank.stores import lexical
from lessonbank.stores.lexical import (
    CACHED_MIN_DF,
    FIELD_WEIGHTS,
    bm25_factors,
    common_idf,
    idf,
    match_terms,
    query_terms,
    weighted_term_vector,
    weighted_terms,
)
from lessonbank.stores.sql.dialect import Connection, Dialect, lesson_filter

COLUMNS = (
    "id, namespace, kind, content_hash, status, task_type, agent, goal_id, tags, importance, confidence, "
    "access_count, helpful, harmful, pinned, expires_at, superseded_by, last_used, created_at, doc_len, "
    "terms, weights, data, learned_from"
)
PLACEHOLDERS = ",".join(["?"] * 20 + ["array_to_tsvector(?::text[])", "?", "?", "?"])
CANDIDATE_COLUMNS = (
    "l.id, l.access_count, l.confidence, l.pinned, l.last_used, l.importance, l.helpful, l.harmful"
)
CORPUS_STATS_TTL_S = 5.0


class PostingsIndex:
    """The lexical side of the PostgreSQL lessons table, with its per-namespace caches."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self._corpus: dict[str, tuple[float, int, float]] = {}
        self._df_cache: dict[str, tuple[int, dict[str, int]]] = {}

    def forget(self, namespace: str) -> None:
        self._corpus.pop(namespace, None)

    def values(self, lesson: Lesson) -> tuple[Any, ...]:
        return values(lesson, self.avg_len(lesson.namespace))

    def values_and_terms(self, lesson: Lesson) -> tuple[tuple[Any, ...], bytes]:
        """The lesson's row of ``COLUMNS`` and its term vector, from one tokenisation."""
        return values_and_terms(lesson, self.avg_len(lesson.namespace))

    def search(
        self,
        conn: Connection,
        query: LessonQuery,
        terms: Sequence[str],
        limit: int,
        *,
        content_only: bool = False,
    ) -> list[Candidate]:
        """Top ``limit`` lessons by BM25 over every query word that pass the filters.

        The postings cover every field: ``content_only`` (the near-duplicate check on every write)
        only bounds the work: words in more lessons than the postings budget act as stopwords, and
        when every word is that common the namespace's newest lessons holding the rarest are taken,
        all with the same relevance.
        """
        terms = query_terms(terms)
        if not terms:
            return []
        docs, _ = self._corpus_stats(conn, query.namespace)
        frequencies = self._document_frequencies(conn, query.namespace, terms, docs)
        chosen, rarest = match_terms(terms, frequencies, bounded=content_only)
        if rarest is None:
            return []
        where, params = lesson_filter(self.dialect, query, self.dialect.clock())
        if chosen:
            # BM25 = Σ idf(term) × the term's factor stored with the lesson (see lexical.bm25_factors).
            score = " + ".join(["coalesce((l.weights->>?)::float8, 0) * ?"] * len(chosen))
            weights = [value for term in chosen for value in (term, idf(docs, frequencies[term]))]
            found = conn.execute(
                f"SELECT {CANDIDATE_COLUMNS}, {score} AS rel FROM lessons l WHERE {where} "
                "AND l.terms @@ ?::tsquery ORDER BY rel DESC LIMIT ?",
                (*weights, *params, " | ".join(_lexeme(t) for t in chosen), limit),
            ).fetchall()
            return [candidate(row, row[8]) for row in found]
        flat = common_idf(docs, rarest[0])
        found = conn.execute(
            f"SELECT {CANDIDATE_COLUMNS} FROM lessons l WHERE {where} AND l.seq IN (SELECT seq FROM lessons "
            "WHERE namespace = ? AND terms @@ ?::tsquery ORDER BY namespace, seq DESC LIMIT ?) LIMIT ?",
            (*params, query.namespace, _lexeme(rarest[1]), lexical.POSTINGS_BUDGET, limit),
        ).fetchall()
        return [candidate(row, flat) for row in found]

    def candidates(self, conn: Connection, query: LessonQuery, lesson_ids: Sequence[str]) -> list[Candidate]:
        where, params = lesson_filter(self.dialect, query, self.dialect.clock())
        rows = conn.execute(
            f"SELECT {CANDIDATE_COLUMNS} FROM lessons l WHERE l.id = ANY(?) AND {where}",
            (list(lesson_ids), *params),
        ).fetchall()
        by_id = {row[0]: candidate(row, 0.0) for row in rows}
        return [by_id[lesson_id] for lesson_id in dict.fromkeys(lesson_ids) if lesson_id in by_id]

    def _document_frequencies(
        self, conn: Connection, namespace: str, terms: Sequence[str], docs: int
    ) -> dict[str, int]:
        """How many lessons hold each term.

        Only frequent terms are cached (counting them is what costs), and the cache is dropped
        when the namespace grows or shrinks by 10 %: between, a frequent word's count may be off
        by the lessons written since (its IDF moves by well under 1 %).
        """
        size, cache = self._df_cache.get(namespace, (docs, {}))
        if docs > size * 1.1 or docs < size:
            size, cache = docs, {}
        self._df_cache[namespace] = (size, cache)
        missing = [t for t in terms if t not in cache]
        out = {t: cache[t] for t in terms if t in cache}
        if missing:
            # One count per term, each with its tsquery as a plain parameter so the GIN index is used.
            count = "SELECT ?, count(*) FROM lessons WHERE namespace = ? AND terms @@ ?::tsquery"
            params: list[Any] = []
            for index, term in enumerate(missing):
                params += [index, namespace, _lexeme(term)]
            rows = conn.execute(" UNION ALL ".join([count] * len(missing)), params).fetchall()
            for index, found in rows:
                term = missing[index]
                out[term] = int(found)
                if out[term] >= CACHED_MIN_DF:
                    cache[term] = out[term]
        return out

    def avg_len(self, namespace: str) -> float:
        """The mean lesson length last seen by a search (writes search first; 0 before any)."""
        cached = self._corpus.get(namespace)
        return cached[2] if cached is not None else 0.0

    def _corpus_stats(self, conn: Connection, namespace: str) -> tuple[int, float]:
        """Lesson count and mean document length of the namespace, cached a few seconds."""
        cached = self._corpus.get(namespace)
        if cached is not None and time.monotonic() - cached[0] < CORPUS_STATS_TTL_S:
            return cached[1], cached[2]
        row = conn.execute(
            "SELECT count(*), coalesce(avg(doc_len), 0) FROM lessons WHERE namespace = ?", (namespace,)
        ).fetchone()
        docs, avg_len = (int(row[0]), float(row[1])) if row else (0, 0.0)
        self._corpus[namespace] = (time.monotonic(), docs, avg_len)
        return docs, avg_len


def _lexeme(term: str) -> str:
    """``term`` as one quoted tsquery lexeme (taken as is, never read as syntax)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def values(lesson: Lesson, avg_len: float) -> tuple[Any, ...]:
    """The lesson as a row of ``COLUMNS`` (``PLACEHOLDERS``)."""
    return values_and_terms(lesson, avg_len)[0]


def values_and_terms(lesson: Lesson, avg_len: float) -> tuple[tuple[Any, ...], bytes]:
    """The lesson as a row of ``COLUMNS`` (``PLACEHOLDERS``), and its term vector."""
    return _row_and_terms(lesson, avg_len, as_text=False)


def copy_row_and_terms(lesson: Lesson, avg_len: float) -> tuple[tuple[Any, ...], bytes]:
    """:func:`values_and_terms` as ``COPY lessons (COLUMNS) FROM STDIN`` takes it (a bulk import):
    the arrays, the tsvector and the JSON written as their text input, which the server parses, instead
    of values the driver converts one by one in Python. The same values are stored."""
    return _row_and_terms(lesson, avg_len, as_text=True)


def _row_and_terms(lesson: Lesson, avg_len: float, *, as_text: bool) -> tuple[tuple[Any, ...], bytes]:
    frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
    factors = bm25_factors(frequencies, length, avg_len)
    if as_text:
        row = copy_text_row(lesson, frequencies, length, factors_json(factors))
    else:
        data = Jsonb(lesson.model_dump(mode="json"))
        row = _row(lesson, length, list(lesson.tags), list(frequencies), Jsonb(factors), data)
    return row, weighted_term_vector(frequencies, length, lesson)


def copy_text_row(
    lesson: Lesson, frequencies: Mapping[str, float], length: int, factors: str | None
) -> tuple[Any, ...]:
    """The lesson's row as ``COPY`` takes it (:func:`copy_row_and_terms`), its terms' ``frequencies``
    and ``length`` given, and its BM25 factors' JSON (None: filled in later, by an import that makes
    rows before it knows the namespace's mean length)."""
    tags = "{" + _joined_quoted(lesson.tags, ",", '"', '\\"') + "}"
    terms = _joined_quoted(frequencies, " ", "'", "''")
    return _row(lesson, length, tags, terms, factors, lesson.model_dump_json())


def _row(lesson: Lesson, length: int, tags: Any, terms: Any, factors: Any, data: Any) -> tuple[Any, ...]:
    """A row of ``COLUMNS``, the encoded columns given (as values the driver converts, or as text)."""
    return (
        lesson.id,
        lesson.namespace,
        lesson.kind,
        lesson.content_hash,
        lesson.status,
        lesson.task_type,
        lesson.agent,
        lesson.goal_id,
        tags,
        lesson.importance,
        lesson.confidence,
        lesson.access_count,
        lesson.helpful,
        lesson.harmful,
        lesson.pinned,
        None if lesson.expires_at is None else lesson.expires_at.timestamp(),
        lesson.superseded_by,
        (lesson.last_accessed or lesson.created_at).timestamp(),
        lesson.created_at.timestamp(),
        length,
        terms,
        factors,
        data,
        lesson.learned_from,
    )


def _quoted(text: str, quote: str, escaped: str) -> str:
    """``text`` as one quoted element of an array (``"``) or a tsvector (``'``) literal."""
    return quote + text.replace("\\", "\\\\").replace(quote, escaped) + quote


def _joined_quoted(texts: Iterable[str], separator: str, quote: str, escaped: str) -> str:
    """``texts`` each :func:`_quoted`, joined by ``separator``: in one join when none holds a character
    to escape (most lessons' words and tags)."""
    texts = list(texts)
    every = "".join(texts)
    if quote in every or "\\" in every:
        return separator.join(_quoted(text, quote, escaped) for text in texts)
    return quote + f"{quote}{separator}{quote}".join(texts) + quote if texts else ""


def factors_json(factors: dict[str, float]) -> str:
    """``json.dumps(factors)``, faster: a lesson's factors take few distinct values (one per term
    frequency), each written once, and its words are plain letters and digits, which JSON writes as
    they are. Other words go through ``json.dumps``."""
    words = "".join(factors)
    if not (words.isascii() and words.isalnum()):
        return json.dumps(factors)
    written: dict[float, str] = {}
    parts = []
    for term, factor in factors.items():
        text = written.get(factor)
        if text is None:
            text = written[factor] = repr(factor)
        parts.append(f'"{term}": {text}')
    return "{" + ", ".join(parts) + "}"


def candidate(row: Sequence[Any], relevance: float) -> Candidate:
    return Candidate(
        row[0],
        float(relevance),
        int(row[1]),
        float(row[2]),
        bool(row[3]),
        float(row[4]),
        float(row[5]),
        int(row[6]),
        int(row[7]),
    )
