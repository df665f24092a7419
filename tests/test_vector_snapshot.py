"""The vector index's snapshot, beside a SQLite bank or in the cache folder of a PostgreSQL or Redis
bank: a new process maps it and answers as a full load would; later writes and deletes are seen; a
snapshot it cannot trust costs a full load (logged), never an answer, and is written again."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lessonbank.models import Lesson
from lessonbank.ports import Store
from lessonbank.retrieval import vector, vector_snapshot
from lessonbank.retrieval.vector import VectorIndex, as_bytes
from lessonbank.retrieval.vector_snapshot import vector_snapshot_of
from lessonbank.stores import open_store
from lessonbank.stores.sqlite import SQLiteStore
from tests.contract.conftest import Clock, require, store_url  # noqa: F401

NS, MODEL, DIM = "default", "test-embedder", 24


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector, "SNAPSHOT_MIN", 50)
    monkeypatch.setattr(vector, "SNAPSHOT_REFRESH", 40)


@pytest.fixture
def bank_file(tmp_path: Path) -> Path:
    return tmp_path / "bank.db"


@pytest.fixture
def store(bank_file: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(bank_file, clock=Clock())
    yield opened
    opened.close()


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def fill(store: Store, count: int, seed: int, start: int = 0) -> list[str]:
    """``count`` lessons with a vector each."""
    vectors = unit(np.random.default_rng(seed).standard_normal((count, DIM)))
    lessons = [Lesson(namespace=NS, content=f"vector lesson {start + n}") for n in range(count)]
    store.import_lessons(lessons)
    ids = [x.id for x in lessons]
    store.put_vectors(
        NS, MODEL, [(i, f"h{n}", as_bytes(v)) for n, (i, v) in enumerate(zip(ids, vectors, strict=True))]
    )
    return ids


def answers(index: VectorIndex, seed: int = 9) -> list[list[tuple[str, float]]]:
    """The top 15 of a dozen queries, scores to 5 places (rows in another order sum in another
    order, a last-bit difference) and ties by id."""
    queries = unit(np.random.default_rng(seed).standard_normal((12, DIM)))
    out = []
    for query in queries:
        found = [(lesson_id, round(score, 5)) for lesson_id, score in index.search(query, 15)]
        out.append(sorted(found, key=lambda item: (-item[1], item[0])))
    return out


def full_load(store: Store) -> list[list[tuple[str, float]]]:
    """The answers of an index that reads every vector (no snapshot)."""
    index = VectorIndex(store, NS, MODEL, DIM)
    index._snapshot = None
    return answers(index)


def reads_of(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``after`` of every vector read of ``store`` (0: every row)."""
    reads: list[int] = []
    real = store.vector_changes

    def recorded(namespace: str, model: str, after: int) -> Any:
        if model == MODEL:
            reads.append(after)
        return real(namespace, model, after)

    monkeypatch.setattr(store, "vector_changes", recorded)
    return reads


def snapshot_path(store: Store) -> Path:
    kept = vector_snapshot_of(store, NS, MODEL)
    assert kept is not None
    return kept.path


def test_a_full_load_leaves_a_private_snapshot_that_a_new_index_maps(
    store: SQLiteStore, bank_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(store, 300, seed=1)
    first = VectorIndex(store, NS, MODEL, DIM)
    expected = answers(first)
    path = snapshot_path(store)
    assert path.is_file() and path.parent == Path(f"{bank_file}.lexicon")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    again = SQLiteStore(bank_file, clock=Clock())
    try:
        reads = reads_of(again, monkeypatch)
        index = VectorIndex(again, NS, MODEL, DIM, mapped_from=64)
        assert answers(index) == expected
        assert reads and 0 not in reads  # the snapshot, then only the changes after its sequence
        assert index.memory()["mapped"] == 1  # the file itself, mapped
    finally:
        again.close()
    assert not vector_snapshot_of(store, NS, "another-model").path.exists()  # type: ignore[union-attr]


def test_writes_rewrites_and_deletes_after_the_snapshot_are_seen(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = fill(store, 300, seed=2)
    VectorIndex(store, NS, MODEL, DIM).sync()
    before = snapshot_path(store).read_bytes()
    more = fill(store, 20, seed=3, start=300)
    store.put_vectors(NS, MODEL, [(ids[5], "moved", as_bytes(unit(np.ones(DIM))))])
    for lesson_id in (ids[0], ids[150], more[-1]):
        assert store.delete_lesson(NS, lesson_id)

    reads = reads_of(store, monkeypatch)
    index = VectorIndex(store, NS, MODEL, DIM, mapped_from=64)
    found = answers(index)
    assert 0 not in reads  # deletes found by one lookup, not a full load
    assert found == full_load(store)
    assert index.search(unit(np.ones(DIM)), 1)[0][0] == ids[5]
    assert {ids[0], ids[150], more[-1]}.isdisjoint(index._row_of) and len(index) == 317
    assert snapshot_path(store).read_bytes() == before  # 20 rows since: not yet worth a new one


def test_many_changes_write_a_newer_snapshot(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(store, 200, seed=4)
    VectorIndex(store, NS, MODEL, DIM).sync()
    fill(store, 60, seed=5, start=200)
    VectorIndex(store, NS, MODEL, DIM).sync()  # 60 rows over the snapshot: a newer one
    top = store.vector_changes(NS, MODEL, 0).seq
    reads = reads_of(store, monkeypatch)
    index = VectorIndex(store, NS, MODEL, DIM)
    assert answers(index) == full_load(store)
    assert reads[:2] == [top - 1, top]  # the snapshot's check, then nothing left to read after it


def test_the_sign_bits_come_with_the_snapshot(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector, "BINARY_FROM", 100)
    monkeypatch.setattr(vector, "MIN_RESCORE", 20)
    monkeypatch.setattr(vector, "RESCORE_PER_RESULT", 2)
    fill(store, 800, seed=6)
    writer = VectorIndex(store, NS, MODEL, DIM)
    expected = answers(writer)
    if not writer.binary:
        pytest.skip("numpy < 2.0: no two-step search")
    reads = reads_of(store, monkeypatch)
    index = VectorIndex(store, NS, MODEL, DIM)
    index.sync()
    assert reads and 0 not in reads  # from the snapshot
    assert index._bits is not None and index._bits.shape[1] >= 800
    assert np.array_equal(index._bits[:, :800], writer._bits[:, :800])  # type: ignore[index]
    assert answers(index) == expected
    assert index._unchecked is not None and index._unchecked.any()  # rows no search read: not read


def test_a_damaged_row_is_found_when_a_search_reads_it(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(vector, "BINARY_FROM", 100)
    monkeypatch.setattr(vector, "MIN_RESCORE", 20)
    monkeypatch.setattr(vector, "RESCORE_PER_RESULT", 2)
    ids = fill(store, 800, seed=12)
    writer = VectorIndex(store, NS, MODEL, DIM)
    writer.sync()
    if not writer.binary:
        pytest.skip("numpy < 2.0: no two-step search")
    target = writer._row_of[ids[400]]
    query = writer._matrix[target].copy()
    path = snapshot_path(store)
    data = bytearray(path.read_bytes())
    _, length = vector_snapshot.PREFIX.unpack_from(data)
    header = json.loads(bytes(data[vector_snapshot.PREFIX.size : vector_snapshot.PREFIX.size + length]))
    data[len(data) - header["capacity"] * DIM * 4 + target * DIM * 4 + 5] ^= 0x10  # its row only
    path.write_bytes(bytes(data))

    reads = reads_of(store, monkeypatch)
    index = VectorIndex(store, NS, MODEL, DIM)
    with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
        index.sync()
        assert 0 not in reads and index._unchecked is not None  # the header and sums were whole
        found = index.search(query, 5)
    assert found[0][0] == ids[400] and found[0][1] == pytest.approx(1.0)
    assert any(f"row {target} does not match its checksum" in r.getMessage() for r in caplog.records)
    assert 0 in reads and index._unchecked is None  # reloaded in full before answering
    assert found == writer.search(query, 5)
    reads.clear()
    VectorIndex(store, NS, MODEL, DIM).sync()
    assert 0 not in reads  # and a good snapshot written again


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "flipped byte":  # inside the matrix's rows (the file ends with room for more)
        _, length = vector_snapshot.PREFIX.unpack_from(data)
        header = json.loads(bytes(data[vector_snapshot.PREFIX.size : vector_snapshot.PREFIX.size + length]))
        data[len(data) - header["capacity"] * DIM * 4 + 4 * DIM * header["rows"] // 2] ^= 0x40
    elif how == "truncated":
        data = data[: len(data) // 3]
    elif how == "garbage":
        data = bytearray(b"not a snapshot at all" * 10)
    elif how == "other model":
        data = data.replace(MODEL.encode(), b"test-embeddex", 1)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("flipped byte", "checksum"),
        ("truncated", "truncated"),
        ("garbage", "not a vector snapshot"),
        ("other model", "another embedder"),
    ],
)
def test_a_damaged_snapshot_is_logged_loaded_in_full_and_written_again(
    store: SQLiteStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    how: str,
    reason: str,
) -> None:
    fill(store, 300, seed=7)
    VectorIndex(store, NS, MODEL, DIM).sync()
    damage(snapshot_path(store), how)
    reads = reads_of(store, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
        found = answers(VectorIndex(store, NS, MODEL, DIM, mapped_from=64))
    assert 0 in reads  # a full load
    assert any(reason in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    assert found == full_load(store)
    reads.clear()
    assert answers(VectorIndex(store, NS, MODEL, DIM, mapped_from=64)) == found
    assert 0 not in reads  # the full load wrote a good snapshot again


def test_another_banks_snapshot_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    one, other = SQLiteStore(tmp_path / "one.db"), SQLiteStore(tmp_path / "other.db")
    try:
        fill(one, 100, seed=8)
        fill(other, 100, seed=8)
        VectorIndex(one, NS, MODEL, DIM).sync()
        folder = Path(f"{tmp_path / 'other.db'}.lexicon")
        folder.mkdir(mode=0o700, exist_ok=True)
        (folder / snapshot_path(one).name).write_bytes(snapshot_path(one).read_bytes())
        with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
            assert answers(VectorIndex(other, NS, MODEL, DIM)) == full_load(other)
        assert any("another bank" in r.getMessage() for r in caplog.records)
    finally:
        one.close()
        other.close()


# ------------------------------------------------------------------ every store


@pytest.fixture(params=("sqlite", "postgres", "redis"))
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require(name)
    return name


@pytest.fixture
def bank(store_url: str) -> Iterator[Store]:  # noqa: F811
    opened = open_store(store_url, clock=Clock())
    yield opened
    opened.close()


def in_another_process(url: str, code: str) -> None:
    """Run ``code`` in a new Python process with ``store`` open on ``url`` (snapshots from 50 rows)."""
    script = (
        "import sys\n"
        "from lessonbank.models import Lesson\n"
        "from lessonbank.retrieval import vector\n"
        "from lessonbank.retrieval.vector import VectorIndex, as_bytes\n"
        "from lessonbank.stores import open_store\n"
        "vector.SNAPSHOT_MIN = 50\n"
        "store = open_store(sys.argv[1])\n"
        f"{code}\n"
        "store.close()\n"
    )
    subprocess.run([sys.executable, "-c", script, url], check=True, env=os.environ.copy(), timeout=120)


def test_every_store_keeps_a_snapshot_another_process_starts_from_and_follows(
    bank: Store,
    store_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = fill(bank, 200, seed=10)
    in_another_process(store_url, f"VectorIndex(store, {NS!r}, {MODEL!r}, {DIM}).sync()")
    path = snapshot_path(bank)
    assert path.is_file() and stat.S_IMODE(path.stat().st_mode) == 0o600
    if not store_url.startswith("sqlite"):
        assert path.is_relative_to(Path(os.environ["LESSONBANK_HOME"]) / "cache" / "index-snapshots")

    # Written through another process after the snapshot: a new lesson's vector, and a delete.
    in_another_process(
        store_url,
        f"lesson = Lesson(namespace={NS!r}, content='written after the snapshot')\n"
        "store.write_lesson(lesson)\n"
        f"store.put_vectors({NS!r}, {MODEL!r}, [(lesson.id, 'h', as_bytes([1.0] + [0.0] * {DIM - 1}))])\n"
        f"store.delete_lesson({NS!r}, {ids[3]!r})\n"
        "print(lesson.id)",
    )
    reads = reads_of(bank, monkeypatch)
    index = VectorIndex(bank, NS, MODEL, DIM, mapped_from=64)
    query = np.zeros(DIM, dtype=np.float32)
    query[0] = 1.0
    [(found, score)] = index.search(query, 1)
    assert bank.get_lessons([found])[0].content == "written after the snapshot" and score == pytest.approx(
        1.0
    )
    assert ids[3] not in index._row_of and len(index) == 200
    assert reads and 0 not in reads
    assert answers(index) == full_load(bank)


def test_a_corrupted_snapshot_of_any_store_is_logged_and_rebuilt_losing_nothing(
    bank: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fill(bank, 200, seed=11)
    VectorIndex(bank, NS, MODEL, DIM).sync()
    damage(snapshot_path(bank), "flipped byte")
    with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
        found = answers(VectorIndex(bank, NS, MODEL, DIM))
    assert any("checksum" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    assert found == full_load(bank) and sum(len(page) for page in found) == 12 * 15
    reads = reads_of(bank, monkeypatch)
    VectorIndex(bank, NS, MODEL, DIM).sync()
    assert reads and 0 not in reads  # the full load wrote a good snapshot again
