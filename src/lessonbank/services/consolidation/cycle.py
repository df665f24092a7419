"""The consolidation cycle of one namespace: it proposes, a person decides (seed 002).

A cycle reads the namespace's lessons, runs the deterministic pre-pass (:mod:`.prepass`), turns its
candidates into operations (:mod:`.operations`), validates them, and stores what is left as a
``pending`` :class:`~lessonbank.proposals.Proposal`; every cycle, whatever its outcome, is a row in
the dream log. Nothing is applied by a cycle.

Deciding, by a person (``actor``):

- **approve** (all operations, or ``only`` some by id: a partial approval, the others rejected) applies
  them in one transaction (``Store.apply_proposal``): a MERGE adds the merged lesson and marks its
  sources ``superseded_by`` it (never deleted; :mod:`.merges`: the union of their scopes, the model's
  wording when it passes, counters summed); an ARCHIVE archives (soft); an EXTRACT or PATTERN adds
  its lesson; a FLAG what the person decided for it (:mod:`.flags`: keep A, keep B, both narrowed,
  dismiss), given as the flag's edit. Each change is an audit row naming the proposal. If a lesson an operation touches
  changed since the proposal was made, nothing is applied (:class:`~lessonbank.errors.ConflictError`).
  A lesson the screens found reading as instructions (:mod:`.screens`, applied when the proposal is
  made and again on approval) is added ``quarantined``, and a merge into it supersedes nothing.
- **reject**: nothing applied; each operation's fingerprint is remembered in the namespace's cycle
  state, and no later cycle proposes it again. A FLAG (a contradiction shown to the person) is
  remembered once shown in a decided proposal, approved or not.
- **revert** an applied proposal: from its audit rows, each lesson it changed goes back to what it
  was, and each lesson it added is archived; refused if one of them changed since.

With an LLM, the cycle runs seed 002's five phases after the deterministic part (:mod:`.phases`,
within the cycle's token budget) and proposes their operations and core memory rewrite too; an
approval writes the core memory, the evolution log and the reflection log (:mod:`.documents`) in
its transaction. Queued as a job with its triggers: :mod:`.jobs` and :mod:`.triggers`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lessonbank.errors import ConflictError, InputError
from lessonbank.llm import LLM
from lessonbank.llm.base import run_sync
from lessonbank.models import LESSON_STATUSES, AuditAction, AuditEntry, Lesson
from lessonbank.ports import LessonQuery
from lessonbank.proposals import PROPOSAL_STATUSES, CycleTrigger, DreamRun, Operation, Proposal
from lessonbank.redact import redact
from lessonbank.requests import ApproveRequest
from lessonbank.retrieval import Retriever
from lessonbank.services.consolidation import offers
from lessonbank.services.consolidation.applying import changes
from lessonbank.services.consolidation.documents import EMPTY_CORE, Documents, with_pinned
from lessonbank.services.consolidation.edits import CORE_ID, apply_edits, keep_pinned
from lessonbank.services.consolidation.flags import open_flags
from lessonbank.services.consolidation.inputs import gather, pending_review
from lessonbank.services.consolidation.merges import guarded_merges, prefer_model_wording
from lessonbank.services.consolidation.mirror import mirror_decision
from lessonbank.services.consolidation.operations import admissions, deterministic_operations, validate
from lessonbank.services.consolidation.phases import Budget, PhaseResult, Phases, past_deadline
from lessonbank.services.consolidation.prepass import find_candidates, is_live
from lessonbank.services.consolidation.render import render_pending
from lessonbank.services.consolidation.repeats import PENDING_SCAN, fresh, fresh_core, remember
from lessonbank.services.consolidation.repeats import remembered as decided_on
from lessonbank.services.consolidation.screens import screened
from lessonbank.services.consolidation.triggers import next_due
from lessonbank.services.lifecycle import check_actor, clean_reason
from lessonbank.services.pools import every_lesson
from lessonbank.services.scope import Scope, check_count
from lessonbank.text import TokenCounter, estimate_tokens

log = logging.getLogger("lessonbank.consolidation")

DECIDED = ("applied", "partially_applied", "rejected", "reverted")


@dataclasses.dataclass(eq=False)
class Consolidator:
    """Runs cycles for the bank's namespace and applies what a person decides."""

    scope: Scope
    _: dataclasses.KW_ONLY
    retriever: Retriever
    llm: LLM | None = None
    count_tokens: TokenCounter = estimate_tokens

    def for_namespace(self, namespace: str) -> Consolidator:
        """The same consolidator serving ``namespace`` (a worker runs cycles of many namespaces)."""
        if namespace == self.scope.namespace:
            return self
        return dataclasses.replace(self, scope=dataclasses.replace(self.scope, namespace=namespace))

    # ------------------------------------------------------------------ the cycle

    def run(
        self, *, trigger: CycleTrigger = "manual", dry_run: bool = False, deadline: float | None = None
    ) -> tuple[DreamRun, Proposal | None]:
        """One cycle: the dream-log row and the proposal it made (None when there was nothing to
        propose). ``dry_run`` computes the deterministic part of the proposal and stores nothing (no
        proposal, no dream row): it calls no model, so it costs nothing."""
        if not isinstance(dry_run, bool):
            raise InputError(f"dry_run must be true or false, got {dry_run!r}", field="dry_run")
        store, namespace = self.scope.store, self.scope.namespace
        started = time.monotonic()
        run = DreamRun(namespace=namespace, trigger=trigger, started_at=self.scope.now())
        if not dry_run:
            store.save_dream(run)
        spent = PhaseResult()
        try:
            lessons = self._all_lessons()
            proposal = self._propose(run, lessons, spent, use_llm=not dry_run, deadline=deadline)
            past_deadline(deadline, "storing its proposal")
        except Exception as exc:
            run = run.model_copy(
                update={
                    "outcome": "failed",
                    "error": redact(f"{type(exc).__name__}: {exc}")[:2_000],
                    "duration_s": round(time.monotonic() - started, 3),
                    "tokens_in": spent.tokens_in,
                    "tokens_out": spent.tokens_out,
                    "cost_usd": spent.cost_usd,
                }
            )
            if not dry_run:
                store.save_dream(run)
            raise
        changes = _changes_anything(proposal)
        update: dict[str, Any] = {
            "duration_s": round(time.monotonic() - started, 3),
            "items_processed": proposal.items_processed,
            "summary": proposal.summary,
            "outcome": "proposed" if changes else "empty",
            "proposal_id": proposal.id if changes else None,
            "tokens_in": proposal.tokens_in,
            "tokens_out": proposal.tokens_out,
            "cost_usd": proposal.cost_usd,
        }
        run = run.model_copy(update=update)
        if dry_run:
            return run, proposal if changes else None
        if changes:
            store.save_proposal(proposal)
        state = store.cycle_state(namespace)
        state["last_reflection"] = run.started_at.isoformat()
        offers.remember(state, spent.offered)
        newest = proposal.metadata.get("newest_episode")
        if newest:
            state["last_reflection_episode"] = newest
        if changes:
            documents = Documents.from_state(state).with_reflection(
                proposal.id,
                run.started_at,
                str(proposal.metadata.get("insight") or proposal.summary),
                str(proposal.metadata.get("reflection") or proposal.summary),
            )
            state = documents.into(state)
        store.set_cycle_state(namespace, state)
        store.save_dream(run)
        return run, proposal if changes else None

    def _all_lessons(self) -> list[Lesson]:
        query = LessonQuery(self.scope.namespace, statuses=list(LESSON_STATUSES), live_only=False)
        return every_lesson(self.scope.store, query)

    def _propose(
        self,
        run: DreamRun,
        lessons: Sequence[Lesson],
        spent: PhaseResult,
        *,
        use_llm: bool,
        deadline: float | None = None,
    ) -> Proposal:
        """The proposal of one cycle: the deterministic operations, then (with an LLM, unless
        ``use_llm`` is off: a dry run spends nothing) the five phases' operations and core memory,
        all validated. ``spent`` collects the phases' usage, also when one fails."""
        now = self.scope.now()
        by_id = {lesson.id: lesson for lesson in lessons}
        vectors = None
        if self.retriever.embedder is not None:
            vectors = self.retriever.index(self.scope.namespace).vectors()
        candidates = find_candidates(
            lessons, now, vectors=vectors, cosine=self.scope.settings.consolidation_cosine
        )
        store, namespace = self.scope.store, self.scope.namespace
        state = store.cycle_state(namespace)
        candidates.offers = offers.unseen(candidates.offers, state)
        remembered = decided_on(state)
        operations = deterministic_operations(candidates, by_id, now, rejected=remembered)
        operations += [op for op in admissions(pending_review(lessons)) if op.fingerprint not in remembered]
        documents = Documents.from_state(state)
        pinned = [lesson for lesson in lessons if lesson.pinned and is_live(lesson, now)]
        data = gather(self.scope, lessons, candidates, documents, state, now)
        core = with_pinned(documents.core_memory or EMPTY_CORE, pinned) if pinned else documents.core_memory
        llm = self.llm if use_llm else None
        if llm is not None:
            settings = self.scope.settings
            budget = Budget(
                settings.consolidation_max_tokens_in,
                settings.consolidation_max_tokens_out,
                settings.consolidation_max_cost_usd,
            )
            run_sync(Phases(llm, budget, self.count_tokens, deadline=deadline).run(data, spent))
            seen = remembered | {op.fingerprint for op in operations}
            model = [op for op in spent.operations if op.fingerprint not in seen]
            model, refused = guarded_merges(model, by_id, candidates.clusters, now)
            spent.dropped += refused  # shown with why: the guards outweigh the model's word
            operations = prefer_model_wording(operations, model, by_id, now)
            core = with_pinned(spent.core_memory or core, pinned, self.count_tokens)
        pending = store.list_proposals(namespace, statuses=["pending"], limit=PENDING_SCAN)
        operations = fresh(operations, by_id, documents, pending)
        kept, dropped = validate(operations, by_id, now=now)
        dropped += spent.dropped
        new_core = core if core.strip() != documents.core_memory.strip() else None
        new_core = fresh_core(new_core, state, pending)
        touched = {lesson_id for op in kept for lesson_id in op.lesson_ids}
        counts = {kind: sum(op.kind == kind for op in kept) for kind in ("merge", "archive", "flag")}
        others = len(kept) - sum(counts.values())
        summary = (
            f"{len(lessons)} lessons surveyed: {counts['merge']} merge(s), {counts['archive']} archival(s), "
            f"{counts['flag']} contradiction(s) to look at"
            + (f", {others} other operation(s)" if others else "")
            + ("; core memory rewritten" if new_core is not None else "")
            + (f"; {len(dropped)} operation(s) dropped by validation" if dropped else "")
        )
        if data.milestone:
            summary += f". Reflection #{data.reflection_number} is a milestone: {data.milestone}"
        metadata: dict[str, Any] = {
            "reflection_number": data.reflection_number,
            "episodes": len(data.episodes),
            "core_before": documents.core_memory,
            "pinned": [lesson.id for lesson in pinned],  # kept in the core memory whatever an edit says
        }
        if data.episodes:
            metadata["newest_episode"] = max(e.created_at for e in data.episodes).isoformat()
        if llm is not None:
            metadata.update(
                insight=spent.insight,
                reflection=spent.reflection,
                phases=[vars(usage) for usage in spent.usage],
                model=llm.model,
                withheld=spent.withheld,
            )
        proposal = Proposal(
            namespace=self.scope.namespace,
            cycle_id=run.id,
            trigger=run.trigger,
            created_at=now,
            operations=[*kept, *dropped],
            core_memory=new_core,
            questions=spent.questions,
            summary=summary,
            based_on={lesson_id: by_id[lesson_id].updated_at for lesson_id in sorted(touched)},
            items_processed=len(lessons) + len(data.episodes),
            tokens_in=spent.tokens_in,
            tokens_out=spent.tokens_out,
            cost_usd=spent.cost_usd,
            metadata=metadata,
        )
        # Screened before it is stored: no secret in its row, and the person sees what reads as instructions.
        return screened(proposal)

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
        """The proposal as seed 002's pending reflection (Markdown); the next scheduled cycle is the
        schedule's next time unless ``next_cycle`` says otherwise."""
        proposal = self.proposal(proposal_id)
        schedule = self.scope.settings.consolidation_schedule
        if next_cycle is None and schedule:
            next_cycle = f"{next_due(schedule, self.scope.now()):%Y-%m-%d %H:%M %Z} (schedule {schedule!r})"
        ids = {i for op in proposal.operations for i in op.lesson_ids}
        lessons = {
            lesson.id: lesson
            for lesson in self.scope.store.get_lessons(sorted(ids), namespace=self.scope.namespace)
        }
        current = proposal.metadata.get("core_before")
        return render_pending(
            proposal,
            lessons,
            next_cycle=next_cycle,
            current_core=current if isinstance(current, str) else None,
        )

    def open_flags(self) -> dict[str, list[str]]:
        """Lesson id -> the lessons a pending proposal flags it as contradicting (:mod:`.flags`)."""
        return open_flags(
            self.scope.store.list_proposals(self.scope.namespace, statuses=["pending"], limit=PENDING_SCAN)
        )

    def dreams(self, *, limit: int = 50) -> list[DreamRun]:
        check_count(limit, "limit")
        return self.scope.store.dreams(self.scope.namespace, limit=limit)

    # ------------------------------------------------------------------ deciding

    def approve(self, request: ApproveRequest) -> Proposal:
        """Apply the proposal's operations (or ``only`` those ids, :data:`CORE_ID` naming the core
        memory rewrite; the others are rejected), all or nothing, with the core memory, evolution and
        reflection log in the same transaction. ``edits`` maps an operation id (or ``core``) to the
        text a person wrote instead (approve with changes). ConflictError if a lesson they touch
        changed since the proposal was made."""
        only, edits, actor = request.only, request.edits, check_actor(request.actor)
        proposal = self._pending(request.proposal_id)
        offered = [op for op in proposal.operations if op.status != "dropped"]
        offered_ids = {op.id for op in offered} | ({CORE_ID} if proposal.core_memory is not None else set())
        if only is not None:
            if isinstance(only, str):
                raise InputError("only must be a list of operation ids, not one string", field="only")
            unknown = sorted(set(only) - offered_ids)
            if unknown:
                raise InputError(
                    f"proposal {proposal.id} has no operation {', '.join(unknown)}; "
                    f"its operations: {', '.join(sorted(offered_ids))}",
                    field="only",
                )
        chosen = offered_ids if only is None else set(only)
        # Screened again: a person's edits (and a proposal stored before a screen's rule) pass it too.
        proposal = apply_edits(proposal, edits or {}, chosen, actor, self.count_tokens)
        pinned_ids = [str(i) for i in proposal.metadata.get("pinned", [])]
        pinned = [
            p for p in self.scope.store.get_lessons(pinned_ids, namespace=self.scope.namespace) if p.pinned
        ]
        proposal = screened(keep_pinned(proposal, pinned, self.count_tokens))
        now = self.scope.now()
        current = self._current(proposal)
        writes: dict[str, Lesson] = {}
        audit: list[AuditEntry] = []
        operations: list[Operation] = []
        for op in proposal.operations:
            if op.status == "dropped":
                operations.append(op)
            elif op.id in chosen:
                written = changes(
                    op,
                    current,
                    writes,
                    audit,
                    proposal=proposal,
                    now=now,
                    entry=lambda action, why: self._entry(action, actor, why, proposal, now),
                )
                operations.append(op.model_copy(update={"status": "applied", "lesson": written or op.lesson}))
            else:
                operations.append(op.model_copy(update={"status": "rejected"}))
        core_applied = proposal.core_memory is not None and CORE_ID in chosen
        decided = proposal.model_copy(
            update={
                "status": "applied" if chosen == offered_ids else "partially_applied",
                "operations": operations,
                "decided_at": now,
                "decided_by": actor,
                "metadata": {**proposal.metadata, "core_applied": core_applied},
            }
        )
        store, namespace = self.scope.store, self.scope.namespace
        state = store.cycle_state(namespace)
        documents = Documents.from_state(state)
        if core_applied and decided.core_memory is not None:
            documents = dataclasses.replace(documents, core_memory=decided.core_memory)
        number = int(proposal.metadata.get("reflection_number", documents.count) or documents.count)
        evolved = [op.text or "" for op in operations if op.kind == "evolve" and op.status == "applied"]
        documents = documents.with_evolution(evolved, number, now, self.count_tokens)
        documents = documents.with_status(proposal.id, decided.status)
        state = remember(decided, documents.into(state))
        store.apply_proposal(decided, list(writes.values()), audit, state=state)
        mirror_decision(self.scope.settings, store, decided, actor)
        self._embed(
            [
                lesson
                for lesson in writes.values()
                if lesson.superseded_by is None and lesson.status == "active"
            ]
        )
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
        store, namespace = self.scope.store, self.scope.namespace
        self.scope.store.save_proposal(decided)
        state = store.cycle_state(namespace)
        documents = Documents.from_state(state).with_status(proposal.id, "rejected")
        store.set_cycle_state(namespace, remember(decided, documents.into(state)))
        return decided

    def revert(self, proposal_id: str, *, actor: str = "api") -> Proposal:
        """Undo an applied proposal from its audit rows: each changed lesson back to what it was, each
        added lesson archived, the core memory back and its evolution entries out; all or nothing,
        refused if one of them changed since."""
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
        current = {lesson.id: lesson for lesson in store.get_lessons(touched, namespace=namespace)}
        writes: list[Lesson] = []
        audit: list[AuditEntry] = []
        based_on: dict[str, datetime] = {}
        for lesson_id in touched:
            # newest first: the first row has what the proposal left, the last what it found
            rows = [
                row
                for row in store.audit_log(namespace, lesson_id=lesson_id, limit=1_000)
                if row.proposal_id == proposal.id
            ]
            stored = current.get(lesson_id)
            if stored is None or not rows or rows[0].after is None:
                continue
            if stored.updated_at != Lesson.model_validate(rows[0].after).updated_at:
                raise ConflictError(
                    f"lesson {lesson_id} changed since proposal {proposal.id} was applied; not reverted",
                    record_id=lesson_id,
                )
            if rows[-1].before is None:
                restored = stored.model_copy(update={"status": "archived", "updated_at": now})
                summary = f"revert of {proposal.id}: added by it, archived"
            else:
                restored = Lesson.model_validate(rows[-1].before).model_copy(update={"updated_at": now})
                summary = f"revert of {proposal.id}: back to what it was"
            based_on[lesson_id] = stored.updated_at
            writes.append(restored)
            audit.append(self._entry("revert", actor, summary, proposal, now).of(stored, restored))
        state = store.cycle_state(namespace)
        documents = Documents.from_state(state)
        if proposal.metadata.get("core_applied") and proposal.core_memory is not None:
            if documents.core_memory.strip() != proposal.core_memory.strip():
                raise ConflictError(
                    f"the core memory changed since proposal {proposal.id} was applied; not reverted"
                )
            documents = dataclasses.replace(
                documents, core_memory=str(proposal.metadata.get("core_before", ""))
            )
        number = proposal.metadata.get("reflection_number")
        evolved = {op.text for op in proposal.operations if op.kind == "evolve" and op.status == "applied"}
        documents = dataclasses.replace(
            documents,
            evolution=tuple(e for e in documents.evolution if not (e.number == number and e.text in evolved)),
        ).with_status(proposal.id, "reverted")
        reverted = proposal.model_copy(
            update={"status": "reverted", "based_on": based_on, "decided_at": now, "decided_by": actor}
        )
        store.apply_proposal(reverted, writes, audit, state=documents.into(state))
        mirror_decision(self.scope.settings, store, reverted, actor)
        return reverted

    def core_memory(self) -> str:
        """The namespace's core memory document ('' before the first approved rewrite)."""
        return Documents.from_state(self.scope.store.cycle_state(self.scope.namespace)).core_memory

    def documents(self) -> Documents:
        """The namespace's core memory, evolution log and reflection log."""
        return Documents.from_state(self.scope.store.cycle_state(self.scope.namespace))

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

    def _embed(self, lessons: Sequence[Lesson]) -> None:
        if self.retriever.embedder is None or not lessons:
            return
        try:
            self.retriever.embed_lessons(lessons)
        except Exception as exc:  # the lessons are written; embed_missing() catches up
            log.warning(
                "embedding %d merged lesson(s) failed (%s: %s)", len(lessons), type(exc).__name__, exc
            )


def _changes_anything(proposal: Proposal) -> bool:
    return proposal.core_memory is not None or any(op.status != "dropped" for op in proposal.operations)
