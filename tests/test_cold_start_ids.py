"""A snapshot's lesson ids are not read into a map when an index starts from it: a slot's id is
decoded when asked for, an id's slot found by binary search over the slots sorted by id. The
lookups must agree with a plain dict whatever happens after (new slots, moves, deletes), and an
index restored on a real store must answer as a full load does, with or without changes since."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.ports import LessonQuery, Store
from lessonbank.retrieval import lexical_index, snapshot, vector
from lessonbank.retrieval.lexical_index import LexicalIndex
from lessonbank.retrieval.snapshot import SlotMap, SnapshotIds, id_ends, id_order, valid_order
from lessonbank.retrieval.vector import VectorIndex, as_bytes
from lessonbank.stores import open_store
from lessonbank.stores.lexical import query_terms, term_hash
from tests.contract.conftest import Clock, require, store_url  # noqa: F401
from tests.test_index_snapshot import answers, churn, fill, full_loads, without_snapshot
from tests.test_lexical_index import NS

ID = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1, max_size=12)


def snapshot_ids(ids: list[str]) -> SnapshotIds:
    blob = "\0".join(ids).encode()
    order = id_order(blob, len(ids))
    assert valid_order(order, len(ids))
    return SnapshotIds(np.frombuffer(blob, dtype=np.uint8), order, id_ends(blob))


@settings(max_examples=200, deadline=None)
@given(st.lists(ID, unique=True, max_size=40), st.lists(ID, max_size=20))
def test_ids_are_found_by_their_sorted_bytes_as_a_dict_finds_them(ids: list[str], others: list[str]) -> None:
    held = snapshot_ids(ids)
    assert held.base() == len(held) == len(ids)
    assert list(held) == ids and [held[at] for at in range(len(ids))] == ids
    for slot, lesson_id in enumerate(ids):
        assert held.slot(lesson_id) == slot
    for lesson_id in others:
        assert held.slot(lesson_id) == (ids.index(lesson_id) if lesson_id in ids else None)


@settings(max_examples=150, deadline=None)
@given(st.lists(ID, unique=True, min_size=1, max_size=30), st.data())
def test_a_slot_map_follows_new_moved_and_removed_ids_as_a_dict_does(
    ids: list[str], data: st.DataObject
) -> None:
    held = snapshot_ids(ids)
    lazy, plain = SlotMap(held), {lesson_id: slot for slot, lesson_id in enumerate(ids)}
    for _ in range(data.draw(st.integers(0, 25))):
        action = data.draw(st.sampled_from(("set", "delete", "get", "whole")))
        lesson_id = data.draw(st.one_of(st.sampled_from(ids), ID))
        if action == "set":
            slot = data.draw(st.integers(0, 100))
            lazy[lesson_id] = plain[lesson_id] = slot
        elif action == "delete":
            if lesson_id in plain:
                del lazy[lesson_id], plain[lesson_id]
            else:
                with pytest.raises(KeyError):
                    del lazy[lesson_id]
        elif action == "get":
            assert lazy.get(lesson_id) == plain.get(lesson_id) and (lesson_id in lazy) == (lesson_id in plain)
        else:
            assert dict(lazy) == plain
    assert dict(lazy) == plain and len(lazy) == len(plain)


def test_appended_ids_follow_the_snapshots() -> None:
    held = snapshot_ids(["les_b", "les_a", "lés_c"])
    held.append("les_d")
    held.extend(["les_e"])
    assert list(held) == ["les_b", "les_a", "lés_c", "les_d", "les_e"] == held[:]
    assert held[-1] == "les_e" and held[3] == "les_d" and held.slot("les_d") is None  # (the map's job)
    empty = snapshot_ids([])
    assert len(empty) == 0 and list(empty) == [] and empty.slot("les_a") is None


# ------------------------------------------------------------------ real stores


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical_index, "SNAPSHOT_MIN", 50)
    monkeypatch.setattr(lexical_index, "SNAPSHOT_REFRESH", 40)
    monkeypatch.setattr(vector, "SNAPSHOT_MIN", 50)


@pytest.fixture(params=("sqlite", "postgres"))
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require(name)
    return name


@pytest.fixture
def bank(store_url: str) -> Iterator[Store]:  # noqa: F811
    opened = open_store(store_url, clock=Clock())
    yield opened
    opened.close()


def test_a_restored_index_reads_no_id_map_until_changes_need_one(bank: Store) -> None:
    _, vocab = fill(bank)  # type: ignore[arg-type]
    LexicalIndex(bank, NS).sync()  # leaves the snapshot
    index = LexicalIndex(bank, NS)
    found = answers(index, bank, random.Random(3), vocab)  # type: ignore[arg-type]
    assert isinstance(index._ids, SnapshotIds) and isinstance(index._slot_of, SlotMap)
    assert index._slot_of._whole is None  # nothing changed: no id was looked up
    assert found == answers(without_snapshot(bank), bank, random.Random(3), vocab)  # type: ignore[arg-type]


@pytest.mark.parametrize("steps", [12, 60])
def test_changes_over_a_restored_index_answer_as_a_full_load(bank: Store, steps: int) -> None:
    rng, vocab = fill(bank)  # type: ignore[arg-type]
    LexicalIndex(bank, NS).sync()
    churn(bank, rng, vocab, steps)  # type: ignore[arg-type]  # rewrites, reinforcements, deletes, adds
    index = LexicalIndex(bank, NS)
    assert answers(index, bank, random.Random(8), vocab) == answers(  # type: ignore[arg-type]
        without_snapshot(bank),
        bank,
        random.Random(8),
        vocab,  # type: ignore[arg-type]
    )
    churn(bank, rng, vocab, 10)  # type: ignore[arg-type]  # and after the restored index has synced
    assert answers(index, bank, random.Random(9), vocab) == answers(  # type: ignore[arg-type]
        without_snapshot(bank),
        bank,
        random.Random(9),
        vocab,  # type: ignore[arg-type]
    )


def unit(rng: random.Random, dim: int) -> np.ndarray:
    v = np.array([rng.gauss(0, 1) for _ in range(dim)], dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_restored_vector_index_finds_rows_by_id_as_a_full_load_does(bank: Store) -> None:
    rng, dim, model = random.Random(5), 16, "test-model"
    fill(bank, lessons=120)  # type: ignore[arg-type]
    ids = sorted(lesson.id for lesson in bank.list_lessons(LessonQuery(NS), limit=1000))
    bank.put_vectors(NS, model, [(i, f"h{i}", as_bytes(unit(rng, dim))) for i in ids])
    VectorIndex(bank, NS, model, dim).sync()  # leaves the snapshot
    restored = VectorIndex(bank, NS, model, dim, mapped_from=64)  # its rows read from the file
    query = unit(rng, dim)
    wanted = [*rng.sample(ids, 20), "les_not_there"]
    first = restored.similarity(query, wanted)
    assert isinstance(restored._row_of, SlotMap) and restored._row_of._whole is None
    assert restored._row_file is not None  # (the rewritten rows below are read from the matrix)
    bank.put_vectors(NS, model, [(i, f"g{i}", as_bytes(unit(rng, dim))) for i in wanted[:5]])  # rewrites
    assert bank.delete_lesson(NS, wanted[5])
    restored.mark_stale()
    fresh = VectorIndex(bank, NS, model, dim)
    fresh._snapshot = None
    assert restored.similarity(query, wanted) == pytest.approx(fresh.similarity(query, wanted), abs=1e-6)
    found, expected = restored.search(query, 30), fresh.search(query, 30)  # (rows in another order:
    assert [i for i, _ in found] == [i for i, _ in expected]  # a product may differ in its last bit)
    assert [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-6)
    assert set(first) == set(wanted[:-1])


def flip_posting(path: Path, block: int) -> None:
    """Flip a byte of the docs of ``block`` in a lexical snapshot file."""
    data = bytearray(path.read_bytes())
    _, header_length = snapshot.PREFIX.unpack_from(data)
    header = json.loads(bytes(data[snapshot.PREFIX.size : snapshot.PREFIX.size + header_length]))
    start = snapshot.aligned(snapshot.PREFIX.size + header_length, snapshot.ALIGN)
    data[start + header["arrays"]["docs"][0] + block * snapshot.BLOCK * 4 + 1] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_damaged_block_of_postings_is_found_when_a_search_first_reads_it(
    bank: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(snapshot, "BLOCK", 64)  # many blocks in a small bank
    _, vocab = fill(bank)  # type: ignore[arg-type]
    LexicalIndex(bank, NS).sync()  # leaves the snapshot
    kept = snapshot.snapshot_of(bank, NS)
    assert kept is not None
    probe = LexicalIndex(bank, NS)
    probe.sync()  # restored: where each word's postings lie
    spans = {}
    for word in vocab:
        [term] = [term_hash(w) for w in query_terms([word])] or [0]
        at = int(np.searchsorted(probe._terms, term))
        if at < len(probe._terms) and int(probe._terms[at]) == term:
            spans[word] = set(snapshot.blocks_holding(int(probe._starts[at]), int(probe._starts[at + 1])))
    damaged_word = max(spans, key=lambda w: min(spans[w]))
    block = min(spans[damaged_word])
    sound_word = next(w for w in spans if block not in spans[w])
    flip_posting(kept.path, block)

    reference = without_snapshot(bank)
    reference.sync()
    reads = full_loads(bank, monkeypatch)  # type: ignore[arg-type]
    index = LexicalIndex(bank, NS)

    def top(idx: LexicalIndex, word: str) -> list[tuple[str, float]]:
        found = idx.search([word], 20, lambda ids: bank.candidates(LessonQuery(NS), ids))
        return [(c.lesson_id, c.relevance) for c in found]

    with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
        assert top(index, sound_word) == top(reference, sound_word)
        assert 0 not in reads and isinstance(index._ids, SnapshotIds)  # the damage is not read yet
        assert top(index, damaged_word) == top(reference, damaged_word)
    assert any(f"block {block} " in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records)
    assert reads.count(0) == 1  # the damaged index's full load
    assert answers(index, bank, random.Random(6), vocab) == answers(reference, bank, random.Random(6), vocab)  # type: ignore[arg-type]
    reads.clear()
    again = LexicalIndex(bank, NS)  # the full load wrote a good snapshot
    assert top(again, damaged_word) == top(reference, damaged_word) and 0 not in reads
