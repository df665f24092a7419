"""The bank's contract, run twice: against an embedded ``LessonBank`` and against a ``RemoteBank``
talking to a real ``lessonbank serve`` app (uvicorn on a free 127.0.0.1 port). Each test is written
once, against what both promise; a difference between them fails here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from lessonbank import LessonBank, RemoteBank
from lessonbank.errors import InputError, LessonbankError, NotFoundError
from tests.test_remote_bank import Serve, serve  # noqa: F401  (the fixture)

Bank = LessonBank | RemoteBank
GO_LESSON = "when editing large Go files use Edit, not full rewrite"


@pytest.fixture(params=["embedded", "remote"])
def bank(request: pytest.FixtureRequest, tmp_path: Path, serve: Serve) -> Iterator[Bank]:  # noqa: F811
    if request.param == "embedded":
        with LessonBank(f"sqlite:///{tmp_path / 'embedded.db'}", worker=False) as embedded:
            yield embedded
    else:
        with RemoteBank(serve(worker=False), namespace="default") as remote:
            yield remote


def test_same_content_reinforces_instead_of_copying(bank: Bank) -> None:
    first = bank.add_lesson(GO_LESSON, tags=["go"])
    again = bank.add_lesson(GO_LESSON, tags=["go"])
    assert again.id == first.id and again.confidence > first.confidence
    assert [lesson.id for lesson in bank.lessons()] == [first.id]


def test_recall_ranks_filters_and_rejects_an_empty_query(bank: Bank) -> None:
    go = bank.add_lesson(GO_LESSON, tags=["go", "edit-file"])
    bank.add_lesson("paginate API calls that return more than a thousand items", tags=["api"])
    bank.add_lesson("retry flaky network tests only once in ci", tags=["ci"], task_type="code", agent="coder")
    assert bank.recall("refactor a large go file", k=5)[0].lesson.id == go.id
    assert bank.recall("kubernetes helm chart", k=5) == []
    assert [h.lesson.agent for h in bank.recall("retry flaky network", k=10, agent="coder")] == ["coder"]
    assert [h.lesson.task_type for h in bank.recall("retry flaky network", k=10, task_type="code")] == [
        "code"
    ]
    with pytest.raises(InputError, match="empty"):
        bank.recall("   ")
    for hostile in ['"unbalanced', "NEAR(a b)", "col:value AND OR NOT", "*", "a' OR 1=1 --"]:
        bank.recall(hostile)


def test_context_stays_within_budget_and_refuses_bad_arguments(bank: Bank) -> None:
    for n in range(12):
        bank.add_lesson(f"deploy step {n}: check the staging gate and the release notes before shipping")
    for budget in (0, 30, 120, 800):
        block = bank.context("deploy the release", budget_tokens=budget)
        assert block.tokens <= budget and block.budget_tokens == budget
    with pytest.raises(InputError, match="budget_tokens"):
        bank.context("x", budget_tokens=-1)
    with pytest.raises(InputError, match="unknown context format"):
        bank.context("x", formats=["poetry"])


def test_forget_export_import_and_bad_records(bank: Bank) -> None:
    kept = bank.add_lesson("keep me: use feature flags for risky changes", tags=["flags"])
    gone = bank.add_lesson("forget me: an outdated workaround")
    bank.forget(gone.id)
    with pytest.raises(NotFoundError):
        bank.forget(gone.id)
    dumped = json.loads(bank.export("json"))
    assert [row["id"] for row in dumped] == [kept.id]
    result = bank.import_lessons([{"content": ""}, {"nope": 1}, {"content": "a new one about caching"}])
    assert result == {"added": 1, "reinforced": 0, "skipped": 2}


def test_bad_input_is_refused_and_nothing_stored_is_lost(bank: Bank) -> None:
    kept = bank.add_lesson(GO_LESSON)
    before = bank.stats()["lessons"]
    with pytest.raises((InputError, ValueError)):
        bank.record({"task": "", "error": "boom"})
    with pytest.raises((InputError, ValueError)):
        bank.add_lesson("   ")
    with pytest.raises((InputError, ValueError)):
        bank.add_lesson("x" * 20_000)
    with pytest.raises(LessonbankError):
        bank.archive("les_does_not_exist")
    assert bank.stats()["lessons"] == before
    assert bank.get_lesson(kept.id).content == GO_LESSON


def test_archive_restore_edit_and_the_audit_log(bank: Bank) -> None:
    lesson = bank.add_lesson(GO_LESSON)
    assert bank.archive(lesson.id, reason="outdated", actor="ana").status == "archived"
    assert bank.recall("large go files") == []
    assert bank.restore(lesson.id, actor="ana").status == "active"
    assert bank.edit_lesson(lesson.id, pinned=True, actor="ana").pinned
    actions = [row.action for row in bank.audit(lesson_id=lesson.id)]
    assert actions == ["edit", "restore", "archive"]


def test_a_cycle_proposes_and_a_person_decides(bank: Bank) -> None:
    bank.import_lessons(
        [
            {"id": "les_twin_a", "content": "Run the migrations before the deploy.", "access_count": 2},
            {"id": "les_twin_b", "content": "run migrations before a deploy"},
        ]
    )
    proposal = bank.consolidate()
    assert proposal is not None and [op.kind for op in proposal.operations] == ["merge"]
    assert [p.id for p in bank.proposals(status="pending")] == [proposal.id]
    decided = bank.approve(proposal.id)
    assert decided.status == "applied" and bank.get_lesson("les_twin_b").superseded_by is not None
    with pytest.raises(InputError, match="only a pending proposal"):
        bank.reject(proposal.id)
    assert bank.revert(proposal.id).status == "reverted"
    assert bank.get_lesson("les_twin_b").superseded_by is None
    assert [run.outcome for run in bank.dreams()] == ["proposed"]
