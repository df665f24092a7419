"""The memory store's consolidation records (the ConsolidationStore port): proposals, dream-log rows
and cycle states in dicts of the database, copied in and out.

``apply_proposal`` is one step under the database's lock: every check (``stores/applying.py``) runs
before the first write, and the writes (lessons through the store's own put, which keeps the index
in step, their pool caps, the audit rows, the proposal) cannot fail after it, so another thread sees
all of it or none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from lessonbank.errors import NotFoundError
from lessonbank.lessons import LessonWriter
from lessonbank.models import AuditEntry, Lesson
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.redact import redact_audit
from lessonbank.scoping import check_id_free
from lessonbank.stores.applying import check_writes, newest_dreams, newest_proposals
from lessonbank.stores.parts import Application, AppliesProposals


class ConsolidationData(Protocol):
    """What of a memory database the consolidation records use."""

    lessons: dict[str, Lesson]
    audit: list[AuditEntry]
    proposals: dict[str, Proposal]
    dream_log: dict[str, DreamRun]
    cycle_states: dict[str, dict[str, Any]]

    def holder_of(self, namespace: str, content_hash: str) -> str | None: ...


class MemoryConsolidation(AppliesProposals):
    """Consolidation methods of the memory store; the store provides its locked database, ``_put``
    (store a lesson, replacing the one given, and index it) and ``_keep_cap``."""

    def _db(self) -> AbstractContextManager[ConsolidationData]:
        raise NotImplementedError

    def _put(self, db: Any, lesson: Lesson, old: Lesson | None) -> None:
        raise NotImplementedError

    def _keep_cap(self, db: Any, written: Lesson) -> None:
        raise NotImplementedError

    def save_proposal(self, proposal: Proposal) -> None:
        with self._db() as db:
            held = db.proposals.get(proposal.id)
            check_id_free("proposal", proposal.id, proposal.namespace, held.namespace if held else None)
            db.proposals[proposal.id] = proposal.model_copy(deep=True)

    def get_proposal(self, proposal_id: str, *, namespace: str) -> Proposal:
        with self._db() as db:
            found = db.proposals.get(proposal_id)
            if found is None or found.namespace != namespace:
                raise NotFoundError("proposal", proposal_id)
            return found.model_copy(deep=True)

    def list_proposals(
        self, namespace: str, *, statuses: Sequence[str] | None = None, limit: int = 50
    ) -> list[Proposal]:
        with self._db() as db:
            mine = [p for p in db.proposals.values() if p.namespace == namespace]
            return [p.model_copy(deep=True) for p in newest_proposals(mine, statuses, limit)]

    def _apply(self, application: Application) -> None:
        proposal, state = application.proposal, application.state
        new_state = None if state is None else _json_copy(state)
        prepared = [LessonWriter.prepared(lesson).model_copy(deep=True) for lesson in application.writes]
        with self._db() as db:
            stored = {x.id: db.lessons[x.id] for x in prepared if x.id in db.lessons}
            check_writes(
                proposal,
                prepared,
                stored,
                lambda content_hash: db.holder_of(proposal.namespace, content_hash),
            )
            for lesson in prepared:
                self._put(db, lesson, stored.get(lesson.id))
            for lesson in prepared:  # after every write: an eviction never meets a write still to come
                self._keep_cap(db, lesson)
            db.audit.extend(redact_audit(entry).model_copy(deep=True) for entry in application.audit)
            db.proposals[proposal.id] = proposal.model_copy(deep=True)
            if new_state is not None:
                db.cycle_states[proposal.namespace] = new_state

    def save_dream(self, run: DreamRun) -> None:
        with self._db() as db:
            held = db.dream_log.get(run.id)
            check_id_free("dream run", run.id, run.namespace, held.namespace if held else None)
            db.dream_log[run.id] = run.model_copy(deep=True)

    def dreams(self, namespace: str, *, limit: int = 50) -> list[DreamRun]:
        with self._db() as db:
            mine = [r for r in db.dream_log.values() if r.namespace == namespace]
            return [r.model_copy(deep=True) for r in newest_dreams(mine, limit)]

    def cycle_state(self, namespace: str) -> dict[str, Any]:
        with self._db() as db:
            return _json_copy(db.cycle_states.get(namespace, {}))

    def set_cycle_state(self, namespace: str, state: dict[str, Any]) -> None:
        with self._db() as db:
            db.cycle_states[namespace] = _json_copy(state)


def _json_copy(state: dict[str, Any]) -> dict[str, Any]:
    """A copy as the other stores give it back: through JSON (so a value that is not JSON fails here too)."""
    return dict(json.loads(json.dumps(state)))
