"""The consolidation cycle of one namespace: it proposes, a person decides (seed 002).

A cycle reads the namespace's lessons, runs the deterministic pre-pass (:mod:`.prepass`), turns its
candidates into operations (:mod:`.operations`), validates them, and stores what is left as a
``pending`` :class:`~lessonbank.proposals.Proposal`; every cycle, whatever its outcome, is a row in
the dream log. Nothing is applied by a cycle.

Deciding, by a person (``actor``):

- **approve** (all operations, or ``only`` some by id: a partial approval, the others rejected) applies
  them in one transaction (``Store.apply_proposal``): a MERGE adds the merged lesson and marks its
  sources ``superseded_by`` it (never deleted); an ARCHIVE archives (soft); an EXTRACT or PATTERN adds
  its lesson. Each change is an audit row naming the proposal. If a lesson an operation touches
  changed since the proposal was made, nothing is applied (:class:`~lessonbank.errors.ConflictError`).
- **reject**: nothing applied; each operation's fingerprint is remembered in the namespace's cycle
  state, and no later cycle proposes it again. A FLAG (a contradiction shown to the person) is
  remembered once shown in a decided proposal, approved or not.
- **revert** an applied proposal: from its audit rows, each lesson it changed goes back to what it
  was, and each lesson it added is archived; refused if one of them changed since.

Not built yet: the LLM phases (survey, meta-reflection, consolidate, rewrite core, summarize), core
memory and the evolution and reflection logs, the cycle as a queued job with its triggers.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lessonbank.errors import ConflictError, InputError
from lessonbank.models import LESSON_STATUSES, AuditAction, AuditEntry, Lesson
from lessonbank.ports import LessonQuery
from lessonbank.proposals import PROPOSAL_STATUSES, CycleTrigger, DreamRun, Operation, Proposal
from lessonbank.retrieval import Retriever
from lessonbank.services.consolidation.operations import deterministic_operations, validate
from lessonbank.services.consolidation.prepass import find_candidates
from lessonbank.services.consolidation.render import render_pending
from lessonbank.services.lifecycle import check_actor, clean_reason
from lessonbank.services.pools import every_lesson
from lessonbank.services.scope import Scope, check_count
from lessonbank.text import normalize

log = logging.getLogger("lessonbank.consolidation")

DECIDED = ("applied", "partially_applied", "rejected", "reverted")


class Consolidator:
    """Runs cycles for the bank's namespace and applies what a person decides."""

    def __init__(self, scope: Scope, *, retriever: Retriever) -> None:
        self.scope = scope
        self.retriever = retriever

    def for_namespace(self, namespace: str) -> Consolidator:
        """The same consolidator serving ``namespace`` (a worker runs cycles of many namespaces)."""
        if namespace == self.scope.namespace:
            return self
        return Consolidator(dataclasses.replace(self.scope, namespace=namespace), retriever=self.retriever)

    # ------------------------------------------------------------------ the cycle

    def run(
        self, *, trigger: CycleTrigger = "manual", dry_run: bool = False
    ) -> tuple[DreamRun, Proposal | None]:
        """One cycle: the dream-log row and the proposal it made (None when there was nothing to
        propose). ``dry_run`` computes the proposal and stores nothing (no proposal, no dream row)."""
        if not isinstance(dry_run, bool):
            raise InputError(f"dry_run must be true or false, got {dry_run!r}", field="dry_run")
        store, namespace = self.scope.store, self.scope.namespace
        started = time.monotonic()
        run = DreamRun(namespace=namespace, trigger=trigger, started_at=self.scope.now())
        if not dry_run:
            store.save_dream(run)
        try:
            lessons = self._all_lessons()
            proposal = self._propose(run, lessons)
        except Exception as exc:
            run = run.model_copy(
                update={
                    "outcome": "failed",
                    "error": f"{type(exc).__name__}: {exc}"[:2_000],
                    "duration_s": round(time.monotonic() - started, 3),
                }
            )
            if not dry_run:
                store.save_dream(run)
            raise
        kept = [op for op in proposal.operations if op.status != "dropped"]
        update: dict[str, Any] = {
            "duration_s": round(time.monotonic() - started, 3),
            "items_processed": len(lessons),
            "summary": proposal.summary,
            "outcome": "proposed" if kept else "empty",
            "proposal_id": proposal.id if kept else None,
        }
        run = run.model_copy(update=update)
        if dry_run:
            return run, proposal if kept else None
        if kept:
            store.save_proposal(proposal)
        state = store.cycle_state(namespace)
        state["last_reflection"] = run.started_at.isoformat()
        store.set_cycle_state(namespace, state)
        store.save_dream(run)
        return run, proposal if kept else None

    def _all_lessons(self) -> list[Lesson]:
        query = LessonQuery(self.scope.namespace, statuses=list(LESSON_STATUSES), live_only=False)
        return every_lesson(self.scope.store, query)

    def _propose(self, run: DreamRun, lessons: Sequence[Lesson]) -> Proposal:
        now = self.scope.now()
        by_id = {lesson.id: lesson for lesson in lessons}
        vectors = None
        if self.retriever.embedder is not None:
            vectors = self.retriever.index(self.scope.namespace).vectors()
        candidates = find_candidates(lessons, now, vectors=vectors, cosine=self.scope.settings.dedup_cosine)
        operations = deterministic_operations(candidates, by_id, now, rejected=self._remembered())
        kept, dropped = validate(operations, by_id, now=now)
        touched = {lesson_id for op in kept for lesson_id in op.lesson_ids}
        counts = {kind: sum(op.kind == kind for op in kept) for kind in ("merge", "archive", "flag")}
        summary = (
            f"{len(lessons)} lessons surveyed: {counts['merge']} merge(s), {counts['archive']} archival(s), "
            f"{counts['flag']} contradiction(s) to look at"
            + (f"; {len(dropped)} operation(s) dropped by validation" if dropped else "")
        )
        return Proposal(
            namespace=self.scope.namespace,
            cycle_id=run.id,
            trigger=run.trigger,
            created_at=now,
            operations=[*kept, *dropped],
            summary=summary,
            based_on={lesson_id: by_id[lesson_id].updated_at for lesson_id in sorted(touched)},
            items_processed=len(lessons),
        )

    def _remembered(self) -> set[str]:
        state = self.scope.store.cycle_state(self.scope.namespace)
        return {str(f) for f in state.get("rejected", [])} | {str(f) for f in state.get("flags_seen", [])}

    # ------------------------------------------------------------------ reading

    def proposals(self, *, status: str | Sequence[str] | None = None, limit: int = 50) -> list[Proposal]:
        check_count(limit, "limit")
        statuses = [status] if isinstance(status, str) else (list(status) if status is not None else None)
        for value in statuses or []:
            if value not in PROPOSAL_STATUSES:
                raise InputError(
                    f"unknown proposal status {value!r}; use one of {', '.join(PROPOSAL_STATUSES)}",
                    field="status",
                )
        return self.scope.store.list_proposals(self.scope.namespace, statuses=statuses, limit=limit)

    def proposal(self, proposal_id: str) -> Proposal:
        return self.scope.store.get_proposal(proposal_id, namespace=self.scope.namespace)

    def render(self, proposal_id: str, *, next_cycle: str | None = None) -> str:
        """The proposal as seed 002's pending reflection (Markdown)."""
        proposal = self.proposal(proposal_id)
        ids = {i for op in proposal.operations for i in op.lesson_ids}
        lessons = {
            lesson.id: lesson
            for lesson in self.scope.store.get_lessons(sorted(ids), namespace=self.scope.namespace)
        }
        return render_pending(proposal, lessons, next_cycle=next_cycle)

    def dreams(self, *, limit: int = 50) -> list[DreamRun]:
        check_count(limit, "limit")
        return self.scope.store.dreams(self.scope.namespace, limit=limit)

    # ------------------------------------------------------------------ deciding

    def approve(self, proposal_id: str, *, only: Sequence[str] | None = None, actor: str = "api") -> Proposal:
        """Apply the proposal's operations (or ``only`` those ids; the others are rejected), all or
        nothing. ConflictError if a lesson they touch changed since the proposal was made."""
        actor = check_actor(actor)
        proposal = self._pending(proposal_id)
        offered = [op for op in proposal.operations if op.status != "dropped"]
        if only is not None:
            if isinstance(only, str):
                raise InputError("only must be a list of operation ids, not one string", field="only")
            unknown = sorted(set(only) - {op.id for op in offered})
            if unknown:
                raise InputError(
                    f"proposal {proposal.id} has no operation {', '.join(unknown)}; "
                    f"its operations: {', '.join(op.id for op in offered)}",
                    field="only",
                )
        chosen = {op.id for op in offered} if only is None else set(only)
        now = self.scope.now()
        current = self._current(proposal)
        writes: dict[str, Lesson] = {}
        audit: list[AuditEntry] = []
        operations: list[Operation] = []
        for op in proposal.operations:
            if op.status == "dropped":
                operations.append(op)
            elif op.id in chosen:
                written = self._changes(op, current, writes, audit, proposal, actor, now)
                operations.append(op.model_copy(update={"status": "applied", "lesson": written or op.lesson}))
            else:
                operations.append(op.model_copy(update={"status": "rejected"}))
        decided = proposal.model_copy(
            update={
                "status": "applied" if chosen == {op.id for op in offered} else "partially_applied",
                "operations": operations,
                "decided_at": now,
                "decided_by": actor,
            }
        )
        self.scope.store.apply_proposal(decided, list(writes.values()), audit)
        self._remember(decided)
        self._embed([lesson for lesson in writes.values() if lesson.superseded_by is None])
        return decided

    def reject(self, proposal_id: str, *, reason: str | None = None, actor: str = "api") -> Proposal:
        """Apply nothing; remember every operation so no later cycle proposes it again."""
        actor = check_actor(actor)
        reason = clean_reason(reason)
        proposal = self._pending(proposal_id)
        decided = proposal.model_copy(
            update={
                "status": "rejected",
                "operations": [
                    op if op.status == "dropped" else op.model_copy(update={"status": "rejected"})
                    for op in proposal.operations
                ],
                "decided_at": self.scope.now(),
                "decided_by": actor,
                "decision_reason": reason,
            }
        )
        self.scope.store.save_proposal(decided)
        self._remember(decided)
        return decided

    def revert(self, proposal_id: str, *, actor: str = "api") -> Proposal:
        """Undo an applied proposal from its audit rows: each changed lesson back to what it was, each
        added lesson archived; all or nothing, refused if one of them changed since."""
        actor = check_actor(actor)
        proposal = self.proposal(proposal_id)
        if proposal.status not in ("applied", "partially_applied"):
            raise InputError(
                f"proposal {proposal.id} is {proposal.status}; only an applied one can be reverted"
            )
        store, namespace, now = self.scope.store, self.scope.namespace, self.scope.now()
        touched = sorted(
            {i for op in proposal.operations if op.status == "applied" for i in op.lesson_ids}
            | {op.lesson.id for op in proposal.operations if op.status == "applied" and op.lesson is not None}
        )
        rows = [
            row
            for lesson_id in touched
            for row in store.audit_log(namespace, lesson_id=lesson_id, limit=1_000)
            if row.proposal_id == proposal.id
        ]
        current = {lesson.id: lesson for lesson in store.get_lessons(touched, namespace=namespace)}
        writes: list[Lesson] = []
        audit: list[AuditEntry] = []
        based_on: dict[str, datetime] = {}
        for row in rows:
            lesson_id = row.lesson_id or ""
            stored = current.get(lesson_id)
            if stored is None or row.after is None:
                continue
            if stored.updated_at != Lesson.model_validate(row.after).updated_at:
                raise ConflictError(
                    f"lesson {lesson_id} changed since proposal {proposal.id} was applied; not reverted",
                    record_id=lesson_id,
                )
            if row.before is None:
                restored = stored.model_copy(update={"status": "archived", "updated_at": now})
                summary = f"revert of {proposal.id}: added by it, archived"
            else:
                restored = Lesson.model_validate(row.before).model_copy(update={"updated_at": now})
                summary = f"revert of {proposal.id}: back to what it was"
            based_on[lesson_id] = stored.updated_at
            writes.append(restored)
            audit.append(self._entry("revert", actor, summary, proposal, now).of(stored, restored))
        reverted = proposal.model_copy(
            update={"status": "reverted", "based_on": based_on, "decided_at": now, "decided_by": actor}
        )
        store.apply_proposal(reverted, writes, audit)
        return reverted

    # ------------------------------------------------------------------ helpers

    def _pending(self, proposal_id: str) -> Proposal:
        proposal = self.proposal(proposal_id)
        if proposal.status != "pending":
            raise InputError(
                f"proposal {proposal.id} is {proposal.status}; only a pending proposal can be decided"
            )
        return proposal

    def _current(self, proposal: Proposal) -> dict[str, Lesson]:
        ids = sorted({i for op in proposal.operations for i in op.lesson_ids})
        return {
            lesson.id: lesson for lesson in self.scope.store.get_lessons(ids, namespace=self.scope.namespace)
        }

    def _entry(
        self, action: AuditAction, actor: str, summary: str, proposal: Proposal, now: datetime
    ) -> AuditEntry:
        return AuditEntry(
            namespace=self.scope.namespace,
            at=now,
            actor=actor,
            action=action,
            proposal_id=proposal.id,
            summary=summary[:1_000],
        )

    def _changes(
        self,
        op: Operation,
        current: dict[str, Lesson],
        writes: dict[str, Lesson],
        audit: list[AuditEntry],
        proposal: Proposal,
        actor: str,
        now: datetime,
    ) -> Lesson | None:
        """The lesson writes and audit rows of one approved operation; the lesson it adds (or the
        source a merge was written onto), if any."""
        missing = [i for i in op.lesson_ids if i not in current]
        if missing:
            raise ConflictError(
                f"lesson {missing[0]} of operation {op.id} is gone since proposal {proposal.id} was made",
                record_id=missing[0],
            )
        if op.kind in ("merge", "extract", "pattern") and op.lesson is not None:
            update: dict[str, Any] = {
                "namespace": self.scope.namespace,
                "created_at": now,
                "updated_at": now,
                "source": "consolidation",
            }
            # A merge that keeps one source's text is written onto that source (a content is one
            # lesson's in a namespace): it becomes the merged lesson, the others superseded by it.
            survivor = next(
                (
                    current[i]
                    for i in op.lesson_ids
                    if op.kind == "merge" and normalize(current[i].content) == normalize(op.lesson.content)
                ),
                None,
            )
            if survivor is not None:
                update.update(id=survivor.id, created_at=survivor.created_at)
            added = op.lesson.model_copy(update=update)
            writes[added.id] = added
            action: AuditAction = "merge" if op.kind == "merge" else "extract"
            audit.append(self._entry(action, actor, op.reason, proposal, now).of(survivor, added))
            if op.kind == "merge":
                for source_id in (i for i in op.lesson_ids if i != added.id):
                    source = current[source_id]
                    marked = source.model_copy(update={"superseded_by": added.id, "updated_at": now})
                    writes[source_id] = marked
                    summary = f"merged into {added.id}"
                    audit.append(self._entry("supersede", actor, summary, proposal, now).of(source, marked))
            return added
        elif op.kind == "archive":
            [lesson_id] = op.lesson_ids
            source = current[lesson_id]
            archived = source.model_copy(update={"status": "archived", "updated_at": now})
            writes[lesson_id] = archived
            audit.append(self._entry("archive", actor, op.reason, proposal, now).of(source, archived))
        # flag, connect and evolve write no lesson here: a flag is for the person to read.
        return None

    def _remember(self, decided: Proposal) -> None:
        """Rejected operations and shown flags, so no later cycle proposes them again."""
        store, namespace = self.scope.store, self.scope.namespace
        state = store.cycle_state(namespace)
        rejected = set(state.get("rejected", []))
        flags = set(state.get("flags_seen", []))
        for op in decided.operations:
            if op.status == "rejected":
                rejected.add(op.fingerprint)
            if op.kind == "flag" and op.status in ("applied", "rejected"):
                flags.add(op.fingerprint)
        state["rejected"], state["flags_seen"] = sorted(rejected), sorted(flags)
        store.set_cycle_state(namespace, state)

    def _embed(self, lessons: Sequence[Lesson]) -> None:
        if self.retriever.embedder is None or not lessons:
            return
        try:
            self.retriever.embed_lessons(lessons)
        except Exception as exc:  # the lessons are written; embed_missing() catches up
            log.warning(
                "embedding %d merged lesson(s) failed (%s: %s)", len(lessons), type(exc).__name__, exc
            )
