"""Opening a Redis bank written before the postings layout (a sorted set per token): rebuilt once.

``B:postings`` holds the layout's version. When a store opens a database without it, one process
(the holder of ``B:postings-lock``, a lease it renews while it works) rebuilds every namespace's
postings from its lessons and then drops the old ``B{ns}:tok:{token}`` sets; other processes opening
meanwhile wait for the version to appear (or for the lease to lapse, then take it over). A rebuild
cut short is started again from scratch by the next open: it first removes what it had written.
A database without lessons is only marked. Processes of an older lessonbank must be stopped
before a newer one opens the bank (they would keep writing sorted sets).
"""

from __future__ import annotations

import logging
import time
import uuid
from functools import partial
from typing import Any

from lessonbank.stores.lexical import FIELD_WEIGHTS, weighted_terms
from lessonbank.stores.redis.db import Batch, RedisDatabase
from lessonbank.stores.redis.index import LESSON_FIELDS, RedisLessonIndex, factors_field, lesson_of

log = logging.getLogger("lessonbank.stores")

LAYOUT = "2"  # 1 (no key): a sorted set per token; 2: postings.py
LEASE_MS = 30_000
PAGE = 500
WAIT_S = 0.2
SCAN_COUNT = 10_000  # SCAN walks the whole database for a pattern: a large bank is millions of keys
_GLOB = str.maketrans({c: "\\" + c for c in "\\*?[]"})


def ensure_postings(db: RedisDatabase, index: RedisLessonIndex) -> None:
    """Make sure the database holds the current postings layout (see the module docstring)."""
    marker, lock = db.base + ":postings", db.base + ":postings-lock"
    if db.run(lambda: db.r.get(marker)) == LAYOUT:
        return
    token = uuid.uuid4().hex
    while True:
        if db.run(lambda: db.r.set(lock, token, nx=True, px=LEASE_MS)):
            try:
                namespaces = db.run(db.all_namespaces)
                for namespace in namespaces:
                    rebuilt = _rebuild(db, index, namespace, lambda: db.r.pexpire(lock, LEASE_MS))
                    log.info("Redis namespace %r: token postings rebuilt for %d lessons", namespace, rebuilt)
                db.run(lambda: db.r.set(marker, LAYOUT))
            finally:
                db.run(lambda: _release(db, lock, token))
            return
        time.sleep(WAIT_S)
        if db.run(lambda: db.r.get(marker)) == LAYOUT:
            return


def _release(db: RedisDatabase, lock: str, token: str) -> None:
    db.r.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end", 1, lock, token)


def _rebuild(db: RedisDatabase, index: RedisLessonIndex, namespace: str, renew: Any) -> int:
    """Write the postings of every lesson of ``namespace`` afresh, then drop its old token sets."""
    base = index.postings.base(namespace)
    # What a rebuild cut short wrote goes first (every posting it wrote counted a document number).
    if db.run(lambda: db.r.exists(base + "docctr")):
        _unlink_matching(db, base, "post:*")
    db.run(lambda: db.r.unlink(*(base + name for name in ("docctr", "docs", "dead", "df"))))
    avg = index.avg_len(namespace)
    ids: list[str] = db.run(lambda: db.r.zrange(db.k(namespace, "lessons"), 0, -1))
    done = 0
    for start in range(0, len(ids), PAGE):
        done += db.run(partial(_index_page, db, index, namespace, ids[start : start + PAGE], avg))
        db.run(renew)
    _unlink_matching(db, base, "tok:*")
    return done


def _index_page(
    db: RedisDatabase, index: RedisLessonIndex, namespace: str, ids: list[str], avg: float
) -> int:
    pipe = db.r.pipeline(transaction=False)
    for lesson_id in ids:
        pipe.hmget(index.lesson_key(namespace, lesson_id), LESSON_FIELDS)
    batch = Batch()
    for row in pipe.execute():
        lesson = lesson_of(row)
        if lesson is None:
            continue
        frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
        key = index.lesson_key(namespace, lesson.id)
        # "1": the lesson's document number, if a rebuild cut short gave it one, names nothing now.
        batch.add(
            "INDEX",
            key,
            index.postings.base(namespace),
            lesson.id,
            factors_field(frequencies, length, avg),
            "1",
        )
    pipe = db.r.pipeline(transaction=True)
    batch.queue(pipe, index.batch_script)
    pipe.execute()
    return len(batch.commands)


def _unlink_matching(db: RedisDatabase, base: str, pattern: str) -> None:
    def run() -> None:
        keys = []
        for key in db.r.scan_iter(match=base.translate(_GLOB) + pattern, count=SCAN_COUNT):
            keys.append(key)
            if len(keys) >= 1000:
                db.r.unlink(*keys)
                keys = []
        if keys:
            db.r.unlink(*keys)

    db.run(run)
