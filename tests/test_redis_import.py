"""What a Redis bulk write leaves behind, on a real Redis: the batch script's folded commands change
nothing, an import's postings hold each lesson's BM25 factors, vectors written in one call get
their sequence numbers in row order, and empty fields are left out of a lesson hash."""

from __future__ import annotations

import json
import struct
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.stores.lexical import FIELD_WEIGHTS, LEXICAL_SPACE, bm25_factors, weighted_terms
from lessonbank.stores.redis import RedisStore
from lessonbank.stores.redis.db import Batch, key_part
from tests.contract.conftest import REDIS_URL, drop_redis_prefix, require

NS = "default"


@pytest.fixture
def prefixes() -> Iterator[list[str]]:
    require("redis")
    made: list[str] = []
    yield made
    for prefix in made:
        drop_redis_prefix(prefix)


def open_store(prefixes: list[str]) -> RedisStore:
    prefix = f"lbtest{uuid.uuid4().hex[:12]}:"
    prefixes.append(prefix)
    return RedisStore(f"{REDIS_URL}?prefix={prefix}")


def dump(store: RedisStore) -> dict[str, Any]:
    """Every key of the store's bank (its prefix cut off) and what it holds."""
    r, base = store.db.raw, store.db.base.encode()
    out: dict[str, Any] = {}
    for key in r.scan_iter(match=base + b"*", count=1000):
        kind = r.type(key)
        if kind == b"hash":
            value: Any = r.hgetall(key)
        elif kind == b"set":
            value = r.smembers(key)
        elif kind == b"zset":
            value = r.zrange(key, 0, -1, withscores=True)
        else:
            value = r.get(key)
        out[key[len(base) :].decode()] = value
    return out


def commands(store: RedisStore) -> list[tuple[str, ...]]:
    lesson, base = store.index.lesson_key(NS, "L1"), store.index.postings.base(NS)
    tags, zset = store.k(NS, "tag", "x"), store.k(NS, "lessons")
    return [
        ("SADD", tags, "a"),
        ("SADD", tags, "b"),
        ("ZADD", zset, "1", "a"),
        ("SREM", tags, "a"),
        ("ZADD", zset, "2", "b"),
        ("ZADD", zset, "3", "a"),  # a's score is the last one given
        ("SADD", tags, "a"),  # after the SREM: not folded into the first SADD
        ("HSET", lesson, "data", "{}", "kind", "lesson"),
        ("INDEX", lesson, base, "L1", "1.5=pin parser;0.75=version;", ""),
        ("HSET", lesson, "kind", "insight"),  # after INDEX (which wrote docno): its own command
        ("INDEX", lesson, base, "L1", "1.5=pin;", ""),  # reindexed: the first document retired
        ("HDEL", lesson, "kind"),
        ("HDEL", lesson, "data"),
    ]


def test_folded_batch_commands_leave_what_one_by_one_commands_do(prefixes: list[str]) -> None:
    folded_store, plain_store = open_store(prefixes), open_store(prefixes)
    try:
        batch = Batch()
        for command in commands(folded_store):
            batch.add(*command)
        assert len(batch.commands) == 9  # the two ZADDs after the first, one SADD and one HDEL folded
        folded_store.index.batch_script(args=[json.dumps(batch.commands)])
        plain = [list(command) for command in commands(plain_store)]
        plain_store.index.batch_script(args=[json.dumps(plain)])
        after = dump(folded_store)
        assert after == dump(plain_store)
        assert after[f"{NS}:tag:x"] == {b"a", b"b"}
        assert after[f"{NS}:lessons"] == [(b"b", 2.0), (b"a", 3.0)]
        assert after[f"{NS}:lesson:L1"] == {b"docno": b"2", b"terms": b"pin"}
        assert after[f"{NS}:docs"] == {b"2": b"L1"}
        assert after[f"{NS}:df"] == {b"pin": b"1"}
        assert after[f"{NS}:post:pin"] == struct.pack("<Id", 1, 1.5) + struct.pack("<Id", 2, 1.5)
        assert after[f"{NS}:post:parser"] == struct.pack("<Id", 1, 1.5)  # document 1 is dead
    finally:
        folded_store.close()
        plain_store.close()


def test_an_import_writes_each_lessons_factors_and_counts(prefixes: list[str]) -> None:
    store = open_store(prefixes)
    try:
        lessons = [
            Lesson(content="Pin the parser version; pin it twice", tags=["deps"]),
            Lesson(content="Le café naïve parser, déjà vu", tags=["i18n", "c++"]),
            Lesson(content="Retry the flaky test once", learned_from="CI run 7: flaky"),
        ]
        assert store.import_lessons(lessons) == (3, 0)
        by_doc = {int(doc): lesson_id for doc, lesson_id in store.r.hgetall(store.k(NS, "docs")).items()}
        assert len(by_doc) == 3
        expected: dict[str, list[tuple[str, float]]] = {}
        for lesson in lessons:
            frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
            # The first chunk of an empty bank is scored with no mean length yet (each its own).
            for term, factor in bm25_factors(frequencies, length, 0.0).items():
                expected.setdefault(key_part(term), []).append((lesson.id, factor))
            row = store.r.hmget(store.index.lesson_key(NS, lesson.id), ["terms", "docno"])
            assert set(row[0].split("\x1f")) == {key_part(t) for t in frequencies}
            assert by_doc[int(row[1])] == lesson.id
        assert "caf\u00e9" in expected and "c" in expected
        stored: dict[str, list[tuple[str, float]]] = {}
        for term in expected:
            blob = store.db.raw.get(store.index.postings.post_key(NS, term)) or b""
            stored[term] = [(by_doc[doc], w) for doc, w in struct.iter_unpack("<Id", blob)]
        assert {t: sorted(v) for t, v in stored.items()} == {t: sorted(v) for t, v in expected.items()}
        df = {term: int(n) for term, n in store.r.hgetall(store.k(NS, "df")).items()}
        assert df == {term: len(holders) for term, holders in expected.items()}
    finally:
        store.close()


def test_vectors_written_in_one_call_are_numbered_in_row_order(prefixes: list[str]) -> None:
    store = open_store(prefixes)
    try:
        written = [Lesson(content=f"Lesson number {n} about caching") for n in range(620)]
        store.import_lessons(written)
        ids = [lesson.id for lesson in written]
        rows = [(lesson_id, f"h{n}", struct.pack("<f", n)) for n, lesson_id in enumerate(ids)]
        rows.insert(3, ("gone", "hx", b"\0\0\0\0"))  # no such lesson: skipped, takes no number
        rows.append((ids[0], "again", b"\1\1\1\1"))  # written twice in the call: the last one stays
        pipe = store.r.pipeline(transaction=False)
        store.index.q_put_vectors(pipe, NS, "m", rows)
        assert pipe.execute() == [621]
        seq = store.r.zrange(store.index.vec_key(NS, "vecseq", "m"), 0, -1, withscores=True)
        assert [member for member, _ in seq] == ids[1:] + ids[:1]
        assert [score for _, score in seq] == [float(n) for n in range(2, 622)]
        assert store.r.get(store.index.vec_key(NS, "vecctr", "m")) == "621"
        assert store.r.hget(store.index.vec_key(NS, "vechash", "m"), ids[0]) == "again"
        assert store.r.hget(store.index.vec_key(NS, "vechash", "m"), ids[619]) == "h619"
        assert store.db.raw.hget(store.index.vec_key(NS, "vec", "m"), ids[5]) == struct.pack("<f", 5)
        assert store.r.hlen(store.index.vec_key(NS, "vec", "m")) == 620
        assert "m" in store.r.smembers(store.index.vec_models_key(NS))
    finally:
        store.close()


def test_empty_fields_are_left_out_and_an_emptied_one_removed(prefixes: list[str]) -> None:
    store = open_store(prefixes)
    try:
        expires = datetime.fromtimestamp(time.time() + 3600, UTC)
        lesson = store.write_lesson(
            Lesson(
                content="Pin the parser version", agent="ci", pinned=True, expires_at=expires, tags=["deps"]
            )
        ).lesson
        key = store.index.lesson_key(NS, lesson.id)
        optional = {
            "task_type",
            "agent",
            "goal_id",
            "tags",
            "superseded",
            "expires_at",
            "pinned",
            "last_accessed",
        }
        assert set(store.r.hkeys(key)) & optional == {"agent", "tags", "expires_at", "pinned"}
        assert [x.id for x in store.list_lessons(LessonQuery(NS, agent="ci"))] == [lesson.id]

        store.update_lesson(
            lesson.model_copy(update={"agent": None, "pinned": False, "expires_at": None, "tags": []})
        )
        assert set(store.r.hkeys(key)) & optional == set()
        assert store.list_lessons(LessonQuery(NS, agent="ci")) == []
        [read] = store.get_lessons([lesson.id])
        assert (read.agent, read.pinned, read.expires_at, read.tags) == (None, False, None, [])
        [row] = store.index.rows(NS, [lesson.id])
        assert row is not None and {name: row[name] for name in optional} == dict.fromkeys(optional, "")
        [candidate] = store.candidates(LessonQuery(NS), [lesson.id])
        assert not candidate.pinned
        # A hash written when empty fields were stored reads the same.
        store.r.hset(key, mapping=dict.fromkeys(optional, ""))
        assert store.index.rows(NS, [lesson.id]) == [row]
        # The lexical term vectors have no text hash: none is kept for them.
        assert store.r.exists(store.index.vec_key(NS, "vec", LEXICAL_SPACE))
        assert not store.r.exists(store.index.vec_key(NS, "vechash", LEXICAL_SPACE))
    finally:
        store.close()


def test_the_stored_json_leaves_out_none_and_reads_back_the_same(prefixes: list[str]) -> None:
    # Leaving None out is only exact while every field that may be None defaults to None.
    for name, field in Lesson.model_fields.items():
        if field.is_required() or field.default_factory is not None:
            continue
        admits_none = "None" in str(field.annotation)
        assert not admits_none or field.default is None, f"Lesson.{name} may be None but defaults otherwise"
    store = open_store(prefixes)
    try:
        lesson = Lesson(content="Rotate the signing key yearly", metadata={"note": None}, situation="audits")
        [written] = [r.lesson for r in store.write_lessons([lesson])]
        data = json.loads(store.r.hget(store.index.lesson_key(NS, written.id), "data"))
        assert "mistake" not in data and "agent" not in data and data["situation"] == "audits"
        assert data["metadata"] == {"note": None}
        assert store.get_lessons([written.id]) == [written]
    finally:
        store.close()
