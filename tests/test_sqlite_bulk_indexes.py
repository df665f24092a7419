"""An import into an empty SQLite bank builds lessons' read-only indexes once, at the end: they are
gone while it runs, back as the migrations made them when it ends (or fails, or the process dies and
the bank is opened again), and kept throughout an import into a bank that holds lessons."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lessonbank import LessonBank
from lessonbank.stores.sql.sqlite_bulk import DEFERRED


def _indexes(path: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'lessons' ORDER BY name"
        ).fetchall()
    conn.close()
    return rows


def _records(count: int, seen: list[list[str]], path: Path, *, fail_at: int | None = None) -> Iterator[Any]:
    for number in range(count):
        if number == count // 2:  # mid-import, between batches of the service
            seen.append([name for name, _sql in _indexes(path)])
        if number == fail_at:
            raise RuntimeError("the source broke")
        yield {"content": f"lesson number {number} about deploying service {number % 7}", "tags": ["ops"]}


def _fresh(tmp_path: Path, name: str) -> list[tuple[str, str | None]]:
    path = tmp_path / name
    with LessonBank(f"sqlite:///{path}", worker=False):
        pass
    return _indexes(path)


def test_an_import_into_an_empty_bank_builds_the_indexes_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    seen: list[list[str]] = []
    with LessonBank(f"sqlite:///{path}", worker=False) as bank:
        counts = bank.import_lessons(_records(2_500, seen, path))
        assert counts["added"] == 2_500
        assert len(bank.lessons(limit=5)) == 5
    assert not set(DEFERRED) & set(seen[0])
    assert _indexes(path) == _fresh(tmp_path, "fresh.db")


def test_an_import_into_a_bank_with_lessons_keeps_the_indexes(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    seen: list[list[str]] = []
    with LessonBank(f"sqlite:///{path}", worker=False) as bank:
        bank.add_lesson("a lesson already there")
        bank.import_lessons(_records(2_500, seen, path))
    assert set(DEFERRED) <= set(seen[0])
    assert _indexes(path) == _fresh(tmp_path, "fresh.db")


def test_a_failed_import_keeps_its_batches_and_builds_the_indexes(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    seen: list[list[str]] = []
    with LessonBank(f"sqlite:///{path}", worker=False) as bank:
        with pytest.raises(RuntimeError, match="the source broke"):
            bank.import_lessons(_records(2_500, seen, path, fail_at=2_200))
        assert bank.stats()["lessons"] == {"lesson": 2_000}
    assert _indexes(path) == _fresh(tmp_path, "fresh.db")


def test_indexes_an_import_left_dropped_are_built_when_the_bank_opens(tmp_path: Path) -> None:
    path = tmp_path / "bank.db"
    with LessonBank(f"sqlite:///{path}", worker=False) as bank:
        bank.add_lesson("a lesson already there")
    with sqlite3.connect(path) as conn:  # as a process that died mid-import leaves the file
        for name in DEFERRED:
            conn.execute(f"DROP INDEX {name}")
    conn.close()
    assert not set(DEFERRED) & {name for name, _sql in _indexes(path)}
    with LessonBank(f"sqlite:///{path}", worker=False) as bank:
        assert [lesson.content for lesson in bank.lessons()] == ["a lesson already there"]
    assert _indexes(path) == _fresh(tmp_path, "fresh.db")
