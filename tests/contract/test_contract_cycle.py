"""The consolidation cycle through the bank, on every store: it proposes, a person decides; what is
approved is applied all or nothing and audited, can be reverted, and a rejected or applied
operation is not proposed again (a second cycle on an unchanged bank proposes nothing)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lessonbank import LessonBank
from lessonbank.errors import ConflictError, InputError, NotFoundError
from lessonbank.models import Lesson
from tests.contract.conftest import Clock

DAY = 86_400.0


def at(clock: Clock, days_ago: float = 0.0) -> datetime:
    return datetime.fromtimestamp(clock.now - days_ago * DAY, UTC)


def seeded(bank: LessonBank, clock: Clock) -> dict[str, Lesson]:
    """Two lessons that are the same lesson retyped (imported apart), one long unused and unimportant,
    a pinned one as unused, and a pair marked as contradicting when written."""
    rows = [
        {"id": "les_twin_a", "content": "Run the migrations before the deploy.", "access_count": 3},
        {"id": "les_twin_b", "content": "run migrations before a deploy", "tags": ["deploy"]},
        {"id": "les_stale", "content": "use the old staging vpn profile", "importance": 0.1},
        {"id": "les_pinned", "content": "never force-push to main", "importance": 0.1, "pinned": True},
        {"id": "les_yes", "content": "cache the auth token between calls"},
        {
            "id": "les_no",
            "content": "never cache the auth token between calls",
            "metadata": {"contradicts": [{"id": "les_yes", "similarity": 0.95, "by": "vector:test"}]},
        },
    ]
    for row in rows:
        old = 400 if row["id"] in ("les_stale", "les_pinned") else 1
        row.update(created_at=at(clock, old).isoformat(), updated_at=at(clock, old).isoformat())
    bank.import_lessons(rows)
    return {lesson.id: lesson for lesson in bank.lessons(limit=100)}


def kinds(proposal: object) -> list[str]:
    return sorted(op.kind for op in proposal.operations if op.status != "dropped")  # type: ignore[attr-defined]


def test_a_cycle_proposes_and_only_an_approval_applies(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank, clock)
        proposal = bank.consolidate()
        assert proposal is not None and proposal.status == "pending"
        assert kinds(proposal) == ["archive", "flag", "merge"]
        assert bank.proposals(status="pending")[0].id == proposal.id
        [run] = bank.dreams()
        assert (run.outcome, run.proposal_id, run.items_processed) == ("proposed", proposal.id, 6)
        # Nothing applied yet: all six lessons are live.
        assert len(bank.lessons(limit=100)) == 6

        applied = bank.approve(proposal.id, actor="alice")
        assert applied.status == "applied" and applied.decided_by == "alice"
        merge = next(op for op in applied.operations if op.kind == "merge")
        assert merge.lesson is not None
        live = {lesson.id: lesson for lesson in bank.lessons(limit=100)}
        assert set(live) == {merge.lesson.id, "les_pinned", "les_yes", "les_no"}
        merged = live[merge.lesson.id]
        # The merge keeps the most used twin's text, so it is written onto that twin.
        assert merged.id == "les_twin_a" and merged.source == "consolidation"
        assert merged.content == "Run the migrations before the deploy." and merged.access_count == 3
        assert sorted(merged.metadata["merged_from"]) == ["les_twin_a", "les_twin_b"]
        assert bank.get_lesson("les_twin_b").superseded_by == merged.id  # kept, never deleted
        assert bank.get_lesson("les_stale").status == "archived"
        assert [h.lesson.id for h in bank.recall("migrations deploy", k=5)] == [merged.id]
        rows = [row for row in bank.audit(limit=100) if row.proposal_id == proposal.id]
        assert sorted(row.action for row in rows) == ["archive", "merge", "supersede"]
        assert {row.actor for row in rows} == {"alice"}

        # Convergence: an unchanged bank gives nothing to propose, and says so in the dream log.
        assert bank.consolidate() is None
        assert bank.dreams()[0].outcome == "empty"
        with pytest.raises(InputError, match="only a pending proposal"):
            bank.approve(proposal.id)


def test_revert_puts_every_lesson_back(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        before = seeded(bank, clock)
        proposal = bank.consolidate()
        assert proposal is not None
        applied = bank.approve(proposal.id)
        merged_id = next(op.lesson.id for op in applied.operations if op.kind == "merge" and op.lesson)
        clock.advance(60)
        reverted = bank.revert(proposal.id)
        assert reverted.status == "reverted"
        live = {lesson.id: lesson for lesson in bank.lessons(limit=100)}
        assert set(live) == set(before)
        assert live["les_twin_b"].superseded_by is None and live["les_stale"].status == "active"
        assert merged_id == "les_twin_a" and live[merged_id].source == before[merged_id].source
        assert live[merged_id].tags == before[merged_id].tags
        assert any(row.action == "revert" for row in bank.audit(limit=100))


def test_a_lesson_changed_since_the_proposal_blocks_it_whole(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank, clock)
        proposal = bank.consolidate()
        assert proposal is not None
        clock.advance(5)
        edited = bank.get_lesson("les_stale").model_copy(update={"importance": 0.9, "updated_at": at(clock)})
        bank.store.update_lesson(edited)
        with pytest.raises(ConflictError) as refused:
            bank.approve(proposal.id)
        assert refused.value.record_id == "les_stale"
        assert len(bank.lessons(limit=100)) == 6  # the merge was not applied either
        assert bank.get_lesson("les_twin_b").superseded_by is None
        assert bank.proposal(proposal.id).status == "pending"


def test_rejected_and_partly_approved_operations_are_not_proposed_again(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank, clock)
        first = bank.consolidate()
        assert first is not None
        merge = next(op for op in first.operations if op.kind == "merge")
        partial = bank.approve(first.id, only=[merge.id])
        assert partial.status == "partially_applied"
        assert {op.kind: op.status for op in partial.operations} == {
            "merge": "applied",
            "archive": "rejected",
            "flag": "rejected",
        }
        assert bank.get_lesson("les_stale").status == "active"
        assert bank.consolidate() is None  # the archive was turned down, the flag was shown

    with LessonBank(store_url, clock=clock, worker=False, namespace="other") as other:
        seeded(other, clock)
        proposal = other.consolidate()
        assert proposal is not None
        rejected = other.reject(proposal.id, reason="not now")
        assert rejected.status == "rejected" and rejected.decision_reason == "not now"
        assert len(other.lessons(limit=100)) == 6
        assert other.consolidate() is None


def test_bad_decisions_are_clear_errors(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank, clock)
        proposal = bank.consolidate()
        assert proposal is not None
        with pytest.raises(InputError, match="no operation op_nope"):
            bank.approve(proposal.id, only=["op_nope"])
        with pytest.raises(InputError, match="list of operation ids"):
            bank.approve(proposal.id, only="op_x")
        with pytest.raises(InputError, match="only an applied one"):
            bank.revert(proposal.id)
        with pytest.raises(NotFoundError):
            bank.approve("prp_missing")
        with pytest.raises(InputError, match="unknown proposal status"):
            bank.proposals(status="done")
    with (
        LessonBank(store_url, clock=clock, worker=False, namespace="elsewhere") as other,
        pytest.raises(NotFoundError),
    ):
        other.approve(proposal.id)


def test_a_dry_run_stores_nothing(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank, clock)
        assert bank.consolidate(dry_run=True) is not None
        assert bank.proposals() == [] and bank.dreams() == []
        assert bank.consolidate() is not None  # nothing was remembered by the dry run


def test_bad_cycle_arguments_are_clear_errors_and_a_long_reason_is_cut(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        seeded(bank, clock)
        with pytest.raises(InputError, match="dry_run must be true or false"):
            bank.consolidate(dry_run="yes")  # type: ignore[arg-type]
        proposal = bank.consolidate()
        assert proposal is not None
        with pytest.raises(InputError):
            bank.reject(proposal.id, reason=42)  # type: ignore[arg-type]
        decided = bank.reject(proposal.id, reason="no\n" + "x" * 50_000)
        assert decided.decision_reason is not None and len(decided.decision_reason) == 1_000
        assert decided.decision_reason.startswith("no x")
