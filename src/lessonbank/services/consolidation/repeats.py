"""What a cycle does not propose again. Pure functions of the operations, the lessons, the
namespace's documents and cycle state, and the proposals still pending: no I/O.

Left out of a new proposal:

- what a person said no to: an operation rejected (its fingerprint in the cycle state's
  ``rejected``), a FLAG a person was shown (``flags_seen``), a core memory rewrite turned down
  (:func:`remember` writes them when a proposal is decided, :func:`remembered` reads them);
- what is already so: a CONNECT whose link the lessons carry, an EVOLVE whose entry the evolution
  log holds (approving it again would write the entry twice);
- what a pending proposal already holds: the same operation or core memory rewrite, or a change
  (merge, archive, admit) to a lesson a pending proposal already changes. Approving one of the two would leave the other
  failing on a conflict for as long as it is pending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lessonbank.models import Lesson
from lessonbank.proposals import Operation, Proposal
from lessonbank.services.consolidation.documents import Documents, core_fingerprint
from lessonbank.services.consolidation.operations import CHANGES

PENDING_SCAN = 200  # pending proposals read: a namespace with more has a person to catch up first


def remembered(state: Mapping[str, Any]) -> set[str]:
    """The fingerprints a person decided on: rejected operations and core memories, shown flags."""
    return {str(f) for f in state.get("rejected", [])} | {str(f) for f in state.get("flags_seen", [])}


def remember(decided: Proposal, state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with the rejected operations and shown flags of ``decided`` (and its core memory,
    if turned down) remembered, so no later cycle proposes them again."""
    rejected = set(state.get("rejected", []))
    flags = set(state.get("flags_seen", []))
    for op in decided.operations:
        if op.status == "rejected":
            rejected.add(op.fingerprint)
        if op.kind == "flag" and op.status in ("applied", "rejected"):
            flags.add(op.fingerprint)
    if decided.core_memory is not None and not decided.metadata.get("core_applied"):
        rejected.add(core_fingerprint(decided.core_memory))
    return {**state, "rejected": sorted(rejected), "flags_seen": sorted(flags)}


def _folded(text: str | None) -> str:
    return " ".join((text or "").lower().split())


def linked(lessons_by_id: Mapping[str, Lesson], a: str, b: str, link: str | None) -> bool:
    """Whether lesson ``a`` or ``b`` already carries a ``link`` to the other."""
    for this, other in ((a, b), (b, a)):
        lesson = lessons_by_id.get(this)
        links = lesson.metadata.get("links", []) if lesson is not None else []
        if any(isinstance(x, dict) and x.get("to") == other and x.get("type") == link for x in links):
            return True
    return False


def already_so(op: Operation, lessons_by_id: Mapping[str, Lesson], evolved: set[str]) -> bool:
    """Whether what ``op`` would write is already written (see the module docstring)."""
    if op.kind == "connect" and len(op.lesson_ids) == 2:
        return linked(lessons_by_id, op.lesson_ids[0], op.lesson_ids[1], op.link)
    if op.kind == "evolve":
        return _folded(op.text) in evolved
    return False


def held(pending: Iterable[Proposal]) -> tuple[set[str], set[str]]:
    """(the fingerprints of the operations pending proposals offer, the lessons they change)."""
    fingerprints: set[str] = set()
    changed: set[str] = set()
    for proposal in pending:
        for op in proposal.operations:
            if op.status == "dropped":
                continue
            fingerprints.add(op.fingerprint)
            if op.kind in CHANGES:
                changed.update(op.lesson_ids)
    return fingerprints, changed


def fresh(
    operations: Sequence[Operation],
    lessons_by_id: Mapping[str, Lesson],
    documents: Documents,
    pending: Sequence[Proposal],
) -> list[Operation]:
    """``operations`` less those already applied or pending in another proposal."""
    evolved = {_folded(entry.text) for entry in documents.evolution}
    fingerprints, changed = held(pending)
    return [
        op
        for op in operations
        if op.fingerprint not in fingerprints
        and not (op.kind in CHANGES and changed.intersection(op.lesson_ids))
        and not already_so(op, lessons_by_id, evolved)
    ]


def fresh_core(core: str | None, state: Mapping[str, Any], pending: Sequence[Proposal]) -> str | None:
    """``core``, unless a person turned that very rewrite down or a pending proposal offers it."""
    if core is None:
        return None
    seen = {core_fingerprint(p.core_memory) for p in pending if p.core_memory is not None}
    return None if core_fingerprint(core) in seen | remembered(state) else core
