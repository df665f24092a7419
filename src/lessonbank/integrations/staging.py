"""Changes read from files a person edits (skills, AGENTS.md), staged as one pending proposal.

Nothing read from a file is written to the lessons directly: each change becomes an operation of
a :class:`~lessonbank.proposals.Proposal` a person approves, partially approves, edits or rejects,
like a consolidation cycle's (``lessonbank proposals``). The operations:

- an edited lesson: a MERGE of that one lesson into its edited copy (a new id: the old lesson is
  superseded by it once approved, never deleted; the same text keeps the old id);
- a new one (no lessonbank id in the file): an EXTRACT of a new lesson (a candidate);
- a removed one: an ARCHIVE (soft).

The proposal passes the consolidation screens before it is stored (secrets redacted, text that
reads as instructions quarantined on approval). An operation a pending proposal already holds is
not staged again, so importing the same files twice stages one proposal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lessonbank.errors import NotFoundError
from lessonbank.lessons import LessonWriter
from lessonbank.models import Lesson, new_id
from lessonbank.proposals import Operation, Proposal
from lessonbank.services.consolidation.screens import screened

if TYPE_CHECKING:
    from lessonbank.bank.sync import LessonBank

PENDING_SCAN = 200  # pending proposals read to find an operation already staged


@dataclass
class Staged:
    """What an import of files found: the proposal it staged (None: nothing changed), how many
    files were unchanged, and each file skipped with why."""

    proposal: Proposal | None = None
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        ops = self.proposal.operations if self.proposal is not None else []
        return {
            "edits": sum(op.kind == "merge" for op in ops),
            "candidates": sum(op.kind == "extract" for op in ops),
            "archives": sum(op.kind == "archive" for op in ops),
            "unchanged": self.unchanged,
            "skipped": len(self.skipped),
        }


def edit(lesson: Lesson, reason: str, **changes: Any) -> Operation:
    """The MERGE of ``lesson`` into its copy with ``changes``."""
    edited = lesson.model_copy(
        update={
            "id": new_id("les"),
            "supersedes": lesson.id,
            "superseded_by": None,
            "access_count": 0,
            "helpful": 0,
            "harmful": 0,
            **changes,
        }
    )
    return Operation(kind="merge", lesson_ids=[lesson.id], lesson=_prepared(edited), reason=reason)


def candidate(lesson: Lesson, reason: str) -> Operation:
    return Operation(kind="extract", lesson=_prepared(lesson), reason=reason)


def archive(lesson: Lesson, reason: str) -> Operation:
    return Operation(kind="archive", lesson_ids=[lesson.id], reason=reason)


def _prepared(lesson: Lesson) -> Lesson:
    # Validated again (a changed content passes its field's checks) and hashed as the store hashes it.
    return LessonWriter.prepared(Lesson.model_validate(lesson.model_dump()))


def stage(
    bank: LessonBank,
    operations: Sequence[Operation],
    touched: Sequence[Lesson],
    *,
    source: str,
    path: object,
) -> Proposal | None:
    """Store ``operations`` (less those a pending proposal already holds) as one pending proposal
    read from the ``source`` files at ``path``; None when none is left. ``touched``: the stored
    lessons they name, as read now (``based_on``)."""
    summary, metadata = f"changes read from the {source} at {path}", {"path": str(path)}
    held = {
        op.fingerprint
        for proposal in bank.proposals(status="pending", limit=PENDING_SCAN)
        for op in proposal.operations
        if op.status == "proposed"
    }
    fresh = [op for op in operations if op.fingerprint not in held]
    if not fresh:
        return None
    named = {i for op in fresh for i in op.lesson_ids}
    proposal = Proposal(
        namespace=bank.namespace,
        cycle_id=f"import:{source}",
        operations=fresh,
        summary=summary,
        based_on={lesson.id: lesson.updated_at for lesson in touched if lesson.id in named},
        items_processed=len(fresh),
        metadata={"source": "import", "from": source, **metadata},
    )
    proposal = screened(proposal)
    bank.store.save_proposal(proposal)
    return proposal


def live_lesson(bank: LessonBank, lesson_id: str | None, kind: str) -> Lesson | None:
    """The namespace's live lesson ``lesson_id`` of ``kind`` (active, not superseded), or None: an
    edit or an archive is only staged against a lesson that is still there to change."""
    if not lesson_id:
        return None
    try:
        lesson = bank.get_lesson(lesson_id)
    except NotFoundError:
        return None
    live = lesson.status == "active" and lesson.superseded_by is None and lesson.kind == kind
    return lesson if live else None


def archive_removed(
    bank: LessonBank, removed: Iterable[tuple[str, str]], kind: str
) -> tuple[list[Operation], list[Lesson]]:
    """Archive operations for the ``(lesson id, why)`` pairs whose lesson of ``kind`` is still live
    (a file or bullet a person deleted), with the lessons they touch."""
    operations, touched = [], []
    for lesson_id, why in removed:
        lesson = live_lesson(bank, lesson_id, kind)
        if lesson is not None:
            operations.append(archive(lesson, why))
            touched.append(lesson)
    return operations, touched
