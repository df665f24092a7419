"""PostgreSQL finds the lessons a model has no vector for by probing each lesson's key, whatever the
planner's statistics say.

``embed_missing`` pages through a namespace while it writes vectors. Statistics taken before the
model had any (autovacuum's, or a bench's ``ANALYZE`` after an import) estimate one row, and as a
``NOT EXISTS`` anti-join the planner then compared every lesson with every vector written so far: at
100k lessons a page took 6 s by the middle and the rate fell to a tenth of its start. The check stays
a per-lesson probe of ``lesson_vectors``' primary key (a subplan), never an anti-join."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

from lessonbank.models import Lesson
from lessonbank.stores import open_store
from lessonbank.stores.sql.postgres import missing_vectors_sql
from tests.contract.conftest import POSTGRES_URL, Clock, drop_postgres_schema, require

MODEL = "test-model"


def _plan_nodes(plan: dict[str, object]) -> list[str]:
    nodes = [f"{plan.get('Node Type')} {plan.get('Join Type', '')}".strip()]
    for child in plan.get("Plans", []) or []:  # type: ignore[union-attr]
        nodes += _plan_nodes(child)
    return nodes


def test_missing_vectors_probe_each_lesson_under_stale_statistics() -> None:
    require("postgres")
    schema = f"lbtest_{uuid.uuid4().hex[:12]}"
    store = open_store(f"{POSTGRES_URL}?schema={schema}", clock=Clock())
    try:
        start = datetime(2026, 1, 1, tzinfo=UTC)
        lessons = [
            Lesson(
                content=f"lesson {n}: check the cache key {n} before reading",
                created_at=start + timedelta(seconds=n),
            )
            for n in range(3000)
        ]
        assert store.import_lessons(lessons) == (3000, 0)
        dialect = store.dialect  # type: ignore[attr-defined]
        with dialect.read() as conn:
            conn.execute("ANALYZE lessons")
            conn.execute("ANALYZE lesson_vectors")  # the model has no vector yet: estimated 1 row
        store.put_vectors("default", MODEL, [(x.id, "h", b"\x00" * 8) for x in lessons[:1500]])

        middle = store.lessons_missing_vectors("default", MODEL, 10, after=lessons[1499].id)
        assert [x.id for x in middle] == [x.id for x in lessons[1500:1510]]
        with dialect.read() as conn:
            cursor = conn.execute(
                "SELECT created_at, seq FROM lessons WHERE id = ?", (lessons[1499].id,)
            ).fetchone()
            sql = missing_vectors_sql("AND (created_at, seq) > (?, ?) ")
            [(plan,)] = conn.execute(
                "EXPLAIN (FORMAT JSON) " + sql, ("default", *cursor, MODEL, 1000)
            ).fetchall()
        plan = plan if isinstance(plan, list) else json.loads(plan)
        nodes = _plan_nodes(plan[0]["Plan"])
        assert not [node for node in nodes if node.endswith("Anti")], nodes
        assert any("Index" in node for node in nodes), nodes
    finally:
        store.close()
        drop_postgres_schema(schema)
