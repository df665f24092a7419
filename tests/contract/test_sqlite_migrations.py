"""A SQLite file written by the previous schema opens, gains the new columns and is re-indexed."""

from __future__ import annotations

import json
import sqlite3
import struct
from pathlib import Path

from lessonbank.ports import LessonQuery
from lessonbank.stores.sql.migrations.sqlite import MIGRATIONS
from lessonbank.stores.sql.sqlite import split_sql
from lessonbank.stores.sqlite import SQLiteStore
from lessonbank.text import content_hash
from tests.contract.conftest import Clock
from tests.contract.test_contract_lessons import lesson

OLD_VERSION = 1  # the schema before provenance and vectors


def old_bank(path: Path, contents: list[str]) -> None:
    """A bank file as the previous release wrote it: its migrations only, lessons inserted by hand."""
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:OLD_VERSION]:
        for statement in split_sql(migration):
            conn.execute(statement)
    for n, content in enumerate(contents):
        conn.execute(
            "INSERT INTO lessons (id, namespace, kind, content, content_hash, tags, importance, confidence, "
            "source, status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                f"les_old{n}",
                "default",
                "lesson",
                content,
                content_hash("default", "lesson", content),
                json.dumps(["legacy"]),
                0.5,
                0.5,
                "manual",
                "active",
                1_800_000_000.0 + n,
                1_800_000_000.0 + n,
            ),
        )
    conn.execute(f"PRAGMA user_version = {OLD_VERSION}")
    conn.close()


def test_previous_schema_is_migrated_and_reindexed(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_bank(path, ["rotate the signing keys every quarter", "vacuum the analytics tables weekly"])
    clock = Clock()
    store = SQLiteStore(path, clock=clock)
    try:
        conn = store.dialect.connection()
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(lessons)")}
        assert "learned_from" in columns
        # Old rows were re-indexed into the rebuilt FTS table (content and tags).
        assert [c.lesson_id for c in store.search(LessonQuery("default"), ["signing"], 5)] == ["les_old0"]
        assert len(store.search(LessonQuery("default"), ["legacy"], 5)) == 2
        assert store.get_lesson("les_old1").learned_from is None
        # New lessons carry provenance; old ones can be given one, edited and forgotten.
        new = store.write_lesson(
            lesson("pin the base image digest", clock, learned_from="Harden the docker build")
        )
        assert [c.lesson_id for c in store.search(LessonQuery("default"), ["docker"], 5)] == [new.lesson.id]
        old = store.get_lesson("les_old1")
        store.update_lesson(old.model_copy(update={"learned_from": "Speed up the nightly reports"}))
        assert [c.lesson_id for c in store.search(LessonQuery("default"), ["nightly"], 5)] == ["les_old1"]
        store.put_vectors("default", "m", [("les_old0", "h", struct.pack("<f", 1.0))])
        assert store.delete_lesson("default", "les_old0")
        assert store.vector_changes("default", "m", 0).count == 0
        assert store.search(LessonQuery("default"), ["signing"], 5) == []
        # The index agrees with the table after all of it.
        conn.execute("INSERT INTO lessons_fts (lessons_fts) VALUES ('integrity-check')")
    finally:
        store.close()
    # Opening again applies nothing twice.
    again = SQLiteStore(path, clock=clock)
    try:
        assert again.get_lesson("les_old1").learned_from == "Speed up the nightly reports"
    finally:
        again.close()


def recomputed_stats(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    rows = conn.execute(
        "SELECT l.namespace, count(*), sum(lb_doc_len(d.sz)) FROM lessons l "
        "JOIN lessons_fts_docsize d ON d.id = l.rowid GROUP BY l.namespace"
    ).fetchall()
    return {ns: (docs, tokens) for ns, docs, tokens in rows}


def kept_stats(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    rows = conn.execute("SELECT namespace, docs, tokens FROM lexical_stats WHERE docs > 0").fetchall()
    return {ns: (docs, tokens) for ns, docs, tokens in rows}


def test_per_namespace_lexical_stats_are_backfilled_and_kept_in_step(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_bank(path, ["rotate the signing keys every quarter", "vacuum the analytics tables weekly"])
    clock = Clock()
    store = SQLiteStore(path, clock=clock)
    try:
        conn = store.dialect.connection()
        assert kept_stats(conn) == recomputed_stats(conn) == {"default": (2, 13)}
        first = store.write_lesson(lesson("keep the deploy window short", clock, namespace="b")).lesson
        store.write_lesson(
            lesson("keep the deploy window short", clock, namespace="b", tags=["ops", "deploy"])
        )
        store.update_lesson(first.model_copy(update={"content": "keep every deploy window under an hour"}))
        store.import_lessons(
            [lesson(f"bulk lesson {n} about caches", clock, namespace="b") for n in range(5)]
            + [lesson("bulk lesson 1 about caches", clock, namespace="b", tags=["cache"])]
        )
        assert store.delete_lesson("default", "les_old0")
        assert kept_stats(conn) == recomputed_stats(conn)
        assert kept_stats(conn)["b"][0] == 6
    finally:
        store.close()


def test_lessons_of_an_old_file_get_their_term_vectors(tmp_path: Path) -> None:
    from lessonbank.stores.lexical import LEXICAL_SPACE, term_vector

    path = tmp_path / "old.db"
    old_bank(path, ["rotate the signing keys every quarter", "vacuum the analytics tables weekly"])
    store = SQLiteStore(path, clock=Clock())
    try:
        rows = dict(store.vector_changes("default", LEXICAL_SPACE, 0).rows)
        scope = {"kind": "lesson", "agent": None, "task_type": None, "goal_id": None}
        assert rows == {
            "les_old0": term_vector("rotate the signing keys every quarter", ["legacy"], None, scope),
            "les_old1": term_vector("vacuum the analytics tables weekly", ["legacy"], None, scope),
        }
    finally:
        store.close()


def test_a_vector_count_that_drifted_is_taken_again_from_the_rows(tmp_path: Path) -> None:
    """Migration 7: counts a bulk import left short are repaired on open."""
    from lessonbank.stores.lexical import LEXICAL_SPACE

    path = tmp_path / "bank.db"
    store = SQLiteStore(path, clock=Clock())
    store.import_lessons([lesson(f"vacuum table {n} weekly", Clock()) for n in range(12)])
    with store.dialect.tx() as conn:
        conn.execute("UPDATE vector_counts SET n = 5 WHERE model = ?", (LEXICAL_SPACE,))
    store.close()
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 6")
    store = SQLiteStore(path, clock=Clock())
    try:
        assert store.vector_changes("default", LEXICAL_SPACE, 0).count == 12
    finally:
        store.close()
