"""Consolidation records on every store: proposals, the dream log, cycle state, and a proposal's
all-or-nothing apply (merge, archive, conflicts)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lessonbank.errors import ConflictError, InputError, NotFoundError
from lessonbank.models import AuditEntry, Lesson
from lessonbank.ports import LessonQuery, Store
from lessonbank.proposals import DreamRun, Operation, Proposal
from lessonbank.stores.sql.migrations.sqlite import MIGRATIONS
from lessonbank.stores.sql.sqlite import split_sql
from lessonbank.stores.sql.sqlite_search import register_functions
from lessonbank.stores.sqlite import SQLiteStore
from lessonbank.text import keywords
from tests.contract.conftest import Clock
from tests.contract.test_sqlite_migrations import OLD_VERSION, old_bank

NS = "team"


def at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def proposal(clock: Clock, namespace: str = NS, **fields: object) -> Proposal:
    fields.setdefault("created_at", at(clock.now))
    return Proposal(namespace=namespace, cycle_id="cyc_test", **fields)  # type: ignore[arg-type]


def stored_lesson(store: Store, clock: Clock, content: str, **fields: object) -> Lesson:
    fields.setdefault("created_at", at(clock.now))
    fields.setdefault("updated_at", at(clock.now))
    return store.write_lesson(Lesson(content=content, namespace=NS, **fields)).lesson  # type: ignore[arg-type]


def found(store: Store, text: str) -> list[str]:
    return [c.lesson_id for c in store.search(LessonQuery(NS), keywords(text), 10)]


# ------------------------------------------------------------------ records


def test_proposals_round_trip_newest_first_by_status(store: Store, clock: Clock) -> None:
    first = proposal(clock, summary="first", operations=[Operation(kind="evolve", text="a note")])
    store.save_proposal(first)
    assert store.get_proposal(first.id, namespace=NS) == first
    clock.advance(10)
    second = proposal(clock, summary="second", based_on={"les_x": at(clock.now - 5)})
    store.save_proposal(second)
    clock.advance(10)
    third = proposal(clock, summary="third", status="rejected")
    store.save_proposal(third)
    store.save_proposal(proposal(clock, namespace="other"))
    assert [p.id for p in store.list_proposals(NS)] == [third.id, second.id, first.id]
    assert [p.id for p in store.list_proposals(NS, statuses=["pending"])] == [second.id, first.id]
    assert [p.id for p in store.list_proposals(NS, limit=2)] == [third.id, second.id]
    assert [p.id for p in store.list_proposals(NS, statuses=["pending"], limit=1)] == [second.id]
    assert store.list_proposals(NS, statuses=["applied"]) == []
    assert store.list_proposals("nobody") == []
    # Saving again replaces it.
    decided = first.model_copy(
        update={"status": "rejected", "decided_by": "alice", "decided_at": at(clock.now)}
    )
    store.save_proposal(decided)
    assert store.get_proposal(first.id, namespace=NS) == decided
    assert [p.id for p in store.list_proposals(NS, statuses=["rejected"])] == [third.id, first.id]
    assert store.get_proposal(second.id, namespace=NS).based_on == second.based_on
    with pytest.raises(NotFoundError):
        store.get_proposal(first.id, namespace="other")
    with pytest.raises(NotFoundError):
        store.get_proposal("prp_nothing", namespace=NS)
    with pytest.raises(InputError):  # another namespace's id
        store.save_proposal(first.model_copy(update={"namespace": "other"}))


def test_dream_log_round_trip_newest_first(store: Store, clock: Clock) -> None:
    started = DreamRun(namespace=NS, started_at=at(clock.now), trigger="inactivity")
    store.save_dream(started)
    clock.advance(60)
    later = DreamRun(namespace=NS, started_at=at(clock.now), outcome="failed", error="budget")
    store.save_dream(later)
    store.save_dream(DreamRun(namespace="other", started_at=at(clock.now)))
    ended = started.model_copy(
        update={"duration_s": 12.5, "items_processed": 7, "outcome": "proposed", "proposal_id": "prp_1"}
    )
    store.save_dream(ended)  # written again when it ends: replaced
    assert store.dreams(NS) == [later, ended]
    assert store.dreams(NS, limit=1) == [later]
    assert store.dreams("nobody") == []


def test_cycle_state_round_trip_per_namespace(store: Store) -> None:
    assert store.cycle_state(NS) == {}
    state = {"last_reflection": 1_800_000_000.5, "rejected": ["abc", "def"], "runs": 3}
    store.set_cycle_state(NS, state)
    assert store.cycle_state(NS) == state
    assert store.cycle_state("other") == {}
    store.set_cycle_state(NS, {"runs": 4})
    assert store.cycle_state(NS) == {"runs": 4}


# ------------------------------------------------------------------ apply


def merge_of(store: Store, clock: Clock) -> tuple[Lesson, Lesson, Lesson, Proposal]:
    """Two stored lessons and a pending proposal merging them into a new one."""
    a = stored_lesson(store, clock, "restart the flaky runner before retrying the deploy job", tags=["ci"])
    b = stored_lesson(store, clock, "when the deploy pipeline stalls, bounce the build runner first")
    clock.advance(100)
    merged = Lesson(
        content="when a deploy stalls, restart the zeppelin runner once before retrying the job",
        namespace=NS,
        source="consolidation",
        tags=["ci", "deploy"],
        created_at=at(clock.now),
        updated_at=at(clock.now),
    )
    op = Operation(kind="merge", lesson_ids=[a.id, b.id], lesson=merged, reason="same advice twice")
    made = proposal(clock, operations=[op], based_on={a.id: a.updated_at, b.id: b.updated_at})
    store.save_proposal(made)
    return a, b, merged, made


def merge_writes(clock: Clock, a: Lesson, b: Lesson, merged: Lesson) -> list[Lesson]:
    now = at(clock.now)
    return [
        merged,
        a.model_copy(update={"superseded_by": merged.id, "updated_at": now}),
        b.model_copy(update={"superseded_by": merged.id, "updated_at": now}),
    ]


def audit_for(made: Proposal, writes: list[Lesson], olds: list[Lesson | None]) -> list[AuditEntry]:
    return [
        AuditEntry(namespace=NS, actor="reflection:cyc_test", action="edit", proposal_id=made.id).of(old, new)
        for new, old in zip(writes, olds, strict=True)
    ]


def test_apply_a_merge(store: Store, clock: Clock) -> None:
    a, b, merged, made = merge_of(store, clock)
    assert found(store, "zeppelin") == []
    clock.advance(10)
    writes = merge_writes(clock, a, b, merged)
    applied = made.model_copy(
        update={"status": "applied", "decided_by": "alice", "decided_at": at(clock.now)}
    )
    store.apply_proposal(applied, writes, audit_for(made, writes, [None, a, b]))
    assert found(store, "zeppelin") == [merged.id]
    assert found(store, "flaky") == [] and found(store, "bounce") == []  # the sources are not live
    assert [x.id for x in store.list_lessons(LessonQuery(NS))] == [merged.id]
    assert {x.id for x in store.list_lessons(LessonQuery(NS, live_only=False))} == {a.id, b.id, merged.id}
    assert store.get_lesson(a.id).superseded_by == merged.id
    assert store.get_lesson(b.id).superseded_by == merged.id
    assert store.get_lesson(merged.id, namespace=NS).content == merged.content
    rows = store.audit_log(NS)
    assert {e.lesson_id for e in rows} == {merged.id, a.id, b.id}
    assert {e.proposal_id for e in rows} == {made.id}
    assert store.get_proposal(made.id, namespace=NS) == applied
    assert [p.id for p in store.list_proposals(NS, statuses=["applied"])] == [made.id]
    # The merged lesson is written like any other: its content reinforces it.
    again = store.write_lesson(merged.model_copy(update={"id": "les_again"}))
    assert (again.action, again.lesson.id) == ("reinforced", merged.id)


def test_apply_an_archive(store: Store, clock: Clock) -> None:
    old = stored_lesson(store, clock, "use the legacy zeppelin deploy script for hotfixes")
    made = proposal(
        clock,
        operations=[Operation(kind="archive", lesson_ids=[old.id], score=0.01)],
        based_on={old.id: old.updated_at},
    )
    store.save_proposal(made)
    clock.advance(5)
    archived = old.model_copy(update={"status": "archived", "updated_at": at(clock.now)})
    entry = AuditEntry(namespace=NS, actor="reflection:cyc_test", action="archive", proposal_id=made.id)
    store.apply_proposal(made.model_copy(update={"status": "applied"}), [archived], [entry.of(old, archived)])
    assert store.get_lesson(old.id).status == "archived"
    assert found(store, "zeppelin") == []
    assert [x.id for x in store.list_lessons(LessonQuery(NS, statuses=["archived"]))] == [old.id]
    (row,) = store.audit_log(NS, lesson_id=old.id)
    assert row.action == "archive" and row.before is not None and row.before["status"] == "active"
    assert store.get_proposal(made.id, namespace=NS).status == "applied"


def test_apply_writes_the_cycle_state_with_the_proposal(store: Store, clock: Clock) -> None:
    store.set_cycle_state(NS, {"last_reflection": "2026-01-01T00:00:00+00:00", "documents": {"count": 1}})
    store.set_cycle_state("other", {"documents": {"core_memory": "theirs"}})
    made = proposal(clock, core_memory="## Critical Facts\n- ours")
    store.save_proposal(made)
    state = {"last_reflection": "2026-01-01T00:00:00+00:00", "documents": {"count": 1, "core_memory": "ours"}}
    store.apply_proposal(made.model_copy(update={"status": "applied"}), [], [], state=state)
    assert store.cycle_state(NS) == state
    assert store.cycle_state("other") == {"documents": {"core_memory": "theirs"}}
    assert store.get_proposal(made.id, namespace=NS).status == "applied"


def test_a_refused_apply_leaves_the_cycle_state(store: Store, clock: Clock) -> None:
    a, b, merged, made = merge_of(store, clock)
    store.set_cycle_state(NS, {"documents": {"core_memory": "before"}})
    clock.advance(10)
    store.update_lesson(b.model_copy(update={"tags": ["edited"], "updated_at": at(clock.now)}))
    writes = merge_writes(clock, a, b, merged)
    with pytest.raises(ConflictError):
        store.apply_proposal(
            made.model_copy(update={"status": "applied"}),
            writes,
            audit_for(made, writes, [None, a, b]),
            state={"documents": {"core_memory": "after"}},
        )
    assert store.cycle_state(NS) == {"documents": {"core_memory": "before"}}


def test_a_source_edited_since_the_proposal_conflicts_and_nothing_is_written(
    store: Store, clock: Clock
) -> None:
    a, b, merged, made = merge_of(store, clock)
    clock.advance(10)
    edited = store.update_lesson(b.model_copy(update={"tags": ["edited"], "updated_at": at(clock.now)}))
    clock.advance(10)
    writes = merge_writes(clock, a, b, merged)  # b is written last: the first two checks pass
    with pytest.raises(ConflictError) as caught:
        store.apply_proposal(
            made.model_copy(update={"status": "applied"}), writes, audit_for(made, writes, [None, a, b])
        )
    assert caught.value.record_id == b.id and "changed since the proposal was made" in str(caught.value)
    with pytest.raises(NotFoundError):
        store.get_lesson(merged.id)
    assert found(store, "zeppelin") == []
    assert store.get_lesson(a.id) == a and store.get_lesson(b.id) == edited
    assert sorted(found(store, "runner")) == sorted([a.id, b.id])
    assert store.audit_log(NS) == []
    assert store.get_proposal(made.id, namespace=NS) == made


def test_a_failure_after_the_lessons_are_written_rolls_them_back(
    store: Store, backend: str, clock: Clock
) -> None:
    if backend not in ("sqlite", "postgres"):
        pytest.skip("only the SQL stores can fail inside the transaction (an audit id already taken)")
    a, b, merged, made = merge_of(store, clock)
    writes = merge_writes(clock, a, b, merged)
    rows = audit_for(made, writes, [None, a, b])
    store.append_audit([rows[2]])
    with pytest.raises(Exception):  # noqa: B017 - the database's own integrity error
        store.apply_proposal(made.model_copy(update={"status": "applied"}), writes, rows)
    assert store.get_lessons([merged.id]) == [] and found(store, "zeppelin") == []
    assert store.get_lesson(a.id) == a and store.get_lesson(b.id) == b
    assert [e.id for e in store.audit_log(NS)] == [rows[2].id]
    assert store.get_proposal(made.id, namespace=NS) == made


def test_a_stored_lesson_missing_from_based_on_conflicts(store: Store, clock: Clock) -> None:
    a, b, merged, made = merge_of(store, clock)
    writes = merge_writes(clock, a, b, merged)
    partial = made.model_copy(update={"based_on": {a.id: a.updated_at}})
    with pytest.raises(ConflictError) as caught:
        store.apply_proposal(partial, writes, [])
    assert caught.value.record_id == b.id
    assert store.get_lesson(a.id).superseded_by is None and store.get_lessons([merged.id]) == []


def test_a_new_lesson_with_a_live_lessons_content_conflicts(store: Store, clock: Clock) -> None:
    live = stored_lesson(store, clock, "pin the base image digest in every dockerfile")
    other = stored_lesson(store, clock, "vacuum the analytics tables weekly")
    copy = Lesson(
        content="Pin the base image digest in every Dockerfile", namespace=NS, source="consolidation"
    )
    archived = other.model_copy(update={"status": "archived"})
    made = proposal(clock, based_on={other.id: other.updated_at})
    with pytest.raises(ConflictError) as caught:
        store.apply_proposal(made, [archived, copy], [AuditEntry(namespace=NS, actor="x", action="archive")])
    assert caught.value.record_id == copy.id
    assert store.get_lessons([copy.id]) == [] and store.get_lesson(other.id).status == "active"
    assert [x.id for x in store.list_lessons(LessonQuery(NS))] == [other.id, live.id]
    assert store.audit_log(NS) == []
    with pytest.raises(NotFoundError):
        store.get_proposal(made.id, namespace=NS)
    # Two new lessons with one content conflict too.
    twin = copy.model_copy(update={"id": "les_twin", "content": "a brand new zeppelin lesson"})
    with pytest.raises(ConflictError):
        store.apply_proposal(made, [twin, twin.model_copy(update={"id": "les_twin2"})], [])
    assert store.get_lessons(["les_twin", "les_twin2"]) == []


def test_apply_refuses_another_namespaces_lesson(
    store: Store, clock: Clock, open_url: Callable[[str], Store]
) -> None:
    theirs = store.write_lesson(
        Lesson(content="keep the cache warm before a release", namespace="other")
    ).lesson
    made = proposal(clock, based_on={theirs.id: theirs.updated_at})
    with pytest.raises(InputError):
        store.apply_proposal(made, [theirs.model_copy(update={"status": "archived"})], [])
    with pytest.raises(InputError):
        store.apply_proposal(made, [theirs.model_copy(update={"namespace": NS, "status": "archived"})], [])
    assert store.get_lesson(theirs.id).status == "active" and store.list_lessons(LessonQuery(NS)) == []


# ------------------------------------------------------------------ SQLite migration


def test_a_sqlite_file_from_before_consolidation_opens_and_applies(tmp_path: Path) -> None:
    """A file written at schema 4 (audit log, no consolidation tables) gains them on open."""
    path = tmp_path / "old.db"
    old_bank(path, ["rotate the signing keys every quarter"])
    conn = sqlite3.connect(path, isolation_level=None)
    register_functions(conn)  # migration 3's backfill and triggers call them
    for migration in MIGRATIONS[OLD_VERSION:4]:
        for statement in split_sql(migration):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 4")
    conn.close()
    clock = Clock()
    store = SQLiteStore(path, clock=clock)
    try:
        assert store.dialect.connection().execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        old = store.get_lesson("les_old0")
        made = Proposal(namespace="default", cycle_id="cyc_old", based_on={old.id: old.updated_at})
        archived = old.model_copy(update={"status": "archived"})
        store.apply_proposal(made, [archived], [])
        assert store.get_lesson(old.id).status == "archived"
        assert store.search(LessonQuery("default"), ["signing"], 5) == []
        assert len(store.search(LessonQuery("default", statuses=["archived"]), ["signing"], 5)) == 1
        assert store.get_proposal(made.id, namespace="default") == made
        store.set_cycle_state("default", {"runs": 1})
        assert store.cycle_state("default") == {"runs": 1}
    finally:
        store.close()


def test_apply_keeps_a_pools_cap(store: Store, clock: Clock) -> None:
    goal = {"kind": "insight", "goal_id": "g1"}
    for n, word in enumerate(["alpha", "bravo", "charlie"]):
        stored_lesson(store, clock, f"insight {word} about the release goal", importance=0.5 + n / 10, **goal)
        clock.advance(1)
    new = Lesson(content="insight zeppelin about the release goal", namespace=NS, importance=0.9, **goal)  # type: ignore[arg-type]
    store.apply_proposal(proposal(clock), [new], [])
    pool = store.list_lessons(LessonQuery(NS, kinds=["insight"], goal_id="g1"))
    assert len(pool) == 3 and new.id in {x.id for x in pool}
