"""A FLAG's decision in the proposal's edit format: the file offers the choices with each lesson's
text and scope, a decided block is read back as the decision, an undecided one as no edit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lessonbank.errors import InputError
from lessonbank.models import Lesson
from lessonbank.proposals import Operation, Proposal
from lessonbank.services.consolidation.edits import apply_edits, edit_file, read_edit_file
from lessonbank.services.consolidation.flags import UNDECIDED, decision_text, open_flags, read_decision

NOW = datetime(2027, 1, 1, tzinfo=UTC)


def lesson(lesson_id: str, content: str, **fields: object) -> Lesson:
    return Lesson(id=lesson_id, content=content, created_at=NOW, updated_at=NOW, **fields)  # type: ignore[arg-type]


FLAG = Operation(id="op_flag", kind="flag", lesson_ids=["les_a", "les_b"], reason="opposed")
PROPOSAL = Proposal(cycle_id="cyc_1", operations=[FLAG])
LESSONS = {
    "les_a": lesson("les_a", "Cache the token.", agent="ops"),
    "les_b": lesson("les_b", "Never cache the token.", task_type="security"),
}


def test_the_edit_file_offers_the_choices_and_each_lessons_scope() -> None:
    text = edit_file(PROPOSAL, lessons=LESSONS)
    block = text.split("=== op_flag flag\n", 1)[1]
    assert UNDECIDED == "decision: keep-a | keep-b | both | dismiss"
    assert UNDECIDED in block
    assert "# A les_a: Cache the token." in block and "# B les_b: Never cache the token." in block
    assert (
        "a.agent: ops" in block and "b.task_type: security" in block and "a.text: Cache the token." in block
    )
    # Left as it is: kept (approved) and no decision.
    assert read_edit_file(text, PROPOSAL) == (["op_flag"], {})


def test_a_decided_block_is_read_back_and_applied_as_the_decision() -> None:
    text = (
        edit_file(PROPOSAL, lessons=LESSONS)
        .replace(UNDECIDED, "decision: both")
        .replace("a.agent: ops", "a.agent: fetcher")
    )
    kept, edits = read_edit_file(text, PROPOSAL)
    assert kept == ["op_flag"]
    decided = apply_edits(PROPOSAL, edits, {"op_flag"}, "alice")
    [op] = decided.operations
    assert op.decision == "both"
    assert op.revisions["les_a"]["agent"] == "fetcher"
    assert op.note == "decided by alice: both"


def test_a_form_says_the_same_as_the_file() -> None:
    text = decision_text("keep-b")
    assert read_decision(text, FLAG) == ("keep-b", {})
    both = decision_text("both", {"a.agent": "ops", "b.text": "  Never  cache\n it. "})
    assert read_decision(both, FLAG) == (
        "both",
        {"les_a": {"agent": "ops"}, "les_b": {"text": "Never cache it."}},
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("decision: keep-c", "unknown decision"),
        ("decision: both\nc.agent: x", "unknown field"),
        ("decision: both\na.text:", "a.text is empty"),
        ("choose keep-a", "is not 'name: value'"),
    ],
)
def test_a_bad_decision_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_decision(text, FLAG)


def test_open_flags_are_those_of_pending_proposals() -> None:
    decided = PROPOSAL.model_copy(update={"status": "applied"})
    assert open_flags([PROPOSAL, decided]) == {"les_a": ["les_b"], "les_b": ["les_a"]}
    assert open_flags([decided]) == {}
