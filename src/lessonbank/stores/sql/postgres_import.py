"""PostgreSQL's bulk import: one transaction per chunk of lessons, new rows and term vectors by ``COPY``.

Invariants:

- A chunk is one transaction: the stored lessons with the same content are read ``FOR UPDATE`` and
  reinforced; an imported id another lesson holds gets a fresh one; the new lessons and their term
  vectors are written with ``COPY`` (one stream per table instead of a statement per row).
- A new lesson's BM25 factors take its namespace's mean length as the chunk's transaction finds it
  before writing: ``avg(doc_len)`` over the namespace. The count and sum behind it are read once, then
  followed through this process's chunks (each adds its new rows' count and lengths), and the mean is
  the server's division of the two (what ``avg`` does, so the same number) instead of a scan of the
  whole namespace per chunk, which grew with the bank (at 100k lessons, a tenth of the import's time).
  They are read again when a chunk reinforced stored lessons (their lengths changed), when a chunk did
  not commit, and after :data:`~.postgres_search.CORPUS_STATS_TTL_S` (other writers' lessons).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from lessonbank.lessons import LessonWriter
from lessonbank.models import Lesson
from lessonbank.stores.lexical import (
    FIELD_WEIGHTS,
    LEXICAL_SPACE,
    ChunkFactorTexts,
    FactorTexts,
    weighted_term_vector,
    weighted_terms,
)
from lessonbank.stores.sql.dialect import Connection
from lessonbank.stores.sql.postgres_search import (
    COLUMNS,
    CORPUS_STATS_TTL_S,
    copy_row_and_terms,
    copy_text_row,
)

if TYPE_CHECKING:
    from lessonbank.stores.sql.postgres import PgConnection, PostgresDialect

Reinforce = Callable[[Lesson, Sequence[str]], Lesson]
_NAMES = [name.strip() for name in COLUMNS.split(",")]
DOC_LEN, WEIGHTS, DATA = _NAMES.index("doc_len"), _NAMES.index("weights"), _NAMES.index("data")


class Factors(NamedTuple):
    """A lesson's BM25 factors as :func:`factors_json` writes them, made before the mean length they
    take is known: the JSON with ``%s`` where each term's factor goes, and the terms' frequencies. A
    lesson's terms take few distinct frequencies, so the importing process works out a factor per
    frequency and fills the text in one C call, instead of a factor and a piece of text per term;
    the frequencies travel as a tuple of floats (no term's text pickled twice)."""

    text: str
    frequencies: tuple[float, ...]  # each term's, in the text's order

    @classmethod
    def of(cls, frequencies: dict[str, float]) -> Factors:
        values = tuple(frequencies.values())
        kept: Any = frequencies
        if values and not min(values) > 0:  # bm25_factors leaves these terms out
            kept = {term: tf for term, tf in frequencies.items() if tf > 0}
            values = tuple(kept.values())
        words = "".join(kept)
        if not kept:
            text = "{}"
        elif words.isascii() and words.isalnum():  # as factors_json writes them, no "%" among them
            text = '{"' + '": %s, "'.join(kept) + '": %s}'
        else:  # as json.dumps writes each key
            text = "{" + ", ".join(json.dumps(term).replace("%", "%%") + ": %s" for term in kept) + "}"
        return cls(text, values)

    def json(self, length: int, mean: float, texts: FactorTexts | None = None) -> str:
        """``factors_json(bm25_factors(frequencies, length, mean))`` of the frequencies made of;
        ``texts``: the factors' texts at that length and mean, shared by the lessons of a chunk."""
        texts = FactorTexts(length, mean) if texts is None else texts
        return self.text % tuple(map(texts.__getitem__, self.frequencies))


class NewRow(NamedTuple):
    """A lesson's ``COPY`` row made apart from any transaction (:func:`import_rows`), all but its BM25
    factors (``weights``), which take the namespace's mean length as the chunk's transaction finds it.
    Its first fields are the lesson's, as a chunk reads them."""

    id: str
    namespace: str
    content_hash: str
    tags: list[str]
    row: tuple[Any, ...]  # copy_row_and_terms' row, weights None
    factors: Factors
    length: int
    vector: bytes

    def lesson(self) -> Lesson:
        """The lesson the row was made of (read back from its JSON: only for a reinforce or a new id)."""
        return Lesson.model_validate_json(self.row[DATA])

    def written(self, mean: float, texts: FactorTexts | None = None) -> tuple[tuple[Any, ...], bytes]:
        """:func:`copy_row_and_terms` of the lesson with ``mean``: the row with its factors, the vector
        (``texts``: its factors' texts at its length and ``mean``, see :meth:`Factors.json`)."""
        factors = self.factors.json(self.length, mean, texts)
        return (*self.row[:WEIGHTS], factors, *self.row[WEIGHTS + 1 :]), self.vector


Item = Lesson | NewRow


def import_rows(lessons: Sequence[Lesson]) -> list[NewRow]:
    """Each lesson's row as :func:`copy_row_and_terms` makes it but its factors, and its term vector.
    Pure and picklable both ways: an import's worker process runs it (``SQLStore.import_preparer``)."""
    rows = []
    for lesson in lessons:
        frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
        row = copy_text_row(lesson, frequencies, length, None)
        vector = weighted_term_vector(frequencies, length, lesson)
        rows.append(
            NewRow(
                lesson.id,
                lesson.namespace,
                lesson.content_hash,
                lesson.tags,
                row,
                Factors.of(frequencies),
                length,
                vector,
            )
        )
    return rows


class BulkImport:
    """The chunks of one dialect's imports, and the namespaces' lengths followed through them."""

    def __init__(self, dialect: PostgresDialect) -> None:
        self.dialect = dialect
        self._lock = threading.Lock()
        # namespace → (monotonic time read, lesson count, sum of doc_len), as of the last committed chunk
        self._lengths: dict[str, tuple[float, int, int]] = {}
        # what a chunk left for its commit to keep (see committed), by thread
        self._pending: dict[int, dict[str, tuple[float, int, int]]] = {}

    import_rows = staticmethod(import_rows)  # an import's worker process runs it (SQLStore.import_preparer)

    def import_prepared(self, rows: Sequence[NewRow]) -> tuple[int, int]:
        """Write rows :func:`import_rows` made, as the dialect's ``import_lessons`` writes lessons
        (its chunks come to :meth:`chunk`, which takes either)."""
        writer = LessonWriter(self.dialect.clock)
        return self.dialect.import_lessons(cast("Sequence[Lesson]", rows), writer.reinforced)

    def chunk(self, conn: Connection, chunk: Sequence[Item], reinforced: Reinforce) -> tuple[int, int]:
        """Write ``chunk`` (lessons, or rows :func:`import_rows` made) in the transaction ``conn``;
        returns (added, reinforced). Call :meth:`committed` once the transaction has committed."""
        namespaces = {lesson.namespace for lesson in chunk}
        with self._lock:  # taken out until the commit: a chunk that fails leaves them to be read again
            known = {ns: self._lengths.pop(ns) for ns in namespaces if ns in self._lengths}
        stored: dict[tuple[str, str], Item] = {}
        for namespace in namespaces:
            rows = conn.execute(
                "SELECT data FROM lessons WHERE namespace = ? AND content_hash = ANY(?) FOR UPDATE",
                (namespace, [lesson.content_hash for lesson in chunk if lesson.namespace == namespace]),
            ).fetchall()
            for (data,) in rows:
                found = Lesson.model_validate(data)
                stored[(found.namespace, found.content_hash)] = found
        ids = [lesson.id for lesson in chunk]
        taken = {
            row[0] for row in conn.execute("SELECT id FROM lessons WHERE id = ANY(?)", (ids,)).fetchall()
        }
        new: list[Item] = []
        changed: dict[str, Lesson] = {}
        for lesson in chunk:
            key = (lesson.namespace, lesson.content_hash)
            if key in stored:
                first = stored[key]
                stored[key] = again = reinforced(_lesson(first), lesson.tags)
                changed[again.id] = again
                continue
            if lesson.id in taken:
                lesson = _lesson(lesson).model_copy(
                    update={"id": Lesson.model_fields["id"].get_default(call_default_factory=True)}
                )
            taken.add(lesson.id)
            stored[key] = lesson
            new.append(lesson)
        new_ids = {lesson.id for lesson in new}
        final_new = [stored[(lesson.namespace, lesson.content_hash)] for lesson in new]
        lengths = {
            namespace: self._lengths_of(conn, namespace, known.get(namespace)) for namespace in namespaces
        }
        means = {namespace: _mean(conn, count, total) for namespace, (_, count, total) in lengths.items()}
        for lesson, length in zip(final_new, self.copy_new(conn, final_new, means), strict=True):
            read_at, count, total = lengths[lesson.namespace]
            lengths[lesson.namespace] = (read_at, count + 1, total + length)
        for lesson_id, lesson in changed.items():
            if lesson_id not in new_ids:
                self.dialect.overwrite_lesson(conn, lesson)
                lengths.pop(lesson.namespace, None)  # its length changed with its tags: read again
        for namespace in namespaces:
            self.dialect.lessons_changed(namespace)
        with self._lock:
            self._pending[threading.get_ident()] = lengths
        return len(new), len(chunk) - len(new)

    def committed(self) -> None:
        """The chunk this thread wrote last has committed: its namespaces' lengths are kept."""
        with self._lock:
            self._lengths.update(self._pending.pop(threading.get_ident(), {}))

    def _lengths_of(
        self, conn: Connection, namespace: str, known: tuple[float, int, int] | None
    ) -> tuple[float, int, int]:
        if known is not None and time.monotonic() - known[0] < CORPUS_STATS_TTL_S:
            return known
        row = conn.execute(
            "SELECT count(*), coalesce(sum(doc_len), 0) FROM lessons WHERE namespace = ?", (namespace,)
        ).fetchone()
        return (time.monotonic(), int(row[0]), int(row[1])) if row else (time.monotonic(), 0, 0)

    def copy_new(self, conn: Connection, lessons: Sequence[Item], means: dict[str, float]) -> list[int]:
        """Lessons no row holds yet (neither their id nor their content), and their term vectors,
        written by ``COPY``: one stream per table instead of a statement per row; returns their
        lengths. Each row is made as it is written, so the server stores the rows sent while the
        next are made. A new lesson has no vector row yet, so none is replaced
        (``write_term_vectors``' rule for the rest); the vectors hold their (namespace, space) lock
        as every vector write does."""
        raw = cast("PgConnection", conn).raw  # this dialect's transactions hand out PgConnections
        by_namespace: dict[str, list[tuple[str, bytes]]] = {}
        lengths: list[int] = []
        factor_texts = ChunkFactorTexts()
        with raw.cursor() as cur, cur.copy(f"COPY lessons ({COLUMNS}) FROM STDIN") as copy:
            for lesson in lessons:
                mean = means[lesson.namespace]
                if isinstance(lesson, NewRow):
                    row, vector = lesson.written(mean, factor_texts[lesson.length, mean])
                else:
                    row, vector = copy_row_and_terms(lesson, mean)
                copy.write_row(row)
                lengths.append(int(row[DOC_LEN]))
                by_namespace.setdefault(lesson.namespace, []).append((lesson.id, vector))
        for namespace in sorted(by_namespace):  # one lock order for every writer
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(?))",
                (self.dialect.vector_lock(namespace, LEXICAL_SPACE),),
            )
            with (
                raw.cursor() as cur,
                cur.copy(
                    "COPY lesson_vectors (lesson_id, model, namespace, text_hash, vector) FROM STDIN"
                ) as copy,
            ):
                for lesson_id, vector in by_namespace[namespace]:
                    copy.write_row((lesson_id, LEXICAL_SPACE, namespace, "", vector))
        return lengths


def _lesson(item: Item) -> Lesson:
    return item.lesson() if isinstance(item, NewRow) else item


def _mean(conn: Connection, count: int, total: int) -> float:
    """``coalesce(avg(doc_len), 0)`` of ``count`` lessons of lengths summing to ``total``: the server's
    numeric division of the two, as ``avg`` over integers ends (so the same value, to the last bit)."""
    if count == 0:
        return 0.0
    row = conn.execute("SELECT ?::numeric / ?::numeric", (total, count)).fetchone()
    return float(row[0]) if row else 0.0
