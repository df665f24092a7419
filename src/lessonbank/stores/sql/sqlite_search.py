"""SQLite lexical search in the store: BM25 over the FTS5 index, every statistic per namespace.

Recall ranks here only where numpy is missing (elsewhere :mod:`lessonbank.retrieval.lexical_index`
ranks the term vectors): FTS5 finds the postings and the score is the BM25 of
:mod:`~lessonbank.stores.lexical` computed in SQL from the namespace's own figures, so a namespace
ranks alike whether it is alone in its file or not (FTS5's ``bm25()`` reads table-wide figures
and takes another IDF). The near-duplicate check on each write uses ``bm25()`` when the namespace
holds every lesson of the file: it only gathers candidates.

Invariants:

- ``lesson_term_instances`` (``fts5vocab`` ``instance``) gives each matching lesson's term
  frequency per column, ``lessons_fts_docsize`` its length in tokens (FTS5's own counts);
- ``lexical_stats`` holds each namespace's lesson count and total length, kept in step with
  ``lessons`` by its triggers (and by the bulk import, which stands the triggers aside);
- document frequencies count only the namespace's lessons, capped just above the postings
  budget, and the "newest postings" fallback takes the namespace's own newest lessons.
"""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from collections.abc import Sequence
from typing import Any

from lessonbank.ports import Candidate, LessonQuery
from lessonbank.stores import lexical
from lessonbank.stores.lexical import (
    BM25_B,
    BM25_K1,
    CACHED_MIN_DF,
    FIELD_WEIGHTS,
    choose_terms,
    common_idf,
    idf,
    term_vector_sql,
)
from lessonbank.stores.sql.dialect import Connection, Dialect, lesson_filter
from lessonbank.text import stem

CANDIDATE_COLUMNS = (
    "l.id, l.access_count, l.confidence, l.pinned, coalesce(l.last_accessed, l.created_at) AS used, "
    "l.importance, l.helpful, l.harmful"
)
# Each FTS5 column's weight, as SQL over the instance table's ``col``.
_COLUMN_WEIGHT = (
    "CASE i.col "
    + " ".join(f"WHEN '{name}' THEN {weight!r}" for name, weight in FIELD_WEIGHTS.items())
    + " ELSE 1.0 END"
)
_RANK = "bm25(" + ", ".join(repr(FIELD_WEIGHTS[f]) for f in ("content", "tags", "learned_from")) + ")"
DOC_LENGTH_FUNCTION = "lb_doc_len"
IDF_FUNCTION = "lb_idf"
TERM_VECTOR_FUNCTION = "lb_term_vector"
TERM_VECTOR_ARGUMENTS = "content, tags, learned_from, kind, agent, task_type, goal_id"


def doc_length(sizes: bytes | None) -> int:
    """A lesson's length in tokens from its ``lessons_fts_docsize`` record: one SQLite varint
    (big-endian groups of 7 bits, the high bit set on all but the last byte) per column, summed."""
    total = value = 0
    for byte in sizes or b"":
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            total, value = total + value, 0
    return total


def register_functions(conn: sqlite3.Connection) -> None:
    """The SQL functions the schema's triggers and the search call (on every connection)."""
    conn.create_function(DOC_LENGTH_FUNCTION, 1, doc_length, deterministic=True)
    conn.create_function(IDF_FUNCTION, 2, idf, deterministic=True)
    conn.create_function(TERM_VECTOR_FUNCTION, 7, term_vector_sql, deterministic=True)


def indexed_form(term: str) -> str:
    """A query word as FTS5's ``porter unicode61 remove_diacritics 2`` tokenizer stores it."""
    folded = unicodedata.normalize("NFKD", term.lower())
    return stem("".join(ch for ch in folded if not unicodedata.combining(ch)))


def fts_query(terms: Sequence[str], column: str | None = None) -> str:
    """An FTS5 MATCH expression OR-ing the terms, each quoted so no term is read as syntax;
    limited to one column when ``column`` is given."""
    expression = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    return f"{column} : ({expression})" if column else expression


class FtsSearch:
    """BM25 recall over the FTS5 index, with per-namespace statistics and caches."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self._df_cache: dict[tuple[str, bool], tuple[int, dict[str, int]]] = {}

    def search(
        self,
        conn: Connection,
        query: LessonQuery,
        terms: Sequence[str],
        limit: int,
        *,
        content_only: bool = False,
    ) -> list[Candidate]:
        """Top ``limit`` lessons by BM25 that pass the filters.

        Recall ranks by every query word, exactly (``rank`` in FTS5 when the namespace is alone in
        the file, else the same formula in SQL); its work grows with the words' postings, which is
        why recall goes to the in-process lexical index when numpy is there. ``content_only`` (the
        near-duplicate check on every write) limits matching to the content column and bounds its
        work instead: terms are taken rarest first while their postings fit
        ``lexical.POSTINGS_BUDGET``, more common words act as stopwords, and when every word is
        that common the namespace's newest lessons holding its rarest word are taken unranked.
        """
        docs, tokens, alone = self.corpus_stats(conn, query.namespace)
        where, params = lesson_filter(self.dialect, query, self.dialect.clock())
        if not content_only:
            chosen = list(dict.fromkeys(term for term in terms if term))
            if not chosen or not docs:
                return []
        else:
            frequencies = self._document_frequencies(conn, query.namespace, terms, docs, alone=alone)
            chosen, rarest = choose_terms(frequencies)
            if rarest is None:
                return []
            if not chosen:
                # The namespace's newest postings of the rarest word (CROSS JOIN: the postings stay outermost).
                rows = conn.execute(
                    f"SELECT {CANDIDATE_COLUMNS}, ? FROM (SELECT lessons_fts.rowid AS doc FROM lessons_fts "
                    "CROSS JOIN lessons n ON n.rowid = lessons_fts.rowid WHERE lessons_fts MATCH ? "
                    "AND n.namespace = ? ORDER BY lessons_fts.rowid DESC LIMIT ?) m "
                    f"JOIN lessons l ON l.rowid = m.doc WHERE {where} LIMIT ?",
                    (
                        common_idf(docs, rarest[0]),
                        fts_query([rarest[1]], "content"),
                        query.namespace,
                        lexical.POSTINGS_BUDGET,
                        *params,
                        limit,
                    ),
                ).fetchall()
                return [candidate(row, float(row[8])) for row in rows]
        if alone and content_only:
            # The near-duplicate check, one namespace holding every lesson: FTS5's own bm25() reads
            # its figures, fastest (its IDF is not recall's; this only finds candidates).
            rows = conn.execute(
                f"SELECT {CANDIDATE_COLUMNS}, -m.rank FROM (SELECT rowid, rank FROM lessons_fts "
                "WHERE lessons_fts MATCH ? AND rank MATCH ?) m "
                f"JOIN lessons l ON l.rowid = m.rowid WHERE {where} ORDER BY m.rank LIMIT ?",
                (fts_query(chosen, "content" if content_only else None), _RANK, *params, limit),
            ).fetchall()
            return [candidate(row, float(row[8])) for row in rows]
        # Each query word as the index holds it, once (two words with one stem are one term).
        times = dict.fromkeys((indexed_form(term) for term in chosen), 1)
        avg_len = tokens / docs if docs else 0.0
        # BM25 per term = idf × tf·(k1+1) / (tf + k1·(1 − b + b·length/avg_len)), tf weighted by
        # column, idf from the exact count of the namespace's lessons holding the term (read from
        # the same postings); ties in rowid order, as FTS5 gives them: one namespace ranks exactly
        # as FTS5's bm25() did. CROSS JOIN keeps the postings outermost: the planner left alone
        # may walk the namespace index over every lesson and probe the postings for each.
        flat = BM25_K1 * (1.0 - BM25_B) if avg_len else BM25_K1
        per_token = BM25_K1 * BM25_B / avg_len if avg_len else 0.0
        rows = conn.execute(
            f"WITH wanted (term, times) AS (VALUES {', '.join(['(?, ?)'] * len(times))}), "
            f"tf (doc, term, freq) AS MATERIALIZED (SELECT i.doc, i.term, sum({_COLUMN_WEIGHT}) "
            f"FROM lesson_term_instances i WHERE i.term IN ({','.join('?' * len(times))})"
            f"{' AND i.col = ?' if content_only else ''} GROUP BY i.doc, i.term), "
            "mine (doc, term, freq) AS MATERIALIZED (SELECT t.doc, t.term, t.freq FROM tf t CROSS JOIN lessons n "
            "WHERE n.rowid = t.doc AND n.namespace = ?), "
            f"weight (term, w) AS (SELECT m.term, w.times * {IDF_FUNCTION}(?, count(*)) FROM mine m "
            "CROSS JOIN wanted w WHERE w.term = m.term GROUP BY m.term) "
            f"SELECT {CANDIDATE_COLUMNS}, sum(g.w * m.freq * ? / (m.freq + ? + ? * {DOC_LENGTH_FUNCTION}(d.sz))) AS rel "
            "FROM mine m CROSS JOIN weight g CROSS JOIN lessons l CROSS JOIN lessons_fts_docsize d "
            f"WHERE g.term = m.term AND l.rowid = m.doc AND d.id = m.doc AND {where} "
            "GROUP BY l.rowid ORDER BY rel DESC, l.rowid LIMIT ?",
            (
                *(value for pair in times.items() for value in pair),
                *times,
                *(["content"] if content_only else []),
                query.namespace,
                docs,
                BM25_K1 + 1.0,
                flat,
                per_token,
                *params,
                limit,
            ),
        ).fetchall()
        return [candidate(row, float(row[8])) for row in rows]

    @staticmethod
    def corpus_stats(conn: Connection, namespace: str) -> tuple[int, int, bool]:
        """The namespace's lesson count and total length in tokens, and whether it holds every
        lesson of the file (one read: this is on every recall)."""
        row = conn.execute(
            "SELECT coalesce(max(CASE WHEN namespace = ? THEN docs END), 0), "
            "coalesce(max(CASE WHEN namespace = ? THEN tokens END), 0), coalesce(sum(docs), 0) FROM lexical_stats",
            (namespace, namespace),
        ).fetchone()
        docs, tokens, every = int(row[0]), int(row[1]), int(row[2])
        return docs, tokens, docs == every

    def _document_frequencies(
        self, conn: Connection, namespace: str, terms: Sequence[str], docs: int, *, alone: bool
    ) -> dict[str, int]:
        """How many of the namespace's lessons hold each term, capped just above the postings budget.

        Counting costs one step per posting, so only frequent terms are cached (rare ones are
        cheap, and their counts matter exactly); a namespace's cache is dropped when it grows or
        shrinks by 10 %. A namespace ``alone`` in the file counts postings without looking up
        whose lesson each is (a lookup per posting is what a count beside other namespaces costs).
        """
        key = (namespace, alone)  # counts made alone in the file are not the namespace's once it is not
        size, cache = self._df_cache.get(key, (docs, {}))
        if docs > size * 1.1 or docs < size:
            size, cache = docs, {}
        self._df_cache[key] = (size, cache)
        out: dict[str, int] = {}
        for term in terms:
            df = cache.get(term)
            if df is None:
                if alone:
                    sql = "SELECT count(*) FROM (SELECT 1 FROM lessons_fts WHERE lessons_fts MATCH ? LIMIT ?)"
                    params: tuple[Any, ...] = (fts_query([term]), lexical.POSTINGS_BUDGET + 1)
                else:
                    sql = (
                        "SELECT count(*) FROM (SELECT 1 FROM lessons_fts CROSS JOIN lessons n "
                        "ON n.rowid = lessons_fts.rowid WHERE lessons_fts MATCH ? AND n.namespace = ? LIMIT ?)"
                    )
                    params = (fts_query([term]), namespace, lexical.POSTINGS_BUDGET + 1)
                df = conn.execute(sql, params).fetchone()[0]
                if df >= CACHED_MIN_DF:
                    cache[term] = df
            out[term] = df
        return out

    def candidates(self, conn: Connection, query: LessonQuery, lesson_ids: Sequence[str]) -> list[Candidate]:
        where, params = lesson_filter(self.dialect, query, self.dialect.clock())
        # CROSS JOIN fixes the loop order: each id is looked up by the unique index, where the
        # planner left alone would walk the namespace index over every lesson.
        rows = conn.execute(
            f"SELECT {CANDIDATE_COLUMNS} FROM json_each(?) j CROSS JOIN lessons l ON l.id = j.value "
            f"WHERE {where}",
            (json.dumps(list(lesson_ids)), *params),
        ).fetchall()
        by_id = {row[0]: candidate(row, 0.0) for row in rows}
        return [by_id[lesson_id] for lesson_id in dict.fromkeys(lesson_ids) if lesson_id in by_id]


def candidate(row: Sequence[Any], relevance: float) -> Candidate:
    return Candidate(
        row[0], relevance, row[1], row[2], bool(row[3]), row[4], float(row[5]), int(row[6]), int(row[7])
    )
