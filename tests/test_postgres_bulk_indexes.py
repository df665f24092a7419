"""An import into an empty PostgreSQL bank builds the read-only indexes of lessons and vectors once, at
the end: gone while it runs (reads still right), back as the migrations made them when it ends, fails
(in the records or in the store) or the process dies and the bank is opened again; kept throughout an
import into a bank that holds lessons."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lessonbank import LessonBank
from lessonbank.ports import LessonQuery
from lessonbank.services.import_pipeline import AHEAD
from lessonbank.services.transfer import IMPORT_BATCH
from lessonbank.stores.sql import postgres_bulk
from lessonbank.stores.sql.postgres_bulk import DEFERRED
from tests.contract.conftest import POSTGRES_URL, drop_postgres_schema, require


@pytest.fixture
def schema() -> Iterator[str]:
    require("postgres")
    name = f"lbtest_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        drop_postgres_schema(name)


def _indexes(schema: str) -> list[tuple[str, str]]:
    """Every index of the schema as ``pg_indexes`` defines it (the schema's name left out)."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY indexname", (schema,)
        ).fetchall()
    return [(name, definition.replace(f"{schema}.", "")) for name, definition in rows]


def _bank(schema: str, tmp_path: Path) -> LessonBank:
    return LessonBank(f"{POSTGRES_URL}?schema={schema}", worker=False)


def _found(bank: Any) -> list[str]:
    """The contents PostgreSQL's lexical search (its terms' GIN index, when there is one) ranks first."""
    hits = bank.store.search(LessonQuery("default"), ["503", "deploying"], 3)
    return [lesson.content for lesson in bank.store.get_lessons([hit.lesson_id for hit in hits])]


# Mid-import, between batches of the service: the records are read a few batches ahead of the
# writes, so the first batch is written when the one after those is read.
PROBE_AT = (AHEAD + 1) * IMPORT_BATCH - IMPORT_BATCH // 2


def _records(count: int, during: list[Any], *, fail_at: int | None = None, bank: Any = None) -> Iterator[Any]:
    for number in range(count):
        if number == PROBE_AT and bank is not None:
            during.append(
                (
                    [name for name, _ in _indexes(bank.store.dialect.schema)],
                    _found(bank),
                    bank.stats()["lessons"],
                )
            )
        if number == fail_at:
            raise RuntimeError("the source broke")
        yield {"content": f"lesson number {number} about deploying service {number % 7}", "tags": ["ops"]}


def _fresh(tmp_path: Path) -> list[tuple[str, str]]:
    name = f"lbtest_{uuid.uuid4().hex[:12]}"
    try:
        with _bank(name, tmp_path):
            pass
        return _indexes(name)
    finally:
        drop_postgres_schema(name)


def test_an_import_into_an_empty_bank_builds_the_indexes_at_the_end(schema: str, tmp_path: Path) -> None:
    during: list[Any] = []
    with _bank(schema, tmp_path) as bank:
        counts = bank.import_lessons(_records(PROBE_AT + 1_000, during, bank=bank))
        assert counts["added"] == PROBE_AT + 1_000
        found = _found(bank)
    names, found_during, stats_during = during[0]
    assert not set(DEFERRED) & set(names)
    # Reads meanwhile: the batch written are there, found without the indexes as with them.
    assert stats_during == {"lesson": 1_000}
    assert found_during[0] == found[0] == "lesson number 503 about deploying service 6"
    assert _indexes(schema) == _fresh(tmp_path)


def test_an_import_into_a_bank_with_lessons_keeps_the_indexes(schema: str, tmp_path: Path) -> None:
    during: list[Any] = []
    with _bank(schema, tmp_path) as bank:
        bank.add_lesson("a lesson already there")
        bank.import_lessons(_records(PROBE_AT + 1, during, bank=bank))
    assert set(DEFERRED) <= set(during[0][0])
    assert _indexes(schema) == _fresh(tmp_path)


def test_a_failed_import_keeps_its_batches_and_builds_the_indexes(schema: str, tmp_path: Path) -> None:
    with _bank(schema, tmp_path) as bank:
        with pytest.raises(RuntimeError, match="the source broke"):
            bank.import_lessons(_records(2_500, [], fail_at=2_200))
        assert bank.stats()["lessons"] == {"lesson": 2_000}
    assert _indexes(schema) == _fresh(tmp_path)


def test_a_store_failure_mid_import_rolls_its_batch_back_and_builds_the_indexes(
    schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _bank(schema, tmp_path) as bank:
        dialect = bank.store.dialect
        real, calls = dialect.importer.chunk, [0]

        def failing(conn: Any, chunk: Any, reinforced: Any) -> tuple[int, int]:
            calls[0] += 1
            if calls[0] == 2:
                real(conn, chunk[:10], reinforced)  # half written: its transaction must undo it
                raise RuntimeError("the server went away")
            return real(conn, chunk, reinforced)

        monkeypatch.setattr(dialect.importer, "chunk", failing)
        with pytest.raises(RuntimeError, match="the server went away"):
            bank.import_lessons(_records(2_500, []))
        monkeypatch.undo()
        assert bank.stats()["lessons"] == {"lesson": 1_000}
        assert bank.store.vector_changes("default", "lexical:terms-v1", 0).count == 1_000
        # The bank takes the rest as usual, the indexes in place.
        assert bank.import_lessons(_records(2_500, []))["added"] == 1_500
    assert _indexes(schema) == _fresh(tmp_path)


def test_indexes_an_import_left_dropped_are_built_when_the_bank_opens(schema: str, tmp_path: Path) -> None:
    with _bank(schema, tmp_path) as bank:
        bank.add_lesson("a lesson already there")
    with psycopg.connect(
        POSTGRES_URL, autocommit=True
    ) as conn:  # as a process that died mid-import leaves it
        for name in DEFERRED:
            conn.execute(f'DROP INDEX "{schema}".{name}')
    assert not set(DEFERRED) & {name for name, _ in _indexes(schema)}
    with _bank(schema, tmp_path) as bank:
        assert [lesson.content for lesson in bank.lessons()] == ["a lesson already there"]
    assert _indexes(schema) == _fresh(tmp_path)


def test_builders_racing_build_each_index_once(schema: str, tmp_path: Path) -> None:
    """Three rebuilds at once (as imports ending together in several processes): each index is built
    by one of them, the others find it there, and none fails on a name another just took."""
    with _bank(schema, tmp_path) as bank:
        bank.add_lesson("a lesson to index")
        dialect = bank.store.dialect
        with dialect.tx() as conn:
            for name in DEFERRED:
                conn.execute(f"DROP INDEX IF EXISTS {name}")
        with ThreadPoolExecutor(3) as pool:
            for built in [pool.submit(postgres_bulk.rebuild, dialect.tx) for _ in range(3)]:
                built.result()
        with dialect.tx() as conn:
            assert postgres_bulk.missing(conn) == []
    assert _indexes(schema) == _fresh(tmp_path)
