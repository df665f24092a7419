"""A FLAG is a decision, on every store: keep A, keep B, keep both with narrower scopes, or dismiss;
applied with the rest of the approval, audited, revertible; a dismissed flag is not proposed again;
an open flag is listed for the pages that show a lesson."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lessonbank import LessonBank
from lessonbank.errors import InputError
from lessonbank.proposals import Operation, Proposal
from tests.contract.conftest import Clock

DAY = 86_400.0


def seeded(bank: LessonBank, clock: Clock) -> tuple[Proposal, Operation]:
    """Two lessons marked as contradicting when written, and the cycle's proposal flagging them."""
    when = datetime.fromtimestamp(clock.now - DAY, UTC).isoformat()
    mark = {"contradicts": [{"id": "les_yes", "similarity": 0.95, "by": "vector:test"}]}
    bank.import_lessons(
        [
            {"id": "les_yes", "content": "Cache the auth token between calls.", "created_at": when},
            {
                "id": "les_no",
                "content": "Never cache the auth token between calls.",
                "metadata": mark,
                "created_at": when,
            },
        ]
    )
    proposal = bank.consolidate()
    assert proposal is not None
    [flag] = [op for op in proposal.operations if op.kind == "flag" and op.status != "dropped"]
    return proposal, flag


def side(flag: Operation, letter: str) -> str:
    return flag.lesson_ids[0 if letter == "a" else 1]


@pytest.mark.parametrize("choice", ["keep-a", "keep-b"])
def test_keeping_one_archives_the_other_audited_and_revertible(
    store_url: str, clock: Clock, choice: str
) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        proposal, flag = seeded(bank, clock)
        assert bank.services.consolidation.open_flags() == {
            "les_no": ["les_yes"],
            "les_yes": ["les_no"],
        }
        decided = bank.approve(proposal.id, edits={flag.id: f"decision: {choice}"}, actor="alice")
        [done] = [op for op in decided.operations if op.kind == "flag"]
        assert (done.status, done.decision) == ("applied", choice)
        kept, gone = (
            (side(flag, "a"), side(flag, "b")) if choice == "keep-a" else (side(flag, "b"), side(flag, "a"))
        )
        assert bank.get_lesson(kept).status == "active"
        assert bank.get_lesson(gone).status == "archived"
        [row] = [r for r in bank.audit(limit=50) if r.proposal_id == proposal.id]
        assert (row.action, row.lesson_id, row.actor) == ("archive", gone, "alice")
        assert bank.services.consolidation.open_flags() == {}
        bank.revert(proposal.id)
        assert bank.get_lesson(gone).status == "active"


def test_keeping_both_narrows_each_scope_and_text(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        proposal, flag = seeded(bank, clock)
        a, b = side(flag, "a"), side(flag, "b")
        text = "\n".join(
            [
                "decision: both",
                "a.agent: fetcher",
                "a.task_type: ",
                "b.agent: ",
                "b.task_type: security",
                "b.text: Never cache the auth token between calls in security reviews.",
            ]
        )
        bank.approve(proposal.id, edits={flag.id: text})
        first, second = bank.get_lesson(a), bank.get_lesson(b)
        assert (first.agent, first.task_type, first.status) == ("fetcher", None, "active")
        assert (second.agent, second.task_type) == (None, "security")
        assert second.content == "Never cache the auth token between calls in security reviews."
        assert {r.action for r in bank.audit(limit=50) if r.proposal_id == proposal.id} == {"edit"}
        assert bank.consolidate() is None  # decided: not proposed again


def test_both_without_a_change_is_refused_and_nothing_is_applied(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        proposal, flag = seeded(bank, clock)
        with pytest.raises(InputError, match="changes neither lesson"):
            bank.approve(proposal.id, edits={flag.id: "decision: both"})
        assert bank.proposal(proposal.id).status == "pending"
        with pytest.raises(InputError, match="unknown decision"):
            bank.approve(proposal.id, edits={flag.id: "decision: keep-both"})


def test_a_dismissed_flag_is_recorded_and_not_proposed_again(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        proposal, flag = seeded(bank, clock)
        bank.approve(proposal.id, edits={flag.id: "decision: dismiss"})
        assert bank.get_lesson("les_yes").metadata["not_contradicting"] == ["les_no"]
        assert bank.get_lesson("les_no").metadata["not_contradicting"] == ["les_yes"]
        assert bank.get_lesson("les_yes").status == bank.get_lesson("les_no").status == "active"
        rows = [r for r in bank.audit(limit=50) if r.proposal_id == proposal.id]
        assert sorted(r.lesson_id for r in rows) == ["les_no", "les_yes"]
        assert bank.consolidate() is None
