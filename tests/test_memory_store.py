"""What only the in-memory store has: its URLs, shared named databases, copies in and out, steps that
fail whole, and BM25 relevance equal to SQLite's. The contract suite (tests/contract) runs on it too."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lessonbank.errors import ConfigError, StoreError
from lessonbank.models import Job, Lesson, Reflection
from lessonbank.ports import LessonQuery
from lessonbank.stores import Store, open_store
from lessonbank.stores.memory import MemoryStore, drop_database

NOW = 1_800_000_000.0
OWNER = "host-x@1:w"


def clock() -> float:
    return NOW


def lesson(content: str, **fields: object) -> Lesson:
    fields.setdefault("created_at", datetime.fromtimestamp(NOW, UTC))
    return Lesson(content=content, **fields)  # type: ignore[arg-type]


def test_urls_private_and_named_databases() -> None:
    first, second = open_store("memory://", clock=clock), open_store("memory://", clock=clock)
    assert isinstance(first, MemoryStore) and first.notifier is None and MemoryStore.__test__ is False
    first.write_lesson(lesson("private to the first store"))
    assert second.list_lessons(LessonQuery("default")) == []

    name = "test-memory-named"
    writer = open_store(f"memory://{name}", clock=clock)
    made = writer.write_lesson(lesson("shared by name")).lesson
    writer.close()
    with pytest.raises(StoreError, match="closed"):
        writer.get_lesson(made.id)
    reader = open_store(f"memory://{name}", clock=clock)  # outlives the stores that closed
    assert reader.get_lesson(made.id) == made
    drop_database(name)
    assert open_store(f"memory://{name}", clock=clock).list_lessons(LessonQuery("default")) == []
    assert reader.get_lesson(made.id) == made  # an open store keeps what it had
    drop_database(name)
    for bad in ("memory://a/b", "memory://x?y=1"):
        with pytest.raises(ConfigError, match="memory://<name>"):
            open_store(bad)


def test_records_are_copied_in_and_out() -> None:
    store: Store = MemoryStore(clock=clock)
    given = lesson("copy me", tags=["a"], metadata={"steps": ["one"]})
    made = store.write_lesson(given).lesson
    given.tags.append("b")
    given.metadata["steps"].append("two")
    made.tags.append("c")
    got = store.get_lesson(made.id)
    assert got.tags == ["a"] and got.metadata == {"steps": ["one"]}
    got.metadata["steps"].clear()
    assert store.get_lesson(made.id).metadata == {"steps": ["one"]}


def test_a_step_that_cannot_complete_changes_nothing() -> None:
    store = MemoryStore(clock=clock)
    taken = store.write_lesson(lesson("already stored text")).lesson
    with pytest.raises(StoreError, match="already taken"):
        store.write_lesson(lesson("other text, same id", id=taken.id))
    job = Job(dedupe_key="k", episode_id="ep_1", run_after=datetime.fromtimestamp(NOW, UTC))
    store.enqueue_job(job)
    with pytest.raises(StoreError, match="dedupe key"):
        store.enqueue_job(Job(dedupe_key="k", episode_id="ep_2"))
    assert store.lease_job(OWNER, None, 60) is not None
    reflection = Reflection(episode_id="ep_1", reflector="lesson", status="ok")
    fresh, clash = lesson("a fresh lesson"), lesson("different text again", id=taken.id)
    with pytest.raises(StoreError, match="already taken"):
        store.finish_job(job.id, OWNER, reflection=reflection, lessons=[fresh, clash], detail="ok")
    assert store.get_job(job.id).status == "leased"
    assert store.reflections_for_episode("ep_1") == []
    assert [x.id for x in store.list_lessons(LessonQuery("default"))] == [taken.id]
    # The same id for the same content is a repeat, not a clash: it reinforces.
    again = store.finish_job(
        job.id,
        OWNER,
        reflection=reflection,
        lessons=[fresh, lesson("already stored text", id=taken.id)],
        detail="ok",
    )
    assert [r.action for r in again] == ["added", "reinforced"]
    assert store.get_reflection(reflection.id).lesson_ids == [fresh.id, taken.id]


def test_concurrent_writers_of_one_lesson_keep_one_copy() -> None:
    store = MemoryStore(clock=clock)

    def write() -> None:
        for _ in range(25):
            store.write_lesson(lesson("Pin the helm chart version"))

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (only,) = store.list_lessons(LessonQuery("default"))
    assert only.access_count == 99


def test_relevance_equals_sqlite_bm25(tmp_path: Path) -> None:
    """Same lessons in SQLite (FTS5's bm25 with column weights) and in memory: same hits, same order,
    same relevance, ties included."""
    texts = [
        ("zeppelin deploys need a manual approval gate", ["ops"], None),
        ("deploys of the billing service run on fridays", ["ops", "deploy"], None),
        ("Pin pydantic before upgrading the web framework", [], "Migrate invoicing to FastAPI"),
        ("Invoicing totals are rounded per line", [], None),
        ("deploys deploys deploys, again and again", ["deploy"], None),
        ("when editing large Go files use Edit, not full rewrite", ["go"], None),
        ("retry the flaky upload step with backoff", [], "deploy the uploader"),
    ]
    stores = [open_store(f"sqlite:///{tmp_path / 'bank.db'}", clock=clock), MemoryStore(clock=clock)]
    try:
        for store in stores:
            for n, (text, tags, learned_from) in enumerate(texts):
                store.write_lesson(lesson(text, id=f"les_{n}", tags=tags, learned_from=learned_from))
        for terms in (
            ["deploys"],
            ["zeppelin", "deploys"],
            ["invoicing"],
            ["ops", "files"],
            ["deploy", "gate"],
        ):
            sqlite_hits, memory_hits = (store.search(LessonQuery("default"), terms, 10) for store in stores)
            assert [c.lesson_id for c in memory_hits] == [c.lesson_id for c in sqlite_hits], terms
            for ours, theirs in zip(memory_hits, sqlite_hits, strict=True):
                assert ours.relevance == pytest.approx(theirs.relevance, rel=1e-9), terms
    finally:
        for store in stores:
            store.close()
