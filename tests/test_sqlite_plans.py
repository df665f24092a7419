"""SQLite answers a pool's listing (an agent's rules, a goal's insights) from an index that holds both
its kind and its order, instead of walking the whole namespace by date (plans, not timings)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lessonbank import LessonBank
from lessonbank.ports import LessonQuery
from lessonbank.stores.sql.dialect import SORTS, lesson_filter


def test_listing_one_kind_uses_the_kind_and_date_index(tmp_path: Path) -> None:
    path = tmp_path / "plans.db"
    with LessonBank(f"sqlite:///{path}") as bank:
        bank.add_lesson("always run the ops checklist before a deploy", kind="principle", agent="ops")
        dialect = bank.store.dialect  # type: ignore[attr-defined]
        for query in (
            LessonQuery("default", kinds=["principle"]),
            LessonQuery("default", kinds=["principle"], agent="ops"),
            LessonQuery("default", kinds=["insight"], goal_id="g1"),
        ):
            where, params = lesson_filter(dialect, query, 0.0)
            sql = f"SELECT l.id FROM lessons l WHERE {where} ORDER BY {SORTS['created']} LIMIT ? OFFSET ?"
            with sqlite3.connect(path) as conn:
                plan = " ".join(
                    row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", (*params, 100, 0))
                )
            assert "lessons_ns_kind_created" in plan, (query, plan)
            assert "TEMP B-TREE" not in plan, plan
