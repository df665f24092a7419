"""Store contract for hybrid recall: provenance, vectors, candidates, outcome credit, dedup and
supersession behave alike on every backend."""

from __future__ import annotations

import struct
import threading

import pytest

from lessonbank.models import LEARNED_FROM_MAX_CHARS, Decision, Episode, Lesson
from lessonbank.ports import Candidate, LessonQuery
from lessonbank.stores import Store
from tests.contract.conftest import Clock
from tests.contract.test_contract_jobs import A, job
from tests.contract.test_contract_lessons import at, lesson

NS = "default"
MODEL = "test-embedder"


def vec(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def found(store: Store, terms: list[str], **query: object) -> list[str]:
    return [c.lesson_id for c in store.search(LessonQuery(NS, **query), terms, 10)]  # type: ignore[arg-type]


# ------------------------------------------------------------------ provenance


def test_learned_from_is_cleaned_by_the_model() -> None:
    assert Lesson(content="x", learned_from="  deploy billing  ").learned_from == "deploy billing"
    assert Lesson(content="x", learned_from="   ").learned_from is None
    assert Lesson(content="x").learned_from is None
    long = Lesson(content="x", learned_from="a" * (LEARNED_FROM_MAX_CHARS + 500)).learned_from
    assert long is not None and len(long) == LEARNED_FROM_MAX_CHARS


def test_learned_from_roundtrips_and_is_matched_below_content(store: Store, clock: Clock) -> None:
    task = "Migrate the invoicing service from Flask to FastAPI"
    made = store.write_lesson(
        lesson("Pin pydantic before upgrading the web framework", clock, learned_from=task)
    ).lesson
    assert made.learned_from == task
    assert store.get_lesson(made.id).learned_from == task
    assert store.get_lessons([made.id])[0].learned_from == task
    assert [x.learned_from for x in store.list_lessons(LessonQuery(NS))] == [task]
    # A query on the provenance alone finds the lesson; its content does not hold the word.
    assert found(store, ["invoicing"]) == [made.id]
    assert found(store, ["fastapi", "flask"]) == [made.id]
    # The same word in the content of another lesson ranks above a provenance-only match.
    other = store.write_lesson(lesson("Invoicing totals are rounded per line", clock)).lesson
    assert found(store, ["invoicing"]) == [other.id, made.id]
    # Editing the provenance re-indexes it.
    store.update_lesson(
        store.get_lesson(made.id).model_copy(update={"learned_from": "Port the billing cron"})
    )
    assert found(store, ["invoicing"]) == [other.id]
    assert found(store, ["cron"]) == [made.id]
    # Export → import keeps it.
    exported = store.list_lessons(LessonQuery(NS))
    assert store.delete_lesson(NS, made.id)
    assert store.import_lessons([x for x in exported if x.id == made.id]) == (1, 0)
    assert store.get_lesson(made.id).learned_from == "Port the billing cron"
    assert found(store, ["cron"]) == [made.id]


def test_near_duplicate_check_compares_content_only(store: Store, clock: Clock) -> None:
    base = "always run the database migrations before starting the api server in staging"
    first = store.write_lesson(lesson(base, clock, learned_from="deploy the api")).lesson
    # Same provenance, different content: a new lesson.
    other = store.write_lesson(
        lesson("rotate the staging api keys monthly", clock, learned_from="deploy the api")
    )
    assert other.action == "added"
    # The same content retyped under another provenance: reinforced.
    again = store.write_lesson(lesson(base.capitalize() + ".", clock, learned_from="something else entirely"))
    assert again.action == "reinforced" and again.lesson.id == first.id


# ------------------------------------------------------------------ candidates


def test_search_candidates_carry_importance_and_credit(store: Store, clock: Clock) -> None:
    made = store.write_lesson(
        lesson("cache the wheel builds in ci", clock, importance=0.9, helpful=3, harmful=1)
    ).lesson
    [hit] = store.search(LessonQuery(NS), ["wheel"], 5)
    assert (hit.lesson_id, hit.importance, hit.helpful, hit.harmful) == (made.id, 0.9, 3, 1)
    assert hit.relevance > 0
    assert Candidate("x", 1.0, 0, 0.5, False, 0.0).importance == 0.5  # old constructors still work


def test_candidates_apply_every_filter_of_search(store: Store, clock: Clock) -> None:
    def add(content: str, **fields: object) -> str:
        return store.write_lesson(lesson(content, clock, **fields)).lesson.id

    plain = add("alpha one", tags=["x", "y"], task_type="code", agent="coder", goal_id="g1", importance=0.7)
    principle = add("alpha two", kind="principle", tags=["x"])
    pending = add("alpha three", status="pending")
    expiring = add("alpha four", expires_at=at(clock.now + 10))
    old = add("alpha five")
    new = store.write_lesson(lesson("alpha six", clock, supersedes=old)).lesson.id
    elsewhere = store.write_lesson(lesson("alpha seven", clock, namespace="other")).lesson.id
    every = [plain, principle, pending, expiring, old, new, elsewhere, "les_missing", plain]
    clock.advance(11)

    def cands(**query: object) -> list[str]:
        return [c.lesson_id for c in store.candidates(LessonQuery(NS, **query), every)]  # type: ignore[arg-type]

    assert cands() == [plain, principle, new]  # active, live, this namespace, in the order given
    assert cands(kinds=["principle"]) == [principle]
    assert cands(tags=["x", "y"]) == [plain]
    assert cands(task_type="code") == cands(agent="coder") == cands(goal_id="g1") == [plain]
    assert cands(statuses=["pending"]) == [pending]
    assert cands(statuses=[]) == [plain, principle, pending, new]
    assert store.candidates(LessonQuery(NS), []) == []
    [first] = store.candidates(LessonQuery(NS), [plain])
    assert first.relevance == 0.0 and first.importance == 0.7 and first.confidence == 0.5
    # search applies the very same filters
    searched = {c.lesson_id for c in store.search(LessonQuery(NS, statuses=[]), ["alpha"], 20)}
    assert searched == {plain, principle, pending, new}


# ------------------------------------------------------------------ vectors


def test_vectors_put_replace_hashes_and_changes(store: Store, clock: Clock) -> None:
    a = store.write_lesson(lesson("first lesson text", clock)).lesson.id
    b = store.write_lesson(lesson("second lesson text", clock)).lesson.id
    empty = store.vector_changes(NS, MODEL, 0)
    assert (empty.rows, empty.count) == ([], 0) and empty.seq >= 0

    assert (
        store.put_vectors(
            NS, MODEL, [(a, "ha1", vec(1, 0)), (b, "hb1", vec(0, 1)), ("les_gone", "h", vec(1, 1))]
        )
        == 2
    )
    assert store.vector_hashes(NS, MODEL, [a, b, "les_gone"]) == {a: "ha1", b: "hb1"}
    assert store.vector_hashes(NS, "other-model", [a, b]) == {}
    assert store.vector_hashes("other", MODEL, [a]) == {}
    full = store.vector_changes(NS, MODEL, 0)
    assert sorted(full.rows) == sorted([(a, vec(1, 0)), (b, vec(0, 1))])
    assert full.count == 2 and full.seq > empty.seq

    # Replacing a vector gives it a new, higher sequence; only it comes back after the last seq.
    assert store.put_vectors(NS, MODEL, [(a, "ha2", vec(0.6, 0.8))]) == 1
    later = store.vector_changes(NS, MODEL, full.seq)
    assert later.rows == [(a, vec(0.6, 0.8))] and later.count == 2 and later.seq > full.seq
    assert store.vector_hashes(NS, MODEL, [a]) == {a: "ha2"}
    nothing = store.vector_changes(NS, MODEL, later.seq)
    assert nothing.rows == [] and nothing.seq == later.seq and nothing.count == 2

    # Another model and another namespace are apart.
    store.put_vectors(NS, "other-model", [(a, "x", vec(1, 1, 1))])
    assert store.vector_changes(NS, MODEL, later.seq).rows == []
    assert store.vector_changes(NS, "other-model", 0).count == 1
    assert store.put_vectors("other", MODEL, [(a, "x", vec(1, 1))]) == 0  # not a lesson of "other"

    # Updating the content keeps the vector: its stale text hash tells the engine to re-embed.
    stored = store.get_lesson(a)
    store.update_lesson(stored.model_copy(update={"content": "first lesson text, edited"}))
    assert store.vector_hashes(NS, MODEL, [a]) == {a: "ha2"}


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 50])
def test_vector_changes_read_a_page_at_a_time(store: Store, clock: Clock, limit: int) -> None:
    """Pages of ``limit`` rows in sequence order, each ending where the next starts, give what one
    read gives; the last page carries the store's sequence and count."""
    ids = [store.write_lesson(lesson(f"paged lesson number {n} text", clock)).lesson.id for n in range(12)]
    for n, lesson_id in enumerate(ids):
        store.put_vectors(NS, MODEL, [(lesson_id, f"h{n}", vec(n, 1))])
    for n in (3, 0, 7):  # rewritten: each moves to the end of the sequence
        store.put_vectors(NS, MODEL, [(ids[n], f"again{n}", vec(n, 2))])
    whole = store.vector_changes(NS, MODEL, 0)
    assert not whole.more
    assert [lesson_id for lesson_id, _ in whole.rows[-3:]] == [ids[3], ids[0], ids[7]]
    rows, after, pages = [], 0, []
    while True:
        page = store.vector_changes(NS, MODEL, after, limit)
        pages.append(page)
        assert len(page.rows) <= limit
        rows += page.rows
        if not page.more:
            break
        assert len(page.rows) == limit and page.seq > after
        after = page.seq
    assert rows == whole.rows
    assert (pages[-1].seq, pages[-1].count) == (whole.seq, whole.count) == (whole.seq, 12)
    assert len(pages) == -(-12 // limit)  # a full last page says no more when it reaches the top
    tail = store.vector_changes(NS, MODEL, whole.seq, limit)
    assert (tail.rows, tail.more, tail.seq) == ([], False, whole.seq)


@pytest.mark.parametrize("limit", [0, -1, True, 2.5, "3"])
def test_a_page_of_vector_changes_holds_one_row_or_more(store: Store, limit: object) -> None:
    with pytest.raises(ValueError, match="1 row or more"):
        store.vector_changes(NS, MODEL, 0, limit)  # type: ignore[arg-type]


def test_vectors_go_with_their_lesson(store: Store, clock: Clock) -> None:
    a = store.write_lesson(lesson("keep me around", clock)).lesson.id
    b = store.write_lesson(lesson("forget me soon", clock)).lesson.id
    c = store.write_lesson(lesson("expire me quickly", clock, expires_at=at(clock.now + 5))).lesson.id
    store.put_vectors(NS, MODEL, [(a, "h", vec(1)), (b, "h", vec(2)), (c, "h", vec(3))])
    store.put_vectors(NS, "other-model", [(b, "h", vec(4))])
    seq = store.vector_changes(NS, MODEL, 0).seq
    assert store.delete_lesson(NS, b)
    changes = store.vector_changes(NS, MODEL, seq)
    assert changes.rows == [] and changes.count == 2  # the count tells a cache to reload
    assert store.vector_changes(NS, "other-model", 0).count == 0
    assert store.vector_hashes(NS, MODEL, [b]) == {}
    clock.advance(6)
    assert store.purge_expired(NS) == 1
    assert sorted(store.vector_changes(NS, MODEL, 0).rows) == [(a, vec(1))]
    # A lesson written again under a deleted one's content starts without a vector.
    again = store.write_lesson(lesson("forget me soon", clock)).lesson.id
    assert store.vector_hashes(NS, MODEL, [again]) == {}


def test_lessons_missing_vectors_oldest_first(store: Store, clock: Clock) -> None:
    made = []
    for n, status in enumerate(["active", "pending", "active", "archived"]):
        made.append(store.write_lesson(lesson(f"distinct lesson number {n}", clock, status=status)).lesson.id)
        clock.advance(1)
    store.write_lesson(lesson("a lesson elsewhere", clock, namespace="other"))
    assert [x.id for x in store.lessons_missing_vectors(NS, MODEL, 10)] == made
    assert [x.id for x in store.lessons_missing_vectors(NS, MODEL, 2)] == made[:2]
    store.put_vectors(NS, MODEL, [(made[0], "h", vec(1)), (made[2], "h", vec(1))])
    assert [x.id for x in store.lessons_missing_vectors(NS, MODEL, 10)] == [made[1], made[3]]
    assert [x.id for x in store.lessons_missing_vectors(NS, "other-model", 10)] == made
    store.put_vectors(NS, MODEL, [(made[1], "h", vec(1)), (made[3], "h", vec(1))])
    assert store.lessons_missing_vectors(NS, MODEL, 10) == []


# ------------------------------------------------------------------ outcome credit


def test_credit_lessons_adds_atomically(store: Store, clock: Clock) -> None:
    a = store.write_lesson(lesson("credit me first", clock)).lesson.id
    b = store.write_lesson(lesson("credit me second", clock, helpful=2)).lesson.id
    assert store.credit_lessons(NS, [a, b, "les_missing"], helpful=1) == 2
    assert store.credit_lessons(NS, [a], harmful=2) == 1
    assert store.credit_lessons("other", [a], helpful=5) == 0  # another namespace's ids are unknown here
    assert store.credit_lessons(NS, [], helpful=1) == 0
    first, second = store.get_lessons([a, b])
    assert (first.helpful, first.harmful, second.helpful, second.harmful) == (1, 2, 3, 0)
    # Counters survive a reinforcement and show in recall candidates.
    store.write_lesson(lesson("credit me first", clock))
    assert store.get_lesson(a).helpful == 1 and store.get_lesson(a).access_count == 1
    [hit] = store.search(LessonQuery(NS), ["first"], 5)
    assert (hit.helpful, hit.harmful) == (1, 2)
    assert [x.id for x in store.list_lessons(LessonQuery(NS), sort="utility")] == [b, a]


def test_record_episode_credits_the_injected_lessons(store: Store, clock: Clock) -> None:
    a = store.write_lesson(lesson("the first injected lesson", clock)).lesson.id
    b = store.write_lesson(lesson("the second injected lesson", clock)).lesson.id
    far = store.write_lesson(lesson("a lesson of another namespace", clock, namespace="other")).lesson.id
    skip = Decision(reflect=False, reason="skip")

    def record(status: str, context: list[str], *, credit: bool = True) -> Episode:
        episode = Episode(
            task="t", status=status, namespace=NS, context_ids=context, created_at=at(clock.now)
        )  # type: ignore[arg-type]
        store.record_episode(episode, skip, None, credit=credit)
        return episode

    def counts(lesson_id: str) -> tuple[int, int]:
        stored = store.get_lesson(lesson_id)
        return stored.helpful, stored.harmful

    done = record("success", [a, b, "les_missing", far])
    assert counts(a) == counts(b) == (1, 0) and counts(far) == (0, 0)
    store.record_episode(done, skip, None)  # a repeated episode credits nothing more
    assert counts(a) == (1, 0)
    record("failure", [a])
    assert counts(a) == (1, 1)
    record("partial", [a, b])
    assert counts(a) == (1, 1) and counts(b) == (1, 0)
    record("failure", [b], credit=False)
    assert counts(b) == (1, 0)
    record("success", [])
    assert counts(a) == (1, 1)


# ------------------------------------------------------------------ dedup and supersession


def test_duplicate_of_reinforces_the_named_lesson(store: Store, clock: Clock) -> None:
    kept = store.write_lesson(
        lesson("Use exponential backoff for the payment api", clock, tags=["api"])
    ).lesson
    clock.advance(5)
    result = store.write_lesson(
        lesson("Retry payment calls with growing delays", clock, tags=["retry"]), duplicate_of=kept.id
    )
    assert result.action == "reinforced" and result.lesson.id == kept.id
    stored = store.get_lesson(kept.id)
    assert stored.access_count == 1 and stored.confidence == pytest.approx(0.55)
    assert stored.tags == ["api", "retry"] and stored.content == kept.content
    assert len(store.list_lessons(LessonQuery(NS))) == 1
    # A missing, superseded or other-namespace target is no target: the lesson is added.
    assert store.write_lesson(lesson("one new text", clock), duplicate_of="les_missing").action == "added"
    other = store.write_lesson(lesson("elsewhere text", clock, namespace="other")).lesson
    assert store.write_lesson(lesson("two new text", clock), duplicate_of=other.id).action == "added"
    store.write_lesson(lesson("three new text", clock, supersedes=kept.id))
    assert store.write_lesson(lesson("four new text", clock), duplicate_of=kept.id).action == "added"


def test_supersedes_marks_the_old_lesson_which_is_no_longer_recalled(store: Store, clock: Clock) -> None:
    old = store.write_lesson(lesson("deploy the billing service on fridays", clock)).lesson
    store.put_vectors(NS, MODEL, [(old.id, "h", vec(1))])
    new = store.write_lesson(lesson("never deploy the billing service on fridays", clock, supersedes=old.id))
    assert new.action == "added"
    kept = store.get_lesson(old.id)
    assert kept.superseded_by == new.lesson.id and kept.content == old.content
    assert found(store, ["billing", "fridays"]) == [new.lesson.id]
    assert [c.lesson_id for c in store.candidates(LessonQuery(NS), [old.id, new.lesson.id])] == [
        new.lesson.id
    ]
    assert [x.id for x in store.list_lessons(LessonQuery(NS))] == [new.lesson.id]
    assert store.vector_hashes(NS, MODEL, [old.id]) == {old.id: "h"}  # kept, vector included
    # Superseding again does not move an already superseded lesson; a missing id is ignored.
    third = store.write_lesson(lesson("deploy billing on mondays only", clock, supersedes=old.id)).lesson
    assert store.get_lesson(old.id).superseded_by == new.lesson.id
    assert (
        store.write_lesson(lesson("unrelated words here", clock, supersedes="les_missing")).action == "added"
    )
    # Through a job's result too, in the job's transaction.
    store.enqueue_job(job(clock))
    leased = store.lease_job(A, None, 60)
    assert leased is not None
    newest = lesson("deploy billing on tuesdays only", clock, supersedes=third.id)
    store.finish_job(leased.id, A, reflection=None, lessons=[newest], detail="ok")
    assert store.get_lesson(third.id).superseded_by == newest.id
    assert found(store, ["mondays"]) == []


def test_a_reader_following_vector_changes_misses_no_write(
    store: Store, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers racing each other while a reader follows ``vector_changes(after=seq)``: once they are
    done, one more read leaves the reader with exactly the stored vectors, without a reload."""
    import lessonbank.stores.redis.vectors as redis_store

    monkeypatch.setattr(redis_store, "VECTOR_PAGE", 7)  # several pages per read on Redis
    made = [f"les_{n}" for n in range(24)]
    store.import_lessons([lesson(f"vector race lesson {n}", clock, id=made[n]) for n in range(24)])
    errors: list[BaseException] = []

    def writer(offset: int) -> None:
        try:
            for round_ in range(15):
                rows = [(made[n], f"h{round_}", vec(offset, round_, n)) for n in range(offset, 24, 4)]
                store.put_vectors(NS, MODEL, rows)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    seen: dict[str, bytes] = {}
    seq = 0

    def follow() -> int:
        nonlocal seq
        changes = store.vector_changes(NS, MODEL, seq)
        seen.update(changes.rows)
        seq = changes.seq
        return changes.count

    threads = [threading.Thread(target=writer, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        follow()
    for thread in threads:
        thread.join()
    assert not errors
    assert follow() == len(seen) == 24
    assert seen == dict(store.vector_changes(NS, MODEL, 0).rows)
    assert all(seen[made[n]] == vec(n % 4, 14, n) for n in range(24))
