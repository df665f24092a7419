"""The Redis store's token postings (stores/redis/postings.py) on a real Redis: what they hold as
lessons come and go, dead records dropped, a bank of the older layout (a sorted set per token)
rebuilt on open, and bad input."""

from __future__ import annotations

import logging
import struct
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.stores.lexical import FIELD_WEIGHTS, bm25_factors, weighted_terms
from lessonbank.stores.redis import RedisStore
from lessonbank.stores.redis.upgrade import LAYOUT
from tests.contract.conftest import REDIS_URL, drop_redis_prefix, require

NS = "default"


@pytest.fixture
def url() -> Iterator[str]:
    require("redis")
    prefix = f"lbtest{uuid.uuid4().hex[:12]}:"
    yield f"{REDIS_URL}?prefix={prefix}"
    drop_redis_prefix(prefix)


@pytest.fixture
def store(url: str) -> Iterator[RedisStore]:
    opened = RedisStore(url)
    yield opened
    opened.close()


def found(store: RedisStore, *terms: str, **query: object) -> list[str]:
    return [c.lesson_id for c in store.search(LessonQuery(NS, **query), list(terms), 10)]  # type: ignore[arg-type]


def keys(store: RedisStore, kind: str) -> list[str]:
    return sorted(store.r.scan_iter(match=f"{store.db.base}{NS}:{kind}:*", count=1000))


def df(store: RedisStore) -> dict[str, int]:
    return {token: int(count) for token, count in store.r.hgetall(store.k(NS, "df")).items()}


def write(store: RedisStore, content: str, **fields: object) -> Lesson:
    return store.write_lesson(Lesson(content=content, **fields)).lesson  # type: ignore[arg-type]


def test_postings_follow_writes_updates_and_removals(store: RedisStore) -> None:
    kept = write(store, "Pin the parser version before upgrading", tags=["deps"])
    gone = write(store, "Restart the parser worker after a deploy")
    assert keys(store, "tok") == []  # no sorted set per token any more
    assert df(store)["parser"] == 2 and df(store)["pin"] == 1 and df(store)["dep"] == 1
    assert set(found(store, "parser")) == {kept.id, gone.id}
    docno = store.r.hget(store.index.lesson_key(NS, kept.id), "docno")

    # A status change leaves the postings alone; a change of words gives a new document number.
    store.update_lesson(store.get_lesson(kept.id).model_copy(update={"confidence": 0.9}))
    assert store.r.hget(store.index.lesson_key(NS, kept.id), "docno") == docno
    store.update_lesson(store.get_lesson(kept.id).model_copy(update={"content": "Pin the lexer version"}))
    assert store.r.hget(store.index.lesson_key(NS, kept.id), "docno") != docno
    assert store.r.getbit(store.k(NS, "dead"), int(docno)) == 1
    assert found(store, "parser") == [gone.id]
    assert found(store, "lexer") == [kept.id]
    assert "upgrad" not in df(store) and df(store)["lexer"] == 1

    # Removing the last lesson holding a word removes the word's count and posting.
    store.delete_lesson(NS, gone.id)
    assert "parser" not in df(store) and not store.r.exists(store.k(NS, "post", "parser"))
    assert found(store, "restart") == []
    assert store.stats(NS).lessons_by_status == {"active": 1}


def test_dead_records_are_dropped_by_the_reader(store: RedisStore) -> None:
    added, _ = store.import_lessons(
        [Lesson(content=f"Shared word kappa, lesson number {i}") for i in range(300)]
    )
    assert added == 300
    lessons = store.list_lessons(LessonQuery(NS), limit=300)
    for lesson in lessons[:290]:
        store.delete_lesson(NS, lesson.id)
    post = store.k(NS, "post", "kappa")
    assert store.r.strlen(post) == 300 * 12  # removal only marks the records dead
    assert len(store.search(LessonQuery(NS), ["kappa"], 50)) == 10
    assert store.r.strlen(post) == 10 * 12  # the reader rewrote it without them
    assert {c.lesson_id for c in store.search(LessonQuery(NS), ["kappa"], 50)} == {
        x.id for x in lessons[290:]
    }


def test_ranking_and_filters_over_postings(store: RedisStore) -> None:
    one = write(store, "Cache the build cache key per branch", tags=["ci"])
    two = write(store, "Cache results of slow queries", tags=["db"])
    write(store, "Never cache secrets", kind="principle")
    assert found(store, "cache", "branch")[0] == one.id  # both words beat one
    assert found(store, "cache", tags=["db"]) == [two.id]
    assert set(found(store, "cache", kinds=["lesson"])) == {one.id, two.id}
    assert found(store, "nowhere") == [] and store.search(LessonQuery(NS), ["cache"], 0) == []


def test_unusual_tokens_are_keyed_safely(store: RedisStore) -> None:
    lesson = write(store, "Use naïve datetimes? No: 100% aware ones, even in Zürich", tags=["tz:utc"])
    for word in ("naïve", "zürich", "100", "utc"):
        assert found(store, word) == [lesson.id], word
    assert store.r.exists(store.k(NS, "post", "zürich"))  # percent-encoded in the key


def test_a_posting_with_stray_bytes_is_read_up_to_its_last_whole_record(
    store: RedisStore, caplog: pytest.LogCaptureFixture
) -> None:
    lesson = write(store, "Retry the flaky upload once")
    store.r.append(store.k(NS, "post", "upload"), "xyz")
    with caplog.at_level(logging.WARNING, logger="lessonbank.stores"):
        assert found(store, "upload") == [lesson.id]
    assert "stray bytes" in caplog.text
    assert store.r.strlen(store.k(NS, "post", "upload")) == 12  # cut back to whole records
    # The near-duplicate check still works over it.
    again = store.write_lesson(Lesson(content="Retry the flaky upload once."))
    assert again.action == "reinforced" and again.lesson.id == lesson.id


def to_old_layout(store: RedisStore) -> None:
    """Rewrite the bank as lessonbank wrote it before the postings: a sorted set per token scored by
    its BM25 factor, ``terms`` space-separated, no document numbers and no layout marker."""
    r, avg = store.r, store.index.avg_len(NS)
    for name in ("docctr", "docs", "dead", "df"):
        r.delete(store.k(NS, name))
    for key in keys(store, "post"):
        r.delete(key)
    r.delete(store.db.base + ":postings")
    for lesson in store.list_lessons(
        LessonQuery(NS, statuses=("active", "archived"), live_only=False), limit=1000
    ):
        frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
        key = store.index.lesson_key(NS, lesson.id)
        r.hdel(key, "docno")
        r.hset(key, "terms", " ".join(frequencies))
        for term, factor in bm25_factors(frequencies, length, avg).items():
            r.zadd(store.k(NS, "tok", term), {lesson.id: factor})


def test_a_bank_of_the_older_layout_is_rebuilt_on_open(url: str, store: RedisStore) -> None:
    lessons = [
        write(store, text) for text in ("Vacuum the queue table nightly", "Index the queue by due time")
    ]
    archived = write(store, "Drop the queue index", status="archived")
    # (The rebuild takes every factor with today's mean length: the same lessons, maybe reordered.)
    before = {term: set(found(store, term)) for term in ("queue", "vacuum", "index")}
    counts = df(store)
    to_old_layout(store)
    assert keys(store, "tok") and not keys(store, "post")

    reopened = RedisStore(url)
    try:
        assert reopened.r.get(reopened.db.base + ":postings") == LAYOUT
        assert keys(reopened, "tok") == []
        assert df(reopened) == counts
        assert {term: set(found(reopened, term)) for term in before} == before
        # Writes after the upgrade keep the counts right: removal, rewording, the near-duplicate check.
        reopened.delete_lesson(NS, archived.id)
        assert "drop" not in df(reopened)
        result = reopened.write_lesson(Lesson(content="Vacuum the queue table nightly!"))
        assert result.action == "reinforced" and result.lesson.id == lessons[0].id
        assert len(reopened.list_lessons(LessonQuery(NS))) == 2
    finally:
        reopened.close()


def test_a_rebuild_cut_short_starts_again(url: str, store: RedisStore) -> None:
    first = write(store, "Rotate the signing key yearly")
    write(store, "Rotate logs daily")
    to_old_layout(store)
    # A rebuild that stopped half-way: stray postings, a count and document numbers left behind.
    store.r.set(store.k(NS, "docctr"), 5)
    store.r.set(store.k(NS, "post", "rotat"), struct.pack("<Id", 5, 1.0))
    store.r.hset(store.k(NS, "df"), "rotat", 7)
    store.r.hset(store.index.lesson_key(NS, first.id), "docno", 1)
    reopened = RedisStore(url)
    try:
        assert df(reopened)["rotat"] == 2
        assert set(found(reopened, "rotate")) == {x.id for x in reopened.list_lessons(LessonQuery(NS))}
        reopened.delete_lesson(NS, first.id)
        assert df(reopened)["rotat"] == 1
    finally:
        reopened.close()


def test_a_second_process_waits_for_the_rebuild(url: str, store: RedisStore) -> None:
    lesson = write(store, "Warm the cache before the switch")
    to_old_layout(store)
    lock = store.db.base + ":postings-lock"
    store.r.set(lock, "someone-else", px=60_000)
    opened: list[RedisStore] = []
    opener = threading.Thread(target=lambda: opened.append(RedisStore(url)))
    opener.start()
    time.sleep(0.5)
    assert not opened  # waiting for the holder of the lease
    store.r.delete(lock)  # the holder went away without finishing: the waiter takes over
    opener.join(timeout=300)
    try:
        assert opened and found(opened[0], "cache") == [lesson.id]
        assert keys(opened[0], "tok") == []
    finally:
        for other in opened:
            other.close()


def test_a_ranking_sorted_as_far_as_it_is_read_matches_a_full_sort() -> None:
    import numpy as np

    from lessonbank.stores.redis.postings import Ranking

    rng = np.random.default_rng(7)
    docs = rng.permutation(50_000).astype(np.uint32)
    scores = rng.integers(0, 300, len(docs)).astype(np.float64) / 7  # many ties
    full = np.lexsort((-docs.astype(np.int64), -scores))
    ranking = Ranking(docs, scores, None)
    for n in (1, 64, 1024, 5000, 50_000):
        top_docs, top_scores = ranking.top(n)
        assert (
            top_docs.tolist() == docs[full[:n]].tolist() and top_scores.tolist() == scores[full[:n]].tolist()
        )
    assert len(Ranking(docs, scores, 1500)) == 1500 and len(Ranking(docs[:0], scores[:0], None)) == 0
