"""What one approved operation of a proposal writes: the lessons it changes or adds and an audit
row for each change, collected for the one transaction that applies the proposal. No I/O: the
cycle reads the lessons before and stores the writes after (:mod:`.cycle`).

A MERGE adds the merged lesson (written onto a source whose text it keeps) and marks the other
sources ``superseded_by`` it; an EXTRACT or PATTERN adds its lesson; an ARCHIVE archives (soft); an
ADMIT makes a quarantined lesson active; a CONNECT writes the typed link on both lessons; a FLAG
what the person decided (:mod:`.flags`). A lesson two operations change carries both changes.
EVOLVE writes no lesson.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from lessonbank.errors import ConflictError
from lessonbank.models import AuditAction, AuditEntry, Lesson
from lessonbank.proposals import Operation, Proposal
from lessonbank.services.consolidation.flags import decided_writes
from lessonbank.services.consolidation.merges import summed_counters
from lessonbank.text import normalize


def changes(
    op: Operation,
    current: dict[str, Lesson],
    writes: dict[str, Lesson],
    audit: list[AuditEntry],
    *,
    proposal: Proposal,
    now: datetime,
    entry: Callable[[AuditAction, str], AuditEntry],
) -> Lesson | None:
    """The lesson writes and audit rows of one approved operation; the lesson it adds (or the
    source a merge was written onto), if any. A lesson two operations change (a connection and
    a merge) carries both changes."""
    missing = [i for i in op.lesson_ids if i not in current]
    if missing:
        raise ConflictError(
            f"lesson {missing[0]} of operation {op.id} is gone since proposal {proposal.id} was made",
            record_id=missing[0],
        )

    def latest(lesson_id: str) -> Lesson:
        return writes.get(lesson_id) or current[lesson_id]

    def write(action: AuditAction, summary: str, before: Lesson | None, after: Lesson) -> None:
        writes[after.id] = after
        audit.append(entry(action, summary).of(before, after))

    if op.kind in ("merge", "extract", "pattern") and op.lesson is not None:
        update: dict[str, Any] = {
            "namespace": proposal.namespace,
            "created_at": now,
            "updated_at": now,
            "source": "consolidation",
        }
        # A merge that keeps one source's text is written onto that source (a content is one
        # lesson's in a namespace): it becomes the merged lesson, the others superseded by it.
        survivor = next(
            (
                latest(i)
                for i in op.lesson_ids
                if op.kind == "merge" and normalize(current[i].content) == normalize(op.lesson.content)
            ),
            None,
        )
        if survivor is not None:
            update.update(id=survivor.id, created_at=survivor.created_at)
        if op.kind == "merge":  # the sources' counters as they are now, uses since the proposal too
            update.update(summed_counters([current[i] for i in op.lesson_ids]))
        added = op.lesson.model_copy(update=update)
        summary = f"{op.reason}; {op.note}" if op.note else op.reason
        write("merge" if op.kind == "merge" else "extract", summary, survivor, added)
        # A quarantined lesson is recalled by no one: its sources stay live until a person admits it.
        if op.kind == "merge" and added.status != "quarantined":
            for source_id in (i for i in op.lesson_ids if i != added.id):
                source = latest(source_id)
                marked = source.model_copy(update={"superseded_by": added.id, "updated_at": now})
                write("supersede", f"merged into {added.id}", source, marked)
        return added
    if op.kind == "archive":
        source = latest(op.lesson_ids[0])
        write(
            "archive",
            op.reason,
            source,
            source.model_copy(update={"status": "archived", "updated_at": now}),
        )
    elif op.kind == "admit":
        source = latest(op.lesson_ids[0])
        metadata = {k: v for k, v in source.metadata.items() if k != "quarantine"}
        metadata["admitted"] = source.metadata.get("quarantine")
        admitted = source.model_copy(update={"status": "active", "metadata": metadata, "updated_at": now})
        write("admit", op.reason or "admitted by review", source, admitted)
    elif op.kind == "connect" and op.link is not None:
        a, b = op.lesson_ids
        for this, other, direction in ((a, b, "out"), (b, a, "in")):
            source = latest(this)
            links = [link for link in source.metadata.get("links", []) if link.get("to") != other]
            links.append({"to": other, "type": op.link, "direction": direction})
            linked = source.model_copy(
                update={"metadata": {**source.metadata, "links": links}, "updated_at": now}
            )
            write("connect", f"{op.link} link with {other}", source, linked)
    elif op.kind == "flag" and op.decision is not None:
        decided_writes(op, latest, write, now)
    # evolve writes no lesson (its entry goes to the log), nor does a flag no one decided.
    return None
