"""The lexical index's snapshot, beside a SQLite bank or in the cache folder of a PostgreSQL or Redis
bank: a new process starts from it and answers exactly as a full load would; a snapshot it cannot
trust costs a full load, never an answer."""

from __future__ import annotations

import logging
import os
import random
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lessonbank.ports import LessonQuery, Store
from lessonbank.retrieval import lexical_index, snapshot
from lessonbank.retrieval.lexical_index import LexicalIndex
from lessonbank.stores import open_store
from lessonbank.stores.lexical import LEXICAL_SPACE
from lessonbank.stores.memory import MemoryStore
from lessonbank.stores.sqlite import SQLiteStore
from tests.contract.conftest import Clock, require, store_url  # noqa: F401
from tests.test_lexical_index import NS, random_lesson, vocabulary, zipf_words


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical_index, "SNAPSHOT_MIN", 50)
    monkeypatch.setattr(lexical_index, "SNAPSHOT_REFRESH", 40)


@pytest.fixture
def bank_file(tmp_path: Path) -> Path:
    return tmp_path / "bank.db"


@pytest.fixture
def store(bank_file: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(bank_file, clock=Clock())
    yield store
    store.close()


def fill(store: SQLiteStore, seed: int = 3, lessons: int = 300) -> tuple[random.Random, list[str]]:
    rng, clock = random.Random(seed), Clock()
    vocab = vocabulary(rng, 300)
    store.import_lessons([random_lesson(rng, vocab, clock) for _ in range(lessons)])
    return rng, vocab


def churn(store: SQLiteStore, rng: random.Random, vocab: list[str], steps: int) -> None:
    """Adds, reinforcements (the same text again, with new tags), rewrites and deletes."""
    clock = Clock()
    query = LessonQuery(NS, statuses=("active", "archived", "quarantined"), live_only=False)
    for _ in range(steps):
        ids = sorted(item.id for item in store.list_lessons(query, limit=100_000))
        action = rng.random()
        if action < 0.4:
            store.write_lesson(random_lesson(rng, vocab, clock))
        elif action < 0.6:
            old = store.get_lessons([rng.choice(ids)])[0]
            again = random_lesson(rng, vocab, clock, tags=[*old.tags, rng.choice(vocab)])
            store.write_lesson(again.model_copy(update={"content": old.content, "kind": old.kind}))
        elif action < 0.8:
            old = store.get_lessons([rng.choice(ids)])[0]
            store.update_lesson(
                old.model_copy(update={"content": " ".join(zipf_words(rng, vocab, rng.randint(1, 20)))})
            )
        else:
            assert store.delete_lesson(NS, rng.choice(ids))


def answers(index: LexicalIndex, store: SQLiteStore, rng: random.Random, vocab: list[str]) -> list[object]:
    """Ids and exact scores of a spread of queries, unscoped and scoped to a tag."""
    out: list[object] = []
    for size in (1, 2, 5, 12, 30, 64):
        for _ in range(4):
            terms = rng.sample(vocab, size)
            for query in (LessonQuery(NS), LessonQuery(NS, tags=[rng.choice(vocab)])):
                found = index.search(terms, 25, lambda ids, q=query: store.candidates(q, ids), scope=query)
                out.append([(c.lesson_id, c.relevance) for c in found])
    return out


def full_loads(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``after`` of every term-vector read of ``store`` (0: every row)."""
    reads: list[int] = []
    real = store.vector_changes

    def recorded(namespace: str, model: str, after: int):  # type: ignore[no-untyped-def]
        if model == LEXICAL_SPACE:
            reads.append(after)
        return real(namespace, model, after)

    monkeypatch.setattr(store, "vector_changes", recorded)
    return reads


def without_snapshot(store: SQLiteStore) -> LexicalIndex:
    index = LexicalIndex(store, NS)
    index._snapshot = None
    return index


def snapshot_files(bank_file: Path) -> list[Path]:
    folder = Path(f"{bank_file}.lexicon")
    return sorted(folder.glob("*.snap")) if folder.exists() else []


def test_a_full_load_leaves_a_private_snapshot_that_a_new_process_starts_from(
    store: SQLiteStore, bank_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, vocab = fill(store)
    LexicalIndex(store, NS).sync()
    [file] = snapshot_files(bank_file)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600

    again = SQLiteStore(bank_file, clock=Clock())
    try:
        reads = full_loads(again, monkeypatch)
        index = LexicalIndex(again, NS)
        found = answers(index, again, random.Random(5), vocab)
        assert reads and 0 not in reads  # only the changes after the snapshot's sequence
        assert found == answers(without_snapshot(again), again, random.Random(5), vocab)
        reference = without_snapshot(again)
        reference.sync()
        assert len(index) == len(reference) > 250
    finally:
        again.close()


def test_changes_after_the_snapshot_give_the_answers_of_a_full_load(
    store: SQLiteStore, bank_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lexical_index, "SNAPSHOT_REFRESH", 10_000)  # keep the first snapshot
    rng, vocab = fill(store)
    LexicalIndex(store, NS).sync()
    before = snapshot_files(bank_file)[0].read_bytes()
    churn(store, rng, vocab, 150)

    again = SQLiteStore(bank_file, clock=Clock())
    try:
        reads = full_loads(again, monkeypatch)
        restored = LexicalIndex(again, NS)
        found = answers(restored, again, random.Random(9), vocab)
        assert reads and 0 not in reads  # the restored index read only what changed
        reference = without_snapshot(again)
        assert found == answers(reference, again, random.Random(9), vocab)
        assert len(restored) == len(reference)
        assert snapshot_files(bank_file)[0].read_bytes() == before
    finally:
        again.close()


def test_many_changes_since_the_snapshot_write_a_newer_one(
    store: SQLiteStore, bank_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng, vocab = fill(store)
    LexicalIndex(store, NS).sync()
    [file] = snapshot_files(bank_file)
    first = file.stat()
    churn(store, rng, vocab, 120)

    index = LexicalIndex(store, NS)
    index.sync()
    assert file.stat().st_mtime_ns != first.st_mtime_ns or file.stat().st_ino != first.st_ino
    churn(store, rng, vocab, 30)
    fresh = SQLiteStore(bank_file, clock=Clock())
    try:
        reads = full_loads(fresh, monkeypatch)
        restored = LexicalIndex(fresh, NS)
        assert answers(restored, fresh, random.Random(2), vocab) == answers(
            without_snapshot(fresh), fresh, random.Random(2), vocab
        )
        assert reads[0] != 0
    finally:
        fresh.close()


def damage(file: Path, how: str) -> None:
    data = bytearray(file.read_bytes())
    if how == "flipped byte":
        data[len(data) // 2] ^= 0xFF
    elif how == "truncated":
        data = data[: len(data) // 2]
    elif how == "garbage":
        data = bytearray(b"not a snapshot at all" * 10)
    elif how == "empty":
        data = bytearray()
    elif how == "stale format":
        data = data.replace(b'"format": %d' % snapshot.FORMAT, b'"format": 0', 1)
    elif how == "other namespace":
        data = data.replace(b'"namespace": "default"', b'"namespace": "defaulx"', 1)
    file.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("flipped byte", "checksum"),
        ("truncated", "truncated"),
        ("garbage", "not an index snapshot"),
        ("empty", "truncated"),
        ("stale format", "format"),
        ("other namespace", "another namespace"),
    ],
)
def test_a_damaged_or_stale_snapshot_is_ignored_with_its_reason(
    store: SQLiteStore,
    bank_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    how: str,
    reason: str,
) -> None:
    rng, vocab = fill(store)
    LexicalIndex(store, NS).sync()
    churn(store, rng, vocab, 20)
    [file] = snapshot_files(bank_file)
    damage(file, how)

    again = SQLiteStore(bank_file, clock=Clock())
    try:
        reads = full_loads(again, monkeypatch)
        with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
            found = answers(LexicalIndex(again, NS), again, random.Random(4), vocab)
        assert 0 in reads  # a full load: at once, or when a search first reads a damaged block of postings
        assert any(
            reason in record.getMessage() and "ignored" in record.getMessage() for record in caplog.records
        )
        assert found == answers(without_snapshot(again), again, random.Random(4), vocab)
    finally:
        again.close()


def test_another_banks_snapshot_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    one, other = (
        SQLiteStore(tmp_path / "one.db", clock=Clock()),
        SQLiteStore(tmp_path / "other.db", clock=Clock()),
    )
    try:
        _, vocab = fill(one, seed=1)
        fill(other, seed=2)
        LexicalIndex(one, NS).sync()
        shutil.copytree(tmp_path / "one.db.lexicon", tmp_path / "other.db.lexicon")
        with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
            found = answers(LexicalIndex(other, NS), other, random.Random(6), vocab)
        assert any("another bank" in record.getMessage() for record in caplog.records)
        assert found == answers(without_snapshot(other), other, random.Random(6), vocab)
    finally:
        one.close()
        other.close()


def test_a_bank_replaced_in_place_does_not_trust_the_old_snapshot(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another bank's file copied over this one (same inode): its lessons are not the snapshot's."""
    target, source = tmp_path / "bank.db", tmp_path / "source.db"
    store = SQLiteStore(target, clock=Clock())
    _, vocab = fill(store, seed=1)
    LexicalIndex(store, NS).sync()
    store.close()
    other = SQLiteStore(source, clock=Clock())
    fill(other, seed=2, lessons=400)
    other.close()
    inode = target.stat().st_ino
    with open(target, "r+b") as out:
        out.truncate(0)
        out.write(source.read_bytes())
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    assert target.stat().st_ino == inode

    again = SQLiteStore(target, clock=Clock())
    try:
        with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
            found = answers(LexicalIndex(again, NS), again, random.Random(8), vocab)
        assert any("no longer holds" in record.getMessage() for record in caplog.records)
        assert found == answers(without_snapshot(again), again, random.Random(8), vocab)
    finally:
        again.close()


def test_a_bank_restored_from_an_older_copy_does_not_trust_a_newer_snapshot(
    store: SQLiteStore, bank_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    rng, vocab = fill(store)
    older = tmp_path / "older.db"
    live, copy = sqlite3.connect(bank_file), sqlite3.connect(older)
    live.backup(copy)
    live.close()
    copy.close()
    query = LessonQuery(NS, statuses=("active", "archived", "quarantined"), live_only=False)
    for old in store.list_lessons(query, limit=20):  # rewrites only: the newest lessons are old ones
        store.update_lesson(old.model_copy(update={"content": " ".join(rng.sample(vocab, 6))}))
    LexicalIndex(store, NS).sync()
    store.close()
    with open(bank_file, "r+b") as out:  # the older copy over the bank, in place
        out.truncate(0)
        out.write(older.read_bytes())
    for suffix in ("-wal", "-shm"):
        Path(f"{bank_file}{suffix}").unlink(missing_ok=True)

    again = SQLiteStore(bank_file, clock=Clock())
    try:
        with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
            found = answers(LexicalIndex(again, NS), again, random.Random(8), vocab)
        assert any("sequence is behind" in record.getMessage() for record in caplog.records)
        assert found == answers(without_snapshot(again), again, random.Random(8), vocab)
    finally:
        again.close()


def test_small_banks_and_the_in_memory_store_keep_no_snapshot(
    store: SQLiteStore, bank_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lexical_index, "SNAPSHOT_MIN", 1_000)
    fill(store)
    LexicalIndex(store, NS).sync()
    assert snapshot_files(bank_file) == []
    assert snapshot.snapshot_of(MemoryStore(), NS) is None


def test_an_unwritable_folder_costs_the_snapshot_only(
    store: SQLiteStore, bank_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Path(f"{bank_file}.lexicon").write_text("a file where the folder goes")
    _, vocab = fill(store)
    with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
        found = answers(LexicalIndex(store, NS), store, random.Random(3), vocab)
    assert any("no index snapshot" in record.getMessage() for record in caplog.records)
    assert found == answers(without_snapshot(store), store, random.Random(3), vocab)
    assert os.path.isfile(f"{bank_file}.lexicon")


# ------------------------------------------------------------------ every store


@pytest.fixture(params=("sqlite", "postgres", "redis"))
def backend(request: pytest.FixtureRequest) -> str:
    """The stores that keep a snapshot (``store_url`` makes a fresh bank on each)."""
    name: str = request.param
    require(name)
    return name


@pytest.fixture
def bank(store_url: str) -> Iterator[Store]:  # noqa: F811
    opened = open_store(store_url, clock=Clock())
    yield opened
    opened.close()


def in_another_process(url: str, code: str) -> None:
    """Run ``code`` in a new Python process with ``store`` open on ``url`` (snapshots from 50 lessons)."""
    script = (
        "import sys\n"
        "from lessonbank.models import Lesson\n"
        "from lessonbank.retrieval import lexical_index\n"
        "from lessonbank.retrieval.lexical_index import LexicalIndex\n"
        "from lessonbank.stores import open_store\n"
        "lexical_index.SNAPSHOT_MIN = 50\n"
        "store = open_store(sys.argv[1])\n"
        f"{code}\n"
        "store.close()\n"
    )
    subprocess.run([sys.executable, "-c", script, url], check=True, env=os.environ.copy(), timeout=120)


def test_every_store_keeps_a_snapshot_a_new_process_starts_from(
    bank: Store,
    store_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, vocab = fill(bank)  # type: ignore[arg-type]
    in_another_process(store_url, f"LexicalIndex(store, {NS!r}).sync()")
    kept = snapshot.snapshot_of(bank, NS)
    assert kept is not None and kept.path.is_file()
    assert stat.S_IMODE(kept.path.stat().st_mode) == 0o600
    if not store_url.startswith("sqlite"):  # in the cache folder under LESSONBANK_HOME
        assert kept.path.is_relative_to(Path(os.environ["LESSONBANK_HOME"]) / "cache" / "index-snapshots")

    reads = full_loads(bank, monkeypatch)  # type: ignore[arg-type]
    index = LexicalIndex(bank, NS)
    found = answers(index, bank, random.Random(5), vocab)  # type: ignore[arg-type]
    assert reads and 0 not in reads  # only the changes after the snapshot's sequence
    assert found == answers(without_snapshot(bank), bank, random.Random(5), vocab)  # type: ignore[arg-type]


def test_a_write_through_another_process_after_the_snapshot_is_recalled(
    bank: Store,
    store_url: str,  # noqa: F811
) -> None:
    _, vocab = fill(bank)  # type: ignore[arg-type]
    LexicalIndex(bank, NS).sync()  # leaves the snapshot
    victim = bank.list_lessons(LessonQuery(NS), limit=1)[0].id
    in_another_process(
        store_url,
        f"store.write_lesson(Lesson(content='rotate the zanzibarquux keys', namespace={NS!r}))\n"
        f"store.delete_lesson({NS!r}, {victim!r})",
    )
    index = LexicalIndex(bank, NS)  # a new process's index: the snapshot, then the changes since
    found = index.search(["zanzibarquux"], 5, lambda ids: bank.candidates(LessonQuery(NS), ids))
    assert [bank.get_lessons([c.lesson_id])[0].content for c in found] == ["rotate the zanzibarquux keys"]
    assert victim not in index._slot_of
    assert answers(index, bank, random.Random(7), vocab) == answers(
        without_snapshot(bank), bank, random.Random(7), vocab
    )  # type: ignore[arg-type]


def test_a_corrupted_snapshot_of_any_store_is_logged_and_rebuilt_losing_nothing(
    bank: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _, vocab = fill(bank)  # type: ignore[arg-type]
    LexicalIndex(bank, NS).sync()
    kept = snapshot.snapshot_of(bank, NS)
    assert kept is not None
    damage(kept.path, "flipped byte")
    with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
        found = answers(LexicalIndex(bank, NS), bank, random.Random(4), vocab)  # type: ignore[arg-type]
    assert any("checksum" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    assert found == answers(without_snapshot(bank), bank, random.Random(4), vocab)  # type: ignore[arg-type]
    reads = full_loads(bank, monkeypatch)  # type: ignore[arg-type]
    LexicalIndex(bank, NS).sync()  # the full load wrote a good snapshot again
    assert reads and 0 not in reads


def test_the_cache_folder_is_keyed_without_the_password() -> None:
    plain = snapshot.without_password("postgresql://lb:s3cret@db.example:5432/bank?schema=a")
    assert plain == "postgresql://lb@db.example:5432/bank?schema=a"
    assert snapshot.without_password("redis://:pw@[::1]:6379/0") == "redis://[::1]:6379/0"
    assert (
        snapshot.without_password("redis://127.0.0.1:6379/0?prefix=x:")
        == "redis://127.0.0.1:6379/0?prefix=x:"
    )


def test_the_cache_folder_follows_lessonbank_home_then_the_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LESSONBANK_HOME", "/tmp/lb-home")
    assert snapshot.cache_folder() == Path("/tmp/lb-home/cache")
    monkeypatch.delenv("LESSONBANK_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", "/tmp/xdg")
    assert snapshot.cache_folder() == Path("/tmp/xdg/lessonbank")
