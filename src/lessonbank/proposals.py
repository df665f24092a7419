"""The consolidation cycle's records (seed 002): operations, the proposal a person decides on, and
the dream log's runs. Pure data, no I/O.

Identity and invariants:

- A :class:`Proposal` is never applied without a person: it is written ``pending`` by a cycle,
  and only an approval (whole, partial, or with edits) applies it, in one transaction, after
  checking that no lesson it touches changed since (``based_on``). A rejected operation keeps its
  :attr:`Operation.fingerprint`, so the next cycle does not propose it again.
- An :class:`Operation` names the stored lessons it touches (``lesson_ids``) and carries what it
  would write (``lesson``: an extracted, merged or pattern lesson). MERGE never deletes: its
  sources become superseded by the merged lesson. ARCHIVE is soft. CONNECT writes a typed link on
  both lessons (``metadata["links"]``). FLAG and EVOLVE write nothing to the lessons: a
  contradiction for the person, an evolution-log entry.
- A :class:`DreamRun` is one cycle's permanent row in the dream log, whatever its outcome.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import Field

from lessonbank.models import Lesson, Record, new_id, utcnow

OperationKind = Literal["extract", "merge", "connect", "flag", "archive", "pattern", "evolve", "admit"]
OPERATION_KINDS: tuple[str, ...] = get_args(OperationKind)
OperationStatus = Literal["proposed", "approved", "rejected", "applied", "dropped"]
ProposalStatus = Literal["pending", "applied", "partially_applied", "rejected", "reverted", "failed"]
PROPOSAL_STATUSES: tuple[str, ...] = get_args(ProposalStatus)
DreamOutcome = Literal["proposed", "empty", "failed", "skipped"]
CycleTrigger = Literal["manual", "schedule", "session_end", "threshold", "inactivity"]
CYCLE_TRIGGERS: tuple[str, ...] = get_args(CycleTrigger)
FlagDecision = Literal["keep-a", "keep-b", "both", "dismiss"]
FLAG_DECISIONS: tuple[str, ...] = get_args(FlagDecision)
LinkType = Literal["related", "refines", "depends_on", "example_of", "contradicts"]


class Operation(Record):
    """One change a cycle proposes (seed 002's EXTRACT / MERGE / CONNECT / FLAG / ARCHIVE / PATTERN /
    EVOLVE), with the reason a person reads.

    - ``extract`` / ``pattern``: ``lesson`` is a new lesson (a pattern is a procedure); ``lesson_ids``
      its sources, if any;
    - ``merge``: ``lesson`` is the merged lesson listing its sources; ``lesson_ids`` the sources,
      superseded by it once applied;
    - ``connect``: ``lesson_ids`` the two lessons, ``link`` the type of link;
    - ``flag``: ``lesson_ids`` the lessons that contradict each other (A and B); nothing is written
      unless a person decides (``decision``): keep A (B archived), keep B (A archived), keep both with
      the text and scope each keeps in ``revisions`` (by lesson id), or dismiss (not a contradiction:
      recorded on both lessons);
    - ``archive``: ``lesson_ids`` the one lesson, ``score`` its decay score;
    - ``evolve``: ``text`` an evolution-log entry;
    - ``admit``: ``lesson_ids`` one quarantined lesson of an untrusted agent, made active (seed 002's
      pending sub-agent memories).
    """

    id: str = Field(default_factory=lambda: new_id("op"))
    kind: OperationKind
    lesson_ids: list[str] = Field(default_factory=list)
    lesson: Lesson | None = None
    link: LinkType | None = None
    score: float | None = None
    text: str | None = None
    reason: str = ""
    status: OperationStatus = "proposed"
    decision: FlagDecision | None = None  # a FLAG's, by the person who approved it
    revisions: dict[str, dict[str, str | None]] = Field(default_factory=dict)  # a FLAG kept "both"
    note: str | None = None  # why it was dropped, what a person changed, or "quarantined on approval: <why>"

    @property
    def fingerprint(self) -> str:
        """What the operation does, independent of its id and wording of the reason: the same
        operation proposed by two cycles has the same fingerprint (a rejection is remembered by it)."""
        content = self.lesson.content if self.lesson is not None else (self.text or "")
        key = [self.kind, sorted(self.lesson_ids), self.link, " ".join(content.lower().split())]
        return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:24]


class Proposal(Record):
    """What one cycle proposes for one namespace, pending until a person decides (seed 002's
    pending reflection). ``based_on`` maps each stored lesson an operation touches to its
    ``updated_at`` when the proposal was made: applying refuses if any changed since."""

    id: str = Field(default_factory=lambda: new_id("prp"))
    namespace: str = "default"
    cycle_id: str
    trigger: CycleTrigger = "manual"
    status: ProposalStatus = "pending"
    created_at: datetime = Field(default_factory=utcnow)
    operations: list[Operation] = Field(default_factory=list)
    core_memory: str | None = None  # the rewritten core memory document, if phase 4 changed it
    questions: list[str] = Field(default_factory=list)
    summary: str = ""
    based_on: dict[str, datetime] = Field(default_factory=dict)
    items_processed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    decided_at: datetime | None = None
    decided_by: str | None = None
    decision_reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class DreamRun(Record):
    """One consolidation cycle in the permanent dream log (seed 000): trigger, start, duration,
    items processed, tokens, cost, summary, the proposal it made and how it ended."""

    id: str = Field(default_factory=lambda: new_id("cyc"))
    namespace: str = "default"
    trigger: CycleTrigger = "manual"
    started_at: datetime = Field(default_factory=utcnow)
    duration_s: float = 0.0
    items_processed: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    summary: str = ""
    proposal_id: str | None = None
    outcome: DreamOutcome = "empty"
    error: str | None = None
