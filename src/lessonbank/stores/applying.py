"""The checks every store makes before applying a consolidation proposal (``ConsolidationStore.
apply_proposal``), inside the apply's transaction, on what it read there:

- each write of a stored lesson must match ``proposal.based_on``: the stored ``updated_at`` equals
  the recorded one (compared as timestamps, to the microsecond), and a stored lesson written without
  a ``based_on`` entry is refused too;
- a write is of the proposal's namespace; its id held by another namespace is refused (``scoping``);
- no write takes the content hash of another lesson of the namespace, nor of another write.

A refusal is a :class:`~lessonbank.errors.ConflictError` (an id another namespace holds: InputError),
raised before anything is written. Also the order proposals and dream-log rows are listed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from lessonbank.errors import ConflictError, InputError
from lessonbank.models import Lesson
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.scoping import check_id_free

# Two timestamps closer than this are the same instant (a float of Unix seconds keeps ~0.2 µs).
SAME_INSTANT_S = 5e-6


def check_writes(
    proposal: Proposal,
    writes: Sequence[Lesson],
    stored: Mapping[str, Lesson],
    holder_of: Callable[[str], str | None],
) -> None:
    """Refuse the apply (see the module docstring). ``stored``: the lessons with the writes' ids as
    read in the transaction (any namespace); ``holder_of(content_hash)``: the id of the namespace's
    lesson with that content hash, or None."""
    hashes: dict[str, str] = {}
    for lesson in writes:
        if lesson.namespace != proposal.namespace:
            raise InputError(
                f"lesson {lesson.id} is of namespace {lesson.namespace!r}, the proposal of "
                f"{proposal.namespace!r}; a proposal writes its own namespace only",
                field="namespace",
            )
        old = stored.get(lesson.id)
        check_id_free("lesson", lesson.id, lesson.namespace, old.namespace if old is not None else None)
        if old is not None:
            check_unchanged(proposal, old)
        twin = hashes.setdefault(lesson.content_hash, lesson.id)
        holder = holder_of(lesson.content_hash)
        if twin != lesson.id or (holder is not None and holder != lesson.id):
            other = twin if twin != lesson.id else holder
            raise ConflictError(
                f"lesson {lesson.id} would have the same content as lesson {other}; the proposal was "
                "made before that lesson existed or was edited: make the proposal again",
                record_id=lesson.id,
            )


def check_unchanged(proposal: Proposal, stored: Lesson) -> None:
    """Refuse when ``stored`` changed since the proposal recorded it (or it never recorded it)."""
    based = proposal.based_on.get(stored.id)
    if based is not None and abs(stored.updated_at.timestamp() - based.timestamp()) < SAME_INSTANT_S:
        return
    seen = "was not read by the proposal" if based is None else f"was at {based.isoformat()} when it was read"
    raise ConflictError(
        f"lesson {stored.id} changed since the proposal was made (updated {stored.updated_at.isoformat()}, "
        f"{seen}); nothing was applied: make the proposal again",
        record_id=stored.id,
    )


def newest_proposals(
    proposals: Iterable[Proposal], statuses: Sequence[str] | None, limit: int
) -> list[Proposal]:
    """Of ``statuses`` when given, newest first (ties: the larger id first), at most ``limit``."""
    kept = [p for p in proposals if statuses is None or p.status in statuses]
    kept.sort(key=lambda p: (p.created_at.timestamp(), p.id), reverse=True)
    return kept[: max(limit, 0)]


def newest_dreams(runs: Iterable[DreamRun], limit: int) -> list[DreamRun]:
    """Newest first by start (ties: the larger id first), at most ``limit``."""
    return sorted(runs, key=lambda r: (r.started_at.timestamp(), r.id), reverse=True)[: max(limit, 0)]
