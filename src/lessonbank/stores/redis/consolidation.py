"""The Redis store's consolidation records (the ConsolidationStore port).

Keys (see ``db.py`` for ``B`` and how parts are encoded): ``B{ns}:proposal:{id}`` the proposal's
JSON, ``B{ns}:proposals`` zset of its ids by ``created_at``; ``B{ns}:dream:{id}`` a dream-log row's
JSON, ``B{ns}:dreams`` zset of ids by ``started_at``; ``B{ns}:cycle`` the cycle state's JSON. A
proposal's or run's id is entered in ``B:where`` (id → namespace), so another namespace cannot take it.

``apply`` is one optimistic transaction (``RedisDatabase.transact``): it WATCHes the touched lessons'
keys (and the content-hash keys of what it writes, and their pools), reads and checks them
(``stores/applying.py``), then queues in one MULTI/EXEC the lessons (through the index's write, which
keeps tokens, tags, hashes and counters in step), their pools' evictions, the audit rows and the
proposal; a watched key changed meanwhile plans it all again on what is stored then.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from lessonbank.errors import NotFoundError
from lessonbank.lessons import LessonWriter
from lessonbank.models import Lesson
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.scoping import check_id_free
from lessonbank.stores.applying import check_writes
from lessonbank.stores.parts import Application, ForwardsConsolidation
from lessonbank.stores.redis.audit import RedisAudit
from lessonbank.stores.redis.db import Pipe, RedisDatabase
from lessonbank.stores.redis.index import RedisLessonIndex
from lessonbank.stores.redis.pools import RedisPools

# Queues a transaction's planned ``steps`` (lesson id → (old, new)); see ``pools.py``.
ApplySteps = Callable[[Pipe, dict[str, Any], Any], Any]


class RedisConsolidation:
    """Proposals, the dream log and cycle states of a Redis database."""

    def __init__(
        self,
        db: RedisDatabase,
        index: RedisLessonIndex,
        pools: RedisPools,
        audit: RedisAudit,
        apply_steps: ApplySteps,
    ) -> None:
        self.db = db
        self.index = index
        self.pools = pools
        self.audit = audit
        self.apply_steps = apply_steps

    # ----------------------------------------------------------------- proposals

    def save_proposal(self, proposal: Proposal) -> None:
        def plan(pipe: Pipe) -> Callable[[Pipe], None]:
            check_id_free(
                "proposal", proposal.id, proposal.namespace, self.db.r.hget(self.db.where_key, proposal.id)
            )
            return lambda p: self.q_save(p, proposal)

        self.db.transact(plan)

    def q_save(self, pipe: Pipe, proposal: Proposal) -> None:
        ns = proposal.namespace
        pipe.set(self.db.k(ns, "proposal", proposal.id), proposal.model_dump_json())
        pipe.zadd(self.db.k(ns, "proposals"), {proposal.id: proposal.created_at.timestamp()})
        pipe.hsetnx(self.db.where_key, proposal.id, ns)  # never moves another namespace's id

    def get_proposal(self, proposal_id: str, *, namespace: str) -> Proposal:
        data = self.db.run(lambda: self.db.r.get(self.db.k(namespace, "proposal", proposal_id)))
        if data is None:
            raise NotFoundError("proposal", proposal_id)
        return Proposal.model_validate_json(data)

    def list_proposals(self, namespace: str, statuses: Sequence[str] | None, limit: int) -> list[Proposal]:
        if limit <= 0 or (statuses is not None and not statuses):
            return []

        def run() -> list[Proposal]:
            found: list[Proposal] = []
            start, page = 0, max(limit, 100)
            while len(found) < limit:  # newest first, a page at a time, filtered by status here
                ids = self.db.r.zrevrange(self.db.k(namespace, "proposals"), start, start + page - 1)
                if not ids:
                    break
                rows = self.db.r.mget([self.db.k(namespace, "proposal", i) for i in ids])
                for row in rows:
                    proposal = Proposal.model_validate_json(row) if row is not None else None
                    if proposal is not None and (statuses is None or proposal.status in statuses):
                        found.append(proposal)
                start += page
            return found[:limit]

        return self.db.run(run)

    def apply(self, application: Application) -> None:
        proposal, audit, state = application.proposal, application.audit, application.state
        prepared = [LessonWriter.prepared(lesson) for lesson in application.writes]
        ns = proposal.namespace

        def plan(pipe: Pipe) -> Callable[[Pipe], None]:
            stored: dict[str, Lesson] = {}
            for lesson_id in sorted({lesson.id for lesson in prepared}):
                old = self.index.read_lesson(pipe, ns, lesson_id)  # WATCHes the lesson's key
                if old is not None:
                    stored[lesson_id] = old
                else:
                    check_id_free("lesson", lesson_id, ns, pipe.hget(self.db.where_key, lesson_id))

            def holder_of(content_hash: str) -> str | None:
                key = self.db.k(ns, "hash", content_hash)
                pipe.watch(key)
                holder: str | None = pipe.get(key)
                return holder

            check_writes(proposal, prepared, stored, holder_of)
            steps: dict[str, Any] = {}
            for lesson in prepared:
                steps[lesson.id] = (stored.get(lesson.id), lesson)
            for lesson in prepared:
                self.pools.plan(pipe, lesson, steps)

            def write(p: Pipe) -> None:
                self.apply_steps(p, steps, None)
                self.audit.q_append(p, audit)
                self.q_save(p, proposal)
                if state is not None:
                    p.set(self.db.k(ns, "cycle"), json.dumps(state))

            return write

        self.db.transact(plan)

    # ----------------------------------------------------------------- dream log and cycle state

    def save_dream(self, run: DreamRun) -> None:
        ns = run.namespace

        def plan(pipe: Pipe) -> Callable[[Pipe], None]:
            check_id_free("dream run", run.id, ns, self.db.r.hget(self.db.where_key, run.id))

            def write(p: Pipe) -> None:
                p.set(self.db.k(ns, "dream", run.id), run.model_dump_json())
                p.zadd(self.db.k(ns, "dreams"), {run.id: run.started_at.timestamp()})
                p.hsetnx(self.db.where_key, run.id, ns)

            return write

        self.db.transact(plan)

    def dreams(self, namespace: str, limit: int) -> list[DreamRun]:
        if limit <= 0:
            return []

        def run() -> list[DreamRun]:
            ids = self.db.r.zrevrange(self.db.k(namespace, "dreams"), 0, limit - 1)
            rows = self.db.r.mget([self.db.k(namespace, "dream", i) for i in ids]) if ids else []
            return [DreamRun.model_validate_json(row) for row in rows if row is not None]

        return self.db.run(run)

    def cycle_state(self, namespace: str) -> dict[str, Any]:
        data = self.db.run(lambda: self.db.r.get(self.db.k(namespace, "cycle")))
        return dict(json.loads(data)) if data is not None else {}

    def set_cycle_state(self, namespace: str, state: dict[str, Any]) -> None:
        data = json.dumps(state)
        self.db.run(lambda: self.db.r.set(self.db.k(namespace, "cycle"), data))


class BuildsConsolidation(ForwardsConsolidation):
    """A Redis store's ``consolidation`` part, built on first use from its other parts."""

    db: RedisDatabase
    index: RedisLessonIndex
    pools: RedisPools
    audit: RedisAudit

    def _q_apply(self, pipe: Pipe, steps: dict[str, Any], result: Any) -> Any:
        raise NotImplementedError

    @cached_property
    def consolidation(self) -> RedisConsolidation:  # type: ignore[override]
        return RedisConsolidation(self.db, self.index, self.pools, self.audit, self._q_apply)
