"""The Redis lesson index: how a lesson and its index entries are written, removed and searched.

Invariants: a lesson's hash, its token postings (each record holds the token's BM25 factor in that
lesson; ``postings.py``), its tag sets, its content-hash key, the corpus counters and the seed 000
keys change together, queued into the caller's MULTI/EXEC; search reads only the postings of the
query's words (the near-duplicate check: of its selective words). A lesson's term vector (space
``lexical:terms-v1``) is written in the same MULTI/EXEC when what it is made of changed: recall
ranks those in the in-process exact index, and the postings serve the near-duplicate check, the
replay pool's keyword search and recall without numpy.

The postings cover content, tags and ``learned_from``; each field's term frequencies are
scaled by ``FIELD_WEIGHTS`` before the BM25 factor is taken (as SQLite's FTS5 ``bm25()`` with
column weights does), so provenance matches rank below content matches.

A flat field with nothing in it (no agent, no expiry, not pinned, ...) is not written, and a rewrite
removes it: an empty field costs a hash entry in every lesson, and a missing one reads as empty.
Likewise the JSON leaves out the fields that are None (each defaults to None when read back).

``helpful``/``harmful`` are counted in place in the lesson hash (like ``access_count``) and
override the JSON on read; a lesson hash written before they existed gets them from its JSON
the first time they are counted (``CREDIT_SCRIPT``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from lessonbank.lessons import LessonWriter, matches
from lessonbank.models import Decision, Episode, Lesson
from lessonbank.ports import Candidate, LessonQuery
from lessonbank.stores.lexical import (
    FIELD_WEIGHTS,
    LEXICAL_SPACE,
    POSTINGS_BUDGET,
    ChunkFactorTexts,
    FactorTexts,
    bm25_factors,
    common_idf,
    idf,
    match_terms,
    query_terms,
    term_vector_changed,
    weighted_term_vector,
    weighted_terms,
)
from lessonbank.stores.redis.db import (
    BATCH_SCRIPT,
    CREDIT_SCRIPT,
    PUT_VECTORS_SCRIPT,
    VECTOR_CHANGES_SCRIPT,
    Batch,
    Pipe,
    RedisDatabase,
    key_part,
)
from lessonbank.stores.redis.postings import Ranking, RedisPostings
from lessonbank.stores.redis.seed import SeedMirror

ROW_FIELDS = (
    "kind",
    "status",
    "task_type",
    "agent",
    "goal_id",
    "tags",
    "superseded",
    "expires_at",
    "confidence",
    "pinned",
    "created_at",
    "access_count",
    "last_accessed",
    "importance",
    "helpful",
    "harmful",
)
# Flat fields that may be left out of a lesson hash (empty); the others always hold something.
_OPTIONAL = ("task_type", "agent", "goal_id", "tags", "superseded", "expires_at", "pinned", "last_accessed")
# The hash fields a Lesson is read from: its JSON, and the counters kept in place.
LESSON_FIELDS = ["data", "access_count", "last_accessed", "helpful", "harmful"]
_SEP = "\x1f"


class Derived(NamedTuple):
    """What writing a lesson takes, worked out from the lesson alone (``RedisLessonIndex.derive``)."""

    frequencies: dict[str, float] | None  # None: made by an import's worker (worked out if needed)
    length: int
    row: list[str]
    factors: str
    vector: bytes


class Made(NamedTuple):
    """A new lesson as stored and what writing it takes but its BM25 factors (:func:`import_rows`)."""

    lesson: Lesson
    factors: FactorsField
    length: int
    row: list[str]
    vector: bytes


def import_rows(lessons: Sequence[Lesson]) -> list[Made]:
    """Each lesson as stored (``LessonWriter.prepared``), its row, factors field but for the mean
    length, and term vector: pure and picklable both ways, so an import's worker process makes them
    (``RedisStore.import_preparer``)."""
    made = []
    for lesson in map(LessonWriter.prepared, lessons):
        frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
        vector = weighted_term_vector(frequencies, length, lesson)
        made.append(Made(lesson, FactorsField.of(frequencies), length, _flat(_row(lesson)), vector))
    return made


CORPUS_TTL_S = 5.0
PAGE = 64


class RedisLessonIndex:
    """How a Redis store writes, removes and searches lessons and their index entries."""

    def __init__(self, db: RedisDatabase) -> None:
        self.db = db
        self.seed = SeedMirror(db)
        self.postings = RedisPostings(db)
        # Lesson id → (the lesson, what writing it needs: see ``derive``), filled ahead of a write.
        self.derived: dict[str, tuple[Lesson, Derived]] = {}
        self.corpus: dict[str, tuple[float, float]] = {}
        self.batch_script = self.db.r.register_script(BATCH_SCRIPT)
        self.credit_script = self.db.r.register_script(CREDIT_SCRIPT)
        self.put_vectors_script = self.db.r.register_script(PUT_VECTORS_SCRIPT)
        self.vector_changes_script = self.db.raw.register_script(VECTOR_CHANGES_SCRIPT)

    def lesson_key(self, namespace: str, lesson_id: str) -> str:
        return self.db.k(namespace, "lesson", lesson_id)

    def read_lesson(self, pipe: Pipe, namespace: str, lesson_id: str) -> Lesson | None:
        key = self.lesson_key(namespace, lesson_id)
        pipe.watch(key)
        return lesson_of(pipe.hmget(key, LESSON_FIELDS))

    def q_write_lesson(self, pipe: Pipe, lesson: Lesson, old: Lesson | None) -> None:
        """Queue the writes that store ``lesson`` (replacing ``old``) and keep every index in step."""
        self.q_changes(pipe, [(old, lesson, ())])

    def q_changes(
        self, pipe: Pipe, changes: Sequence[tuple[Lesson | None, Lesson | None, Sequence[str]]]
    ) -> None:
        """Queue lesson writes and removals, in order: each ``(old, new, models)`` stores ``new``
        over ``old``, or, when ``new`` is None, removes ``old`` and its vectors of ``models``.

        Every change's single-key commands go out as one script call (see ``Batch``), then one
        call writes their term vectors: a lesson touches ~30 keys, and two commands for a whole
        import chunk instead of thirty a lesson is what makes bulk imports fast.
        """
        batch, vectors, mirrored = Batch(), [], []
        corpus: dict[str, list[int]] = {}  # namespace → changes of its lesson count and total length
        for old, new, models in changes:
            if new is not None:
                vector = self._write(batch, new, old, corpus.setdefault(new.namespace, [0, 0]))
                if vector is not None:
                    vectors.append((new.namespace, (new.id, "", vector)))
                if old is None:
                    mirrored.append((self.seed.q_added, new))
            elif old is not None:
                self._delete(batch, old, models, corpus.setdefault(old.namespace, [0, 0]))
                mirrored.append((self.seed.q_removed, old))
        for ns, (docs, length) in corpus.items():  # once a batch: every lesson would repeat them
            batch.add("HINCRBY", self.db.k(ns, "corpus"), "docs", str(docs))
            batch.add("HINCRBY", self.db.k(ns, "corpus"), "length", str(length))
            batch.add("SADD", self.db.namespaces_key, ns)
        batch.queue(pipe, self.batch_script)
        for namespace in dict.fromkeys(ns for ns, _ in vectors):
            self.q_put_vectors(
                pipe, namespace, LEXICAL_SPACE, [row for ns, row in vectors if ns == namespace]
            )
        for queue, lesson in mirrored:
            queue(pipe, lesson)

    def derive(self, lessons: Sequence[Lesson], made: Sequence[Made] | None = None) -> None:
        """Work out ahead what writing each of ``lessons`` as a new lesson takes (its row, postings
        and term vector), so a bulk import does it while Redis runs the previous chunk's writes;
        with ``made`` (:func:`import_rows` of them, by an import's worker process), only the BM25
        factors, which take the namespace's mean length as this process reads it."""
        if made is None:
            for lesson in lessons:
                self.derived[lesson.id] = (lesson, self._derive(lesson))
            return
        shared = ChunkFactorTexts()
        for lesson, ahead in zip(lessons, made, strict=True):
            mean = self.avg_len(lesson.namespace)
            factors = ahead.factors.field(ahead.length, mean, shared[ahead.length, mean])
            if factors is None:  # two frequencies of one factor (rare): grouped term by term
                factors = factors_field(weighted_terms(lesson, FIELD_WEIGHTS)[0], ahead.length, mean)
            self.derived[lesson.id] = (lesson, Derived(None, ahead.length, ahead.row, factors, ahead.vector))

    def _derive(self, lesson: Lesson) -> Derived:
        frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
        return Derived(
            frequencies,
            length,
            _flat(_row(lesson)),
            factors_field(frequencies, length, self.avg_len(lesson.namespace)),
            weighted_term_vector(frequencies, length, lesson),
        )

    def _write(self, batch: Batch, lesson: Lesson, old: Lesson | None, corpus: list[int]) -> bytes | None:
        """Add to ``batch`` what writing ``lesson`` over ``old`` takes, and to ``corpus`` its change
        of the namespace's lesson count and length; return its new term vector, if it changed."""
        ns = lesson.namespace
        ahead = self.derived.pop(lesson.id, None)
        frequencies: dict[str, float] | None
        if ahead is not None and ahead[0] is lesson:  # derived for this very lesson, not an older copy
            frequencies, length = ahead[1].frequencies, ahead[1].length
            if frequencies is None and old is not None:  # compared with the old lesson's below
                frequencies = weighted_terms(lesson, FIELD_WEIGHTS)[0]
        else:
            ahead = None
            frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
        old_length, reindex = 0, True
        if old is not None:
            old_frequencies, old_length = weighted_terms(old, FIELD_WEIGHTS)
            reindex = (old_frequencies, old_length) != (frequencies, length)
        key = self.lesson_key(ns, lesson.id)
        row = ahead[1].row if ahead else _flat(_row(lesson))
        batch.add("HSET", key, *row)
        if old is not None:  # a field emptied since goes (a new lesson has none to remove)
            emptied = set(ROW_FIELDS).difference(row[::2])
            if emptied:
                batch.add("HDEL", key, *sorted(emptied))
        if reindex:  # a status or counter change keeps the postings (and document number) it had
            factors = (
                ahead[1].factors if ahead else factors_field(_known(frequencies), length, self.avg_len(ns))
            )
            batch.add("INDEX", key, self.postings.base(ns), lesson.id, factors, "")
        old_tags = set(old.tags) if old is not None else set()
        for tag in old_tags - set(lesson.tags):
            batch.add("SREM", self.db.k(ns, "tag", tag), lesson.id)
        for tag in set(lesson.tags) - old_tags:
            batch.add("SADD", self.db.k(ns, "tag", tag), lesson.id)
        if old is not None and old.content_hash != lesson.content_hash:
            batch.add("DEL", self.db.k(ns, "hash", old.content_hash))
        batch.add("SET", self.db.k(ns, "hash", lesson.content_hash), lesson.id)
        batch.add("ZADD", self.db.k(ns, "lessons"), repr(lesson.created_at.timestamp()), lesson.id)
        if lesson.expires_at is not None:
            batch.add("ZADD", self.db.k(ns, "expiring"), repr(lesson.expires_at.timestamp()), lesson.id)
        elif old is not None:
            batch.add("ZREM", self.db.k(ns, "expiring"), lesson.id)
        corpus[0] += 0 if old is not None else 1
        corpus[1] += length - old_length
        batch.add("HSET", self.db.where_key, lesson.id, ns)
        if not term_vector_changed(lesson, old):
            return None
        return ahead[1].vector if ahead else weighted_term_vector(_known(frequencies), length, lesson)

    def q_put_vectors(
        self, pipe: Any, namespace: str, model: str, rows: Sequence[tuple[str, str, bytes]]
    ) -> None:
        """Queue one ``PUT_VECTORS_SCRIPT`` call writing ``rows`` (lesson id, text hash, vector); a
        row whose lesson hash does not exist when it runs is skipped."""
        keys = [self.vec_key(namespace, what, model) for what in ("vecctr", "vecseq", "vec", "vechash")]
        keys += [self.vec_models_key(namespace), *(self.lesson_key(namespace, row[0]) for row in rows)]
        args: list[Any] = [model]
        for lesson_id, text_hash, vector in rows:
            args += [lesson_id, text_hash, bytes(vector)]
        self.put_vectors_script(keys=keys, args=args, client=pipe)

    def avg_len(self, namespace: str) -> float:
        """The namespace's mean lesson length in tokens, cached a few seconds (it drifts slowly)."""
        cached = self.corpus.get(namespace)
        if cached is not None and time.monotonic() - cached[0] < CORPUS_TTL_S:
            return cached[1]
        docs, length = self.db.r.hmget(self.db.k(namespace, "corpus"), ["docs", "length"])
        avg = int(length or 0) / max(1, int(docs or 0))
        self.corpus[namespace] = (time.monotonic(), avg)
        return avg

    def q_delete_lesson(self, pipe: Pipe, lesson: Lesson, models: Sequence[str]) -> None:
        """Queue the removal of ``lesson``, its index entries and its vectors of ``models`` (all the
        namespace's embedder models, read under WATCH by the caller)."""
        self.q_changes(pipe, [(lesson, None, models)])

    def _delete(self, batch: Batch, lesson: Lesson, models: Sequence[str], corpus: list[int]) -> None:
        ns = lesson.namespace
        _, length = weighted_terms(lesson, FIELD_WEIGHTS)
        batch.add("UNINDEX", self.lesson_key(ns, lesson.id), self.postings.base(ns))
        batch.add("DEL", self.lesson_key(ns, lesson.id))
        for tag in lesson.tags:
            batch.add("SREM", self.db.k(ns, "tag", tag), lesson.id)
        batch.add("DEL", self.db.k(ns, "hash", lesson.content_hash))
        batch.add("ZREM", self.db.k(ns, "lessons"), lesson.id)
        batch.add("ZREM", self.db.k(ns, "expiring"), lesson.id)
        corpus[0] -= 1
        corpus[1] -= length
        batch.add("HDEL", self.db.where_key, lesson.id)
        for model in models:
            batch.add("HDEL", self.vec_key(ns, "vec", model), lesson.id)
            batch.add("HDEL", self.vec_key(ns, "vechash", model), lesson.id)
            batch.add("ZREM", self.vec_key(ns, "vecseq", model), lesson.id)

    def vec_key(self, namespace: str, what: str, model: str) -> str:
        """A key of the vectors of ``model``: ``vec`` (id → bytes), ``vechash`` (id → text hash),
        ``vecseq`` (zset id → sequence of its last write), ``vecctr`` (the sequence counter)."""
        return self.db.k(namespace, what, model)

    def vec_models_key(self, namespace: str) -> str:
        return self.db.k(namespace, "vecmodels")

    def lessons_in(self, namespace: str, lesson_ids: Sequence[str]) -> list[Lesson]:
        pipe = self.db.r.pipeline(transaction=False)
        for lesson_id in lesson_ids:
            pipe.hmget(self.lesson_key(namespace, lesson_id), LESSON_FIELDS)
        return [lesson for lesson in map(lesson_of, pipe.execute()) if lesson is not None]

    def rows(self, namespace: str, lesson_ids: Sequence[str]) -> list[dict[str, str] | None]:
        pipe = self.db.r.pipeline(transaction=False)
        for lesson_id in lesson_ids:
            pipe.hmget(self.lesson_key(namespace, lesson_id), list(ROW_FIELDS))
        rows: list[dict[str, str] | None] = [
            dict(zip(ROW_FIELDS, values, strict=True)) if values[0] is not None else None
            for values in pipe.execute()
        ]
        for row in rows:
            if row is not None:
                for name in _OPTIONAL:  # not written when empty
                    if row[name] is None:
                        row[name] = ""
        older = [
            (i, lesson_id)
            for i, (lesson_id, row) in enumerate(zip(lesson_ids, rows, strict=True))
            if row is not None and row["importance"] is None
        ]
        if older:  # hashes written before importance and the counters had flat copies: from the JSON
            pipe = self.db.r.pipeline(transaction=False)
            for _, lesson_id in older:
                pipe.hget(self.lesson_key(namespace, lesson_id), "data")
            for (i, _), data in zip(older, pipe.execute(), strict=True):
                row = rows[i]
                if row is not None and data:
                    fields = json.loads(data)
                    row["importance"] = repr(float(fields.get("importance", 0.5)))
                    for name in ("helpful", "harmful"):
                        if row[name] is None:
                            row[name] = str(int(fields.get(name, 0)))
        return rows

    def search(
        self, query: LessonQuery, terms: Sequence[str], limit: int, *, selective: bool = False
    ) -> list[Candidate]:
        """Top ``limit`` lessons by BM25 over every query word that pass the filters.

        Each posting record holds the token's BM25 factor in its lesson, so ranking is a weighted
        sum over the query words' postings (weights: the words' IDF), then pages through the best
        until ``limit`` lessons pass the filters, however deep that is. ``selective`` (the
        near-duplicate check on every write) bounds the work instead: only words within the
        postings budget count, and when every word is too common the lessons where the rarest
        weighs most are taken, all with the same relevance.
        """
        ns = query.namespace
        terms = query_terms(terms)
        if not terms or limit <= 0:
            return []
        frequencies, docs = self.postings.frequencies(ns, terms)
        chosen, rarest = match_terms(terms, frequencies, bounded=selective)
        if rarest is None:
            return []
        if selective and not chosen:
            flat = common_idf(docs, rarest[0])
            ranking = self.postings.ranked(ns, {rarest[1]: 1.0}, most=POSTINGS_BUDGET)
            return self._passing(query, ranking, limit, flat)
        weights = {term: idf(docs, frequencies[term]) for term in chosen}
        return self._passing(query, self.postings.ranked(ns, weights), limit, None)

    def _passing(
        self, query: LessonQuery, ranking: Ranking, limit: int, flat: float | None
    ) -> list[Candidate]:
        """The first ``limit`` of the ranked documents whose lessons pass the filters, as candidates
        of their score (or all of relevance ``flat``)."""
        out: list[Candidate] = []
        now, start, page = self.db.clock(), 0, max(PAGE, 2 * limit)
        while len(out) < limit and start < len(ranking):
            docs, scores = ranking.top(start + page)
            ids = self.postings.lesson_ids(query.namespace, docs[start:])
            kept = [
                (i, score) for i, score in zip(ids, scores[start:].tolist(), strict=True) if i is not None
            ]
            # Equal scores by lesson id, last first, as a sorted set ranks its members (the order the
            # near-duplicate check has always compared its candidates in).
            kept.sort(key=lambda item: item[0], reverse=True)
            kept.sort(key=lambda item: item[1], reverse=True)
            rows = self.rows(query.namespace, [lesson_id for lesson_id, _ in kept])
            for (lesson_id, score), row in zip(kept, rows, strict=True):
                if row is not None and row_passes(row, query, now):
                    out.append(candidate_of(lesson_id, row, score if flat is None else flat))
            start += page
            page *= 2  # a narrow filter lets few through: read ever larger pages
        return out[:limit]


def _row(lesson: Lesson) -> dict[str, str]:
    return {
        "data": lesson.model_dump_json(exclude_none=True),  # every field that may be None defaults to it
        "kind": lesson.kind,
        "status": lesson.status,
        "task_type": lesson.task_type or "",
        "agent": lesson.agent or "",
        "goal_id": lesson.goal_id or "",
        "tags": _SEP.join(lesson.tags),
        "superseded": "1" if lesson.superseded_by is not None else "",
        "expires_at": "" if lesson.expires_at is None else repr(lesson.expires_at.timestamp()),
        "confidence": repr(lesson.confidence),
        "pinned": "1" if lesson.pinned else "",
        "created_at": repr(lesson.created_at.timestamp()),
        "importance": repr(lesson.importance),
        "helpful": str(lesson.helpful),
        "harmful": str(lesson.harmful),
        "access_count": str(lesson.access_count),
        "last_accessed": "" if lesson.last_accessed is None else repr(lesson.last_accessed.timestamp()),
    }


def factors_field(frequencies: dict[str, float], length: int, avg_len: float) -> str:
    """A lesson's tokens (as key parts) and BM25 factors, as the ``INDEX`` batch command takes them:
    ``factor=token token;`` for each distinct factor (a lesson's factors take few values, one per term
    frequency), the factor as ``repr`` writes it (the double round-trips exactly). No key part holds
    a space, ``=`` or ``;``, and none of them needs escaping in the batch's JSON."""
    field = FactorsField.of(frequencies).field(length, avg_len)
    if field is not None:
        return field
    # Two frequencies round to one factor: grouped by factor term by term.
    groups: dict[float, list[str]] = {}
    for term, factor in bm25_factors(frequencies, length, avg_len).items():
        words = groups.get(factor)
        if words is None:
            words = groups[factor] = []
        words.append(key_part(term))
    return "".join(f"{factor!r}={' '.join(words)};" for factor, words in groups.items())


class FactorsField(NamedTuple):
    """:func:`factors_field` made before the mean length it takes is known (by an import's worker):
    its text with ``%s`` where each group's factor goes, and each group's term frequency."""

    text: str
    frequencies: tuple[float, ...]

    @classmethod
    def of(cls, frequencies: dict[str, float]) -> FactorsField:
        # Grouped by term frequency: distinct frequencies take distinct factors (the factor grows
        # with the frequency), so these are the groups by factor, in the same order.
        groups: dict[float, list[str]] = {}
        for term, tf in frequencies.items():
            if tf > 0:  # bm25_factors leaves the others out
                words = groups.get(tf)
                if words is None:
                    words = groups[tf] = []
                words.append(term)
        plain = "".join(frequencies)
        if plain.isascii() and plain.isalnum():  # plain words are their own key parts, with no "%"
            text = "".join(f"%s={' '.join(words)};" for words in groups.values())
        else:
            parts = (
                " ".join(key_part(term) for term in words).replace("%", "%%") for words in groups.values()
            )
            text = "".join(f"%s={words};" for words in parts)
        return cls(text, tuple(groups))

    def field(self, length: int, avg_len: float, texts: FactorTexts | None = None) -> str | None:
        """The field at ``avg_len``, or None when two frequencies take one factor (then the terms
        are grouped by factor, :func:`factors_field`); ``texts``: the factors' texts at ``length``
        and ``avg_len``, shared by the lessons of an import chunk."""
        texts = FactorTexts(length, avg_len) if texts is None else texts
        factors = tuple(map(texts.__getitem__, self.frequencies))
        if len(set(factors)) != len(factors):  # repr round-trips: equal texts, equal factors
            return None
        return self.text % factors


def _known(frequencies: dict[str, float] | None) -> dict[str, float]:
    """Frequencies ``_write`` worked out itself (only derived ones may be left out)."""
    assert frequencies is not None, "a lesson written without derived figures has its own frequencies"
    return frequencies


def _flat(mapping: dict[str, str]) -> list[str]:
    """The fields with something in them, as HSET takes them (name, value, name, value, ...)."""
    return [item for pair in mapping.items() if pair[1] for item in pair]


def row_passes(row: dict[str, str], query: LessonQuery, now: float) -> bool:
    """The lesson filters (``lessons.matches``) on the flat fields of a lesson hash."""
    return matches(
        query,
        now,
        status=row["status"],
        kind=row["kind"],
        task_type=row["task_type"],
        agent=row["agent"],
        goal_id=row["goal_id"],
        tags=row["tags"].split(_SEP),
        superseded=bool(row["superseded"]),
        expires_at=float(row["expires_at"]) if row["expires_at"] else None,
    )


def candidate_of(lesson_id: str, row: dict[str, str], relevance: float) -> Candidate:
    last_used = float(row["last_accessed"] or row["created_at"])
    return Candidate(
        lesson_id,
        float(relevance),
        int(row["access_count"] or 0),
        float(row["confidence"]),
        bool(row["pinned"]),
        last_used,
        float(row["importance"] or 0.5),
        int(row["helpful"] or 0),
        int(row["harmful"] or 0),
    )


def lesson_of(values: Sequence[Any]) -> Lesson | None:
    """A lesson from its hash's ``LESSON_FIELDS``: the JSON, overridden by the in-place counters."""
    data, access_count, last_accessed, helpful, harmful = values
    if not data:
        return None
    fields = json.loads(data)
    fields["access_count"] = int(access_count or 0)
    fields["last_accessed"] = float(last_accessed) if last_accessed else None
    if helpful is not None:
        fields["helpful"] = int(helpful)
    if harmful is not None:
        fields["harmful"] = int(harmful)
    return Lesson.model_validate(fields)


def episode_of(row: Sequence[Any]) -> tuple[Episode, Decision | None]:
    return Episode.model_validate_json(row[0]), Decision.model_validate_json(row[1]) if row[1] else None
