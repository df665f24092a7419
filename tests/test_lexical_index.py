"""Exact lexical recall: the in-process index ranks every query word by BM25 over the namespace's own
figures, stays in step with every write, and returns the true top-k of the lessons a filter lets through.

The reference is a brute-force BM25 written here from the definitions in ``stores.lexical`` (every
lesson, every word); the store's own search (SQL over FTS5's postings) must agree with both."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.retrieval import lexical_index
from lessonbank.retrieval.hybrid import Retriever
from lessonbank.retrieval.lexical_index import LexicalIndex
from lessonbank.stores.lexical import (
    BM25_B,
    BM25_K1,
    FIELD_WEIGHTS,
    LEXICAL_SPACE,
    query_terms,
    term_vector,
    weighted_terms,
)
from lessonbank.stores.sqlite import SQLiteStore
from tests.contract.conftest import Clock
from tests.contract.test_contract_lessons import lesson

NS = "default"


def vocabulary(rng: random.Random, size: int) -> list[str]:
    letters = "bcdfghjklmnpqrstvwxz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 8))) for _ in range(size)]


def zipf_words(rng: random.Random, vocab: list[str], count: int) -> list[str]:
    # Rank r drawn with weight 1/r: a few words in most lessons, most words in few.
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    return rng.choices(vocab, weights=weights, k=count)


def random_lesson(rng: random.Random, vocab: list[str], clock: Clock, **fields: object) -> Lesson:
    content = " ".join(zipf_words(rng, vocab, rng.randint(1, 30)))
    fields.setdefault("tags", list(dict.fromkeys(zipf_words(rng, vocab, rng.randint(0, 3)))))
    if rng.random() < 0.5:
        fields.setdefault("learned_from", " ".join(zipf_words(rng, vocab, rng.randint(1, 12))))
    return lesson(content, clock, namespace=NS, **fields)


def stored(store: SQLiteStore) -> dict[str, Lesson]:
    """Every lesson of the namespace, any status (a repeat in a batch was merged into its first copy)."""
    query = LessonQuery(NS, statuses=("active", "archived", "quarantined"), live_only=False)
    return {item.id: item for item in store.list_lessons(query, limit=100_000)}


def written(
    store: SQLiteStore, seed: int, words: int, lessons: int
) -> tuple[random.Random, list[str], dict[str, Lesson]]:
    """``lessons`` random lessons written one by one: the generator, its vocabulary and what is stored."""
    rng, clock = random.Random(seed), Clock()
    vocab = vocabulary(rng, words)
    for _ in range(lessons):
        store.write_lesson(random_lesson(rng, vocab, clock))
    return rng, vocab, stored(store)


def brute_force(bank: dict[str, Lesson], terms: list[str]) -> dict[str, float]:
    """BM25 of every lesson holding a query word, from scratch."""
    wanted = query_terms(terms)
    docs = {lesson_id: weighted_terms(item, FIELD_WEIGHTS) for lesson_id, item in bank.items()}
    avg = sum(length for _, length in docs.values()) / len(docs)
    scores: dict[str, float] = {}
    for term in wanted:
        holders = [(i, freq[term]) for i, (freq, _) in docs.items() if term in freq]
        if not holders:
            continue
        df = len(holders)
        weight = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
        for lesson_id, tf in holders:
            length = docs[lesson_id][1]
            norm = BM25_K1 * (1 - BM25_B + BM25_B * length / avg)
            scores[lesson_id] = scores.get(lesson_id, 0.0) + weight * tf * (BM25_K1 + 1) / (tf + norm)
    return scores


def top(scores: dict[str, float], k: int, allowed: set[str] | None = None) -> list[tuple[str, float]]:
    kept = [(i, s) for i, s in scores.items() if allowed is None or i in allowed]
    return sorted(kept, key=lambda item: -item[1])[:k]


def assert_same_top(found: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """Same scores in the same order; lessons with equal scores may come in either order."""
    assert [round(s, 9) for _, s in found] == [round(s, 9) for _, s in expected]
    by_score: dict[float, set[str]] = {}
    for lesson_id, score in expected:
        by_score.setdefault(round(score, 9), set()).add(lesson_id)
    cut = round(expected[-1][1], 9) if expected else None
    for lesson_id, score in found:
        if round(score, 9) != cut:  # the last score may be shared with lessons past the cut
            assert lesson_id in by_score[round(score, 9)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "bank.db", clock=Clock())
    yield store
    store.close()


def search(index: LexicalIndex, store: SQLiteStore, terms: list[str], k: int, **filters: object):
    query = LessonQuery(NS, **filters)  # type: ignore[arg-type]
    found = index.search(terms, k, lambda ids: store.candidates(query, ids), scope=query)
    return [(c.lesson_id, c.relevance) for c in found]


def test_top_k_is_the_brute_force_bm25_for_queries_of_1_to_64_words(store: SQLiteStore) -> None:
    rng, clock = random.Random(7), Clock()
    vocab = vocabulary(rng, 400)
    bank = {}
    for item in (random_lesson(rng, vocab, clock) for _ in range(600)):
        bank[item.id] = item
    store.import_lessons(list(bank.values()))
    bank = stored(store)
    index = LexicalIndex(store, NS)
    for size in (1, 2, 5, 12, 30, 64):
        for _ in range(5):
            terms = rng.sample(vocab, size)
            assert_same_top(search(index, store, terms, 20), top(brute_force(bank, terms), 20))


def test_the_index_and_the_stores_own_search_give_the_same_scores(store: SQLiteStore) -> None:
    rng, vocab, _ = written(store, 11, 120, 300)
    index = LexicalIndex(store, NS)
    for _ in range(20):
        terms = rng.sample(vocab, rng.randint(1, 12))
        in_store = [(c.lesson_id, c.relevance) for c in store.search(LessonQuery(NS), terms, 10)]
        assert_same_top(search(index, store, terms, 10), in_store)


def test_the_index_follows_writes_rewrites_and_deletes(store: SQLiteStore, monkeypatch) -> None:
    monkeypatch.setattr(lexical_index, "DELTA_MIN", 16)  # cross the rebuild threshold often
    rng, clock = random.Random(3), Clock()
    vocab = vocabulary(rng, 150)
    bank: dict[str, Lesson] = {}
    index = LexicalIndex(store, NS)
    loads = []
    real_load = index._load
    monkeypatch.setattr(index, "_load", lambda: (loads.append(1), real_load())[1])
    for step in range(200):
        action = rng.random()
        if action < 0.6 or len(bank) < 10:
            item = store.write_lesson(random_lesson(rng, vocab, clock)).lesson
            bank[item.id] = item
        elif action < 0.8:
            old = bank[rng.choice(sorted(bank))]
            new = old.model_copy(update={"content": " ".join(zipf_words(rng, vocab, rng.randint(1, 20)))})
            bank[old.id] = store.update_lesson(new)
        else:
            victim = rng.choice(sorted(bank))
            assert store.delete_lesson(NS, victim)
            del bank[victim]
        if step % 10 == 0:
            bank = stored(store)  # a write may have reinforced an earlier lesson instead
            terms = rng.sample(vocab, rng.randint(1, 20))
            assert_same_top(search(index, store, terms, 15), top(brute_force(bank, terms), 15))
    index.sync()
    assert len(index) == len(stored(store))
    assert len(loads) <= 1  # the first sync only: deletes are found without loading everything again


def test_a_filter_that_lets_one_percent_through_ranks_as_a_bank_of_that_slice(store: SQLiteStore) -> None:
    rng, clock = random.Random(5), Clock()
    vocab = vocabulary(rng, 200)
    bank = {}
    for n in range(2000):
        agent = "rare-agent" if n % 100 == 0 else "common-agent"
        item = random_lesson(rng, vocab, clock, agent=agent, tags=["slice"] if n % 100 == 1 else [])
        bank[item.id] = item
    store.import_lessons(list(bank.values()))
    bank = stored(store)
    index = LexicalIndex(store, NS)
    rare = {i for i, item in bank.items() if item.agent == "rare-agent"}
    tagged = {i for i, item in bank.items() if "slice" in item.tags}
    for _ in range(10):
        terms = rng.sample(vocab[:60], 8)
        alone = {i: bank[i] for i in rare}  # BM25's figures are the slice's own
        assert_same_top(search(index, store, terms, 5, agent="rare-agent"), top(brute_force(alone, terms), 5))
        alone = {i: bank[i] for i in tagged}
        assert_same_top(search(index, store, terms, 5, tags=["slice"]), top(brute_force(alone, terms), 5))


def test_archived_lessons_count_in_the_figures_but_are_not_recalled(store: SQLiteStore) -> None:
    rng, vocab, bank = written(store, 9, 80, 200)
    archived = set(rng.sample(sorted(bank), 50))
    for lesson_id in archived:
        store.update_lesson(bank[lesson_id].model_copy(update={"status": "archived"}))
    index = LexicalIndex(store, NS)
    terms = vocab[:10]
    expected = top(brute_force(bank, terms), 10, set(bank) - archived)
    assert_same_top(search(index, store, terms, 10), expected)


def test_term_vectors_are_written_by_every_sqlite_write_path(store: SQLiteStore) -> None:
    clock = Clock()
    first = store.write_lesson(lesson("rotate the signing keys", clock, namespace=NS, tags=["ops"])).lesson
    store.import_lessons([lesson(f"bulk lesson {n} on caches", clock, namespace=NS) for n in range(3)])
    edited = store.update_lesson(first.model_copy(update={"content": "rotate every key quarterly"}))
    changes = store.vector_changes(NS, LEXICAL_SPACE, 0)
    rows = dict(changes.rows)
    assert len(rows) == changes.count == 4  # the bulk import counts what it writes
    scope = {"kind": edited.kind, "agent": None, "task_type": None, "goal_id": None}
    assert rows[edited.id] == term_vector(edited.content, edited.tags, edited.learned_from, scope)
    moved = store.update_lesson(edited.model_copy(update={"agent": "reviewer"}))  # a new scope, same words
    rows = dict(store.vector_changes(NS, LEXICAL_SPACE, 0).rows)
    assert rows[moved.id] == term_vector(
        moved.content, moved.tags, moved.learned_from, {**scope, "agent": "reviewer"}
    )


def test_recall_goes_through_the_index_and_falls_back_to_the_store_without_numpy(
    store: SQLiteStore, monkeypatch
) -> None:
    rng, vocab, bank = written(store, 2, 60, 150)
    terms = rng.sample(vocab, 6)
    expected = top(brute_force(bank, terms), 20)
    retriever = Retriever(store)
    assert retriever.lexical_index(NS) is not None
    with_index = [(c.lesson_id, c.relevance) for c in retriever.lexical(" ".join(terms), LessonQuery(NS), 20)]
    assert_same_top(with_index, expected)

    def no_numpy(*args: object, **kwargs: object) -> None:
        raise ImportError("numpy")

    monkeypatch.setattr(LexicalIndex, "__init__", no_numpy)
    bare = Retriever(store)
    assert bare.lexical_index(NS) is None
    in_store = [(c.lesson_id, c.relevance) for c in bare.lexical(" ".join(terms), LessonQuery(NS), 20)]
    assert_same_top(in_store, expected)


def test_huge_and_empty_queries(store: SQLiteStore) -> None:
    clock = Clock()
    store.write_lesson(lesson("pin the parser version", clock, namespace=NS))
    index = LexicalIndex(store, NS)
    assert search(index, store, [], 5) == []
    assert search(index, store, ["unknownword"], 5) == []
    assert search(index, store, ["parser"], 0) == []
    many = [f"w{n}" for n in range(5000)] + ["parser"]
    assert [i for i, _ in search(index, store, many, 5)] == [store.list_lessons(LessonQuery(NS))[0].id]


def test_a_damaged_term_vector_is_skipped_and_logged_not_fatal(store: SQLiteStore, caplog) -> None:
    clock = Clock()
    kept = store.write_lesson(lesson("pin the parser version in the lock file", clock, namespace=NS)).lesson
    damaged = store.write_lesson(lesson("rotate the parser tokens weekly", clock, namespace=NS)).lesson
    conn = store.dialect.connection()
    conn.execute(
        "UPDATE lesson_vectors SET vector = x'0102' WHERE model = ? AND lesson_rowid = "
        "(SELECT rowid FROM lessons WHERE id = ?)",
        (LEXICAL_SPACE, damaged.id),
    )
    index = LexicalIndex(store, NS)
    with caplog.at_level("WARNING", logger="lessonbank.retrieval"):
        assert [i for i, _ in search(index, store, ["parser"], 5)] == [kept.id]
        assert [i for i, _ in search(index, store, ["parser"], 5)] == [kept.id]  # no reload loop
    assert sum("malformed" in r.message for r in caplog.records) == 1
    # Rewriting the lesson writes a whole vector again: it is found from then on.
    store.update_lesson(damaged.model_copy(update={"content": "rotate the parser tokens every week"}))
    assert {i for i, _ in search(index, store, ["parser"], 5)} == {kept.id, damaged.id}


def test_hostile_query_text(store: SQLiteStore) -> None:
    clock = Clock()
    store.write_lesson(lesson("quote identifiers in SQL built from user input", clock, namespace=NS))
    retriever = Retriever(store)
    for text in ["'; DROP TABLE lessons; --", "\x00\x01 \ud7ff" * 1000, "SQL " * 100_000, "🙂" * 5000]:
        found = retriever.lexical(text, LessonQuery(NS), 5)
        assert all(c.relevance > 0 for c in found)
    assert store.list_lessons(LessonQuery(NS))  # nothing lost


def test_a_term_vector_holds_the_weighted_terms_of_the_lesson_and_its_scope() -> None:
    # term_vector tokenises with its own cache for speed: it must give what the field terms define.
    from lessonbank.stores.lexical import (
        TERM_RECORD,
        scope_hash,
        term_hash,
        text_field_terms,
        weighted_frequencies,
    )

    content, tags, learned_from = (
        "Files files FILE; parse the configs",
        ["ops", "Parse"],
        "def parse(files): ...",
    )
    records = list(
        TERM_RECORD.iter_unpack(term_vector(content, tags, learned_from, {"agent": "ci", "kind": None}))
    )
    frequencies, length = weighted_frequencies(text_field_terms(content, tags, learned_from), FIELD_WEIGHTS)
    assert records[0] == (0, 0.0, length)
    assert {h: tf for h, tf, _ in records[1:] if tf} == {term_hash(t): tf for t, tf in frequencies.items()}
    assert {h for h, tf, _ in records[1:] if not tf} == {
        scope_hash("agent", "ci"),
        scope_hash("tag", "ops"),
        scope_hash("tag", "Parse"),
    }


def full_loads(store: SQLiteStore) -> list[str]:
    """The spaces of every full read of ``store``'s vectors from now on (``after=0``), in order."""
    loads: list[str] = []
    original = store.vector_changes

    def counting(namespace: str, model: str, after: int):  # type: ignore[no-untyped-def]
        if after == 0:
            loads.append(model)
        return original(namespace, model, after)

    store.vector_changes = counting  # type: ignore[method-assign]
    return loads


def test_a_bulk_import_that_reinforces_with_new_tags_keeps_the_count(store: SQLiteStore) -> None:
    """Reinforcing a stored lesson with new tags rewrites its term vector inside the bulk load: the
    count stays that of the rows, so the index does not reload on every recall."""
    clock = Clock()
    first = [lesson(f"rotate the signing keys of service {n}", clock, namespace=NS) for n in range(30)]
    store.import_lessons(first)
    again = [lesson(item.content, clock, namespace=NS, tags=["new-tag"]) for item in first[:10]]
    more = [lesson(f"vacuum table {n} weekly", clock, namespace=NS) for n in range(5)]
    assert store.import_lessons(again + more) == (5, 10)
    changes = store.vector_changes(NS, LEXICAL_SPACE, 0)
    assert changes.count == len(changes.rows) == 35

    loads = full_loads(store)
    index = LexicalIndex(store, NS)
    for n in range(5):
        assert search(index, store, ["signing", "service", str(n)], 3)
    assert loads == [LEXICAL_SPACE]  # the first load only


def test_a_store_count_that_drifted_costs_one_reload_not_one_a_search(store: SQLiteStore, caplog) -> None:
    clock = Clock()
    store.import_lessons(
        [lesson(f"rotate the signing keys of service {n}", clock, namespace=NS) for n in range(20)]
    )
    with store.dialect.tx() as conn:
        conn.execute("UPDATE vector_counts SET n = n - 3 WHERE model = ?", (LEXICAL_SPACE,))
    loads = full_loads(store)
    index = LexicalIndex(store, NS)
    for _ in range(5):
        assert len(search(index, store, ["signing", "keys"], 30)) == 20
    assert len(loads) <= 2 and "counts 17 term vectors but holds 20" in caplog.text
    # A real delete is still followed.
    victim = next(iter(stored(store)))
    store.delete_lesson(NS, victim)
    assert victim not in [i for i, _ in search(index, store, ["signing", "keys"], 30)]
    assert len(search(index, store, ["signing", "keys"], 30)) == 19
