"""The REST API: every operation of :class:`~lessonbank.LessonBank` under
``/api/v1/ns/{namespace}/…``, one route per method, answering the method's records as JSON.

Each route takes the bank of its path's namespace from :mod:`.deps` in the role it needs (read,
write, admin: see :mod:`.auth`), so no route can reach another namespace, and ids are looked up in
that namespace only (another namespace's id is 404). Request bodies are the models of
:mod:`.rest_models`, with their limits; the bank's own errors become JSON with a stable code in
:mod:`.app`. The bank is synchronous, so the routes are plain functions that FastAPI runs in its
thread pool, never on the event loop.

Two rules are the server's, not the bank's: an audited decision names the key that made it (the
``actor`` a client sends is kept, followed by the key), and restoring a quarantined or pending
lesson is its approval, so it needs an admin key even though restoring an archived one needs write.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from fastapi import APIRouter, Path, Query
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from lessonbank.loop.analytics import analyze
from lessonbank.models import AuditEntry, ContextBlock, Decision, Episode, Hit, Job, Lesson
from lessonbank.operations import ADMIN_LESSON_FIELDS, OPERATIONS, restore_operation, role_of
from lessonbank.ports import LessonSort
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.server.auth import Principal
from lessonbank.server.deps import Bank, Who, authorize
from lessonbank.server.rest_models import (
    MAX_K,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    NAME_CHARS,
    ActorBody,
    AddLessonBody,
    ApproveBody,
    ArchiveBody,
    ConsolidateBody,
    ContextBody,
    CoreMemory,
    Count,
    Done,
    DryRunBody,
    EditBody,
    EndSessionBody,
    ExpandBody,
    FinishGoalBody,
    FlushBody,
    ImportBody,
    JobStatuses,
    Offset,
    PurgeJobsBody,
    RecallBody,
    RecordBody,
    ReflectBody,
    RejectBody,
    RetentionBody,
    RetryJobsBody,
)
from lessonbank.services.expansion import ExpansionReport
from lessonbank.services.transfer import ExportFormat

router = APIRouter()
FLUSH_POLL_S = 0.05
FLUSH_LOOK_THREADS = 2  # looks at the queue by waiting flushes, at once: the other requests keep the rest
_FLUSH_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
    weakref.WeakKeyDictionary()
)
log = logging.getLogger("lessonbank.server")

Id = Annotated[str, Path(min_length=1, max_length=NAME_CHARS)]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
Text = Annotated[str | None, Query(min_length=1, max_length=NAME_CHARS)]
Many = Annotated[list[str] | None, Query(max_length=100)]
F = TypeVar("F", bound=Callable[..., Any])
EXPORT_TYPES = {"json": "application/json", "jsonl": "application/x-ndjson", "markdown": "text/markdown"}


def _route(name: str, **options: Any) -> Callable[[F], F]:
    """Declare operation ``name``'s route from the table: its method, path and summary; the route is
    named after the operation, which is how :data:`~lessonbank.server.deps.Bank` finds its role."""
    operation = OPERATIONS[name]
    assert operation.rest is not None, f"operation {name} has no REST route"
    method, path = operation.rest
    return router.api_route(path, methods=[method], name=name, summary=operation.summary, **options)


def _actor(who: Principal, actor: str) -> str:
    """The audit log's actor: what the client says, and the key it used (a key cannot pass for another)."""
    if who.open or actor == who.name:
        return actor
    return f"{actor} (key {who.name})"[:NAME_CHARS]


def _many(values: list[str] | None) -> str | list[str] | None:
    """A repeated query parameter as the bank takes it: one value is a string, none is None."""
    if not values:
        return None
    return values[0] if len(values) == 1 else values


# ---------------------------------------------------------------------- episodes and reflection


@_route("record", status_code=201, tags=["episodes"])
def record(namespace: str, body: RecordBody, bank: Bank) -> Episode:
    """Store one attempt at a task; its reflection (if the policy wants one) is queued, never awaited."""
    return bank.record(body.episode, context_ids=body.context_ids)


@_route("reflect", tags=["episodes"])
def reflect(namespace: str, episode_id: Id, body: ReflectBody, bank: Bank) -> Decision:
    """Queue a reflection on a stored episode (trigger ``manual``), whatever the policy said."""
    return bank.reflect(episode_id, reflector=body.reflector)


@_route("decisions", tags=["episodes"])
def decisions(namespace: str, bank: Bank, agent: Text = None, limit: Limit = 50) -> list[dict[str, Any]]:
    return bank.decisions(agent=agent, limit=limit)


@_route("show", tags=["episodes"])
def show(namespace: str, record_id: Id, bank: Bank) -> dict[str, Any]:
    """A lesson, episode (with its decision and reflections), job or reflection of this namespace."""
    return bank.show(record_id)


@_route("search_reflections", tags=["episodes"])
def search_reflections(
    namespace: str,
    bank: Bank,
    failure_category: Many = None,
    min_confidence: Annotated[float, Query(ge=0.0, le=1.0)] = 0.0,
    keywords: Many = None,
    limit: Limit = 10,
) -> list[dict[str, Any]]:
    """AIWG reflection records, newest first, by failure category, confidence and keywords."""
    return bank.search_reflections(
        failure_category=_many(failure_category),
        min_confidence=min_confidence,
        keywords=keywords or (),
        limit=limit,
    )


# ---------------------------------------------------------------------- lessons


@_route("add_lesson", status_code=201, tags=["lessons"])
def add_lesson(namespace: str, body: AddLessonBody, bank: Bank, who: Who) -> Lesson:
    """Store a lesson without an LLM (tags ``reflexion``, ``trigger:manual``, ``user-supplied``).
    Adding it pinned is what editing reserves for admin."""
    if body.pinned:
        authorize(who, namespace, "pin_lesson")
    return bank.add_lesson(
        body.text,
        tags=body.tags,
        kind=body.kind,
        task_type=body.task_type,
        agent=body.agent,
        goal_id=body.goal_id,
        importance=body.importance,
        pinned=body.pinned,
        learned_from=body.learned_from,
    )


@_route("lessons", tags=["lessons"])
def lessons(
    namespace: str,
    bank: Bank,
    kind: Many = None,
    tags: Many = None,
    status: Annotated[list[str], Query(max_length=10)] = ["active"],  # noqa: B006 (FastAPI copies it)
    limit: Limit = 100,
    offset: Offset = 0,
    sort: LessonSort = "created",
    tier: Literal["active", "fading", "dormant", "archive"] | None = None,
) -> list[Lesson]:
    """Stored lessons, filtered (repeat ``kind``, ``tags``, ``status`` for several) and sorted; with
    ``tier`` only those whose decay score is in that tier now."""
    return bank.lessons(
        kind=_many(kind), tags=tags or (), status=status, limit=limit, offset=offset, sort=sort, tier=tier
    )


@_route("get_lesson", tags=["lessons"])
def get_lesson(namespace: str, lesson_id: Id, bank: Bank) -> Lesson:
    return bank.get_lesson(lesson_id)


@_route("forget", status_code=204, tags=["lessons"])
def forget(
    namespace: str,
    lesson_id: Id,
    bank: Bank,
    who: Who,
    actor: Annotated[str, Query(min_length=1, max_length=NAME_CHARS)] = "api",
) -> Response:
    """Delete a lesson for good (audited); archive it instead to keep it."""
    bank.forget(lesson_id, actor=_actor(who, actor))
    return Response(status_code=204)


@_route("archive", tags=["lessons"])
def archive(namespace: str, lesson_id: Id, body: ArchiveBody, bank: Bank, who: Who) -> Lesson:
    """Soft-delete: kept and audited, no longer recalled or injected."""
    return bank.archive(lesson_id, reason=body.reason, actor=_actor(who, body.actor))


@_route("edit_lesson", tags=["lessons"])
def edit_lesson(namespace: str, lesson_id: Id, body: EditBody, bank: Bank, who: Who) -> Lesson:
    """Pin or unpin a lesson, set its tags or importance (audited). A person's word: admin, since a
    pinned lesson never decays and no cycle merges or archives it."""
    return bank.edit_lesson(
        lesson_id,
        pinned=body.pinned,
        tags=body.tags,
        importance=body.importance,
        actor=_actor(who, body.actor),
    )


@_route("restore", tags=["lessons"])
def restore(namespace: str, lesson_id: Id, body: ActorBody, bank: Bank, who: Who) -> Lesson:
    """Make an archived lesson active again. For a quarantined or pending lesson this is its
    approval, which needs an admin key."""
    authorize(who, namespace, restore_operation(bank.get_lesson(lesson_id)))
    return bank.restore(lesson_id, actor=_actor(who, body.actor))


@_route("recall", tags=["lessons"])
def recall(namespace: str, body: RecallBody, bank: Bank) -> list[Hit]:
    """The ``k`` best lessons with their score parts (lexical, vector, temporal, utility)."""
    return bank.recall(
        body.query,
        k=body.k,
        kind=body.kind,
        tags=body.tags,
        task_type=body.task_type,
        agent=body.agent,
        goal_id=body.goal_id,
        mode=body.mode,
        hyde=body.hyde,
    )


@_route("context", tags=["lessons"])
def context(namespace: str, body: ContextBody, bank: Bank) -> ContextBlock:
    """The lessons to inject for ``task``, rendered, never over ``budget_tokens``; counts as use."""
    return bank.context(
        body.task,
        goal_id=body.goal_id,
        agent=body.agent,
        task_type=body.task_type,
        budget_tokens=body.budget_tokens,
        formats=body.formats,
        kind=body.kind,
        tags=body.tags,
    )


@_route("audit", tags=["lessons"])
def audit(namespace: str, bank: Bank, lesson_id: Text = None, limit: Limit = 100) -> list[AuditEntry]:
    """Who changed what and when, newest first (of one lesson when given)."""
    return bank.audit(lesson_id=lesson_id, limit=limit)


@_route("import_lessons", tags=["lessons"])
def import_lessons(namespace: str, body: ImportBody, bank: Bank, who: Who) -> dict[str, int]:
    """Bulk-add lessons (same content reinforces; invalid records are counted and skipped). Counters
    and pins (``helpful``, ``harmful``, ``access_count``, ``last_accessed``, ``pinned``) are kept for
    an admin key only: for any other they are dropped, counted in ``counters_ignored`` and logged."""
    records, ignored = body.lessons, 0
    if not who.may(namespace, role_of("import_counters")):
        records, ignored = _without_admin_fields(records)
        if ignored:
            log.warning(
                "import by key %r: counters and pins of %d lesson(s) ignored (they need admin)",
                who.name,
                ignored,
            )
    counts = bank.import_lessons(records)
    return {**counts, "counters_ignored": ignored} if ignored else counts


def _without_admin_fields(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """``records`` without the fields only an admin may set, and how many records had one."""
    kept, touched = [], 0
    for record in records:
        if any(record.get(name) not in (None, False, 0) for name in ADMIN_LESSON_FIELDS):
            touched += 1
        kept.append({key: value for key, value in record.items() if key not in ADMIN_LESSON_FIELDS})
    return kept, touched


@_route("export", tags=["lessons"])
def export(
    namespace: str, bank: Bank, format: ExportFormat = "json", live_only: bool = False
) -> StreamingResponse:
    """The namespace's lessons as json, jsonl or markdown, streamed a page at a time."""
    chunks: Iterator[str] = bank.services.catalog.iter_export(format, live_only=live_only)
    return StreamingResponse(chunks, media_type=EXPORT_TYPES[format])


@_route("embed_missing", tags=["lessons"])
def embed_missing(namespace: str, bank: Bank) -> Count:
    return Count(count=bank.embed_missing())


@_route("expand", tags=["lessons"])
def expand(namespace: str, body: ExpandBody, bank: Bank, who: Who) -> ExpansionReport:
    """Ask the LLM for example tasks that need each lesson and index them with it; ``dry_run``: only
    the plan (lessons, tokens, cost at most), nothing sent."""
    return bank.expand(body.lesson_ids, limit=body.limit, dry_run=body.dry_run, actor=_actor(who, body.actor))


@_route("rescreen", tags=["lessons"])
def rescreen(namespace: str, body: DryRunBody, bank: Bank) -> dict[str, int]:
    return bank.rescreen(dry_run=body.dry_run)


@_route("apply_retention", tags=["lessons"])
def apply_retention(namespace: str, body: RetentionBody, bank: Bank) -> dict[str, int]:
    """Lessons are never deleted here."""
    return bank.apply_retention(older_than_days=body.older_than_days, dry_run=body.dry_run)


# ---------------------------------------------------------------------- goals, rules, replay


@_route("finish_goal", tags=["goals and rules"])
def finish_goal(namespace: str, goal_id: Id, body: FinishGoalBody, bank: Bank) -> Episode:
    """The goal's insight is reflected in the background."""
    return bank.finish_goal(
        goal_id,
        title=body.title,
        status=body.status,
        outputs=body.outputs,
        errors=body.errors,
        agent=body.agent,
    )


@_route("insights", tags=["goals and rules"])
def insights(namespace: str, bank: Bank, goal_id: Text = None) -> list[Lesson]:
    return bank.insights(goal_id=goal_id)


@_route("rules", tags=["goals and rules"])
def rules(
    namespace: str, bank: Bank, agent: Text = None, stream: Literal["tactical", "strategic"] | None = None
) -> list[Lesson]:
    """Live rules (kind ``principle``), strategic first."""
    return bank.rules(agent=agent, stream=stream)


@_route("confirm_rule", tags=["goals and rules"])
def confirm_rule(namespace: str, rule_id: Id, bank: Bank) -> Lesson:
    """Extends the rule and, confirmed across 4+ weeks, promotes it to strategic."""
    return bank.confirm_rule(rule_id)


@_route("replay", tags=["goals and rules"])
def replay(
    namespace: str,
    bank: Bank,
    task: Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY_CHARS)] = None,
    task_type: Text = None,
    k: Annotated[int, Query(ge=1, le=MAX_K)] = 3,
) -> list[Lesson]:
    return bank.replay(task=task, task_type=task_type, k=k)


# ---------------------------------------------------------------------- jobs and state


@_route("jobs", tags=["jobs"])
def jobs(namespace: str, bank: Bank, status: JobStatuses = None, limit: Limit = 100) -> list[Job]:
    return bank.jobs(status=status or None, limit=limit)


@_route("pending", tags=["jobs"])
def pending(namespace: str, bank: Bank) -> dict[str, int]:
    return bank.pending()


@_route("retry_jobs", tags=["jobs"])
def retry_jobs(namespace: str, body: RetryJobsBody, bank: Bank) -> Count:
    return Count(count=bank.retry_jobs(body.job_ids))


@_route("purge_jobs", tags=["jobs"])
def purge_jobs(namespace: str, body: PurgeJobsBody, bank: Bank) -> Count:
    return Count(count=bank.purge_jobs(statuses=body.statuses))


@_route("flush", tags=["jobs"])
async def flush(namespace: str, body: FlushBody, bank: Bank) -> Done:
    """Wait until no job is queued or running (at most ``timeout`` seconds).

    The wait is on the event loop, not in a thread: each look at the queue takes a thread of a small
    pool of its own for a moment, so any number of waiting clients never starves other requests."""
    deadline = time.monotonic() + body.timeout
    done = await anyio.to_thread.run_sync(bank.flush, 0.0, limiter=_flush_looks())
    while not done:
        done_or_not = await anyio.to_thread.run_sync(bank._flush_look, deadline, limiter=_flush_looks())
        if done_or_not is not None:
            return Done(done=done_or_not)
        await anyio.sleep(FLUSH_POLL_S)
    return Done(done=True)


def _flush_looks() -> anyio.CapacityLimiter:
    """The threads flush's looks share: one limiter per event loop (a limiter belongs to its loop)."""
    loop = asyncio.get_running_loop()
    limiter = _FLUSH_LIMITERS.get(loop)
    if limiter is None:
        limiter = _FLUSH_LIMITERS[loop] = anyio.CapacityLimiter(FLUSH_LOOK_THREADS)
    return limiter


@_route("stats", tags=["jobs"])
def stats(namespace: str, bank: Bank) -> dict[str, Any]:
    return bank.stats()


@_route("analytics", tags=["jobs"])
def analytics(namespace: str, bank: Bank) -> dict[str, Any]:
    """Success rate, iterations, learning rate, failure categories and lesson reuse of the loops."""
    return analyze(bank).as_dict()


# ---------------------------------------------------------------------- consolidation


@_route("consolidate", tags=["consolidation"])
def consolidate(namespace: str, body: ConsolidateBody, bank: Bank) -> Proposal | None:
    """A pending proposal (null when there is nothing to propose, or with ``wait: false``); never applied."""
    return bank.consolidate(dry_run=body.dry_run, wait=body.wait)


@_route("end_session", tags=["consolidation"])
def end_session(namespace: str, body: EndSessionBody, bank: Bank) -> Job | None:
    """Queue a session-end cycle; null when a daily cap or the circuit breaker refused it."""
    return bank.end_session(agent=body.agent, session_id=body.session_id)


@_route("proposals", tags=["consolidation"])
def proposals(namespace: str, bank: Bank, status: Many = None, limit: Limit = 50) -> list[Proposal]:
    return bank.proposals(status=_many(status), limit=limit)


@_route("proposal", tags=["consolidation"])
def proposal(namespace: str, proposal_id: Id, bank: Bank) -> Proposal:
    return bank.proposal(proposal_id)


@_route("proposal_markdown", tags=["consolidation"], response_class=PlainTextResponse)
def proposal_markdown(namespace: str, proposal_id: Id, bank: Bank) -> PlainTextResponse:
    text = bank.services.consolidation.render(proposal_id)
    return PlainTextResponse(text, media_type="text/markdown; charset=utf-8")


@_route("approve", tags=["consolidation"])
def approve(namespace: str, proposal_id: Id, body: ApproveBody, bank: Bank, who: Who) -> Proposal:
    """Apply it, all or nothing: ``only`` some operation ids (``core``: the core memory rewrite),
    ``edits`` the text to write instead of the cycle's. 409 if a lesson it touches changed since."""
    return bank.approve(proposal_id, only=body.only, edits=body.edits, actor=_actor(who, body.actor))


@_route("reject", tags=["consolidation"])
def reject(namespace: str, proposal_id: Id, body: RejectBody, bank: Bank, who: Who) -> Proposal:
    return bank.reject(proposal_id, reason=body.reason, actor=_actor(who, body.actor))


@_route("revert", tags=["consolidation"])
def revert(namespace: str, proposal_id: Id, body: ActorBody, bank: Bank, who: Who) -> Proposal:
    return bank.revert(proposal_id, actor=_actor(who, body.actor))


@_route("dreams", tags=["consolidation"])
def dreams(namespace: str, bank: Bank, limit: Limit = 50) -> list[DreamRun]:
    """Every consolidation cycle of this namespace, newest first."""
    return bank.dreams(limit=limit)


@_route("core_memory", tags=["consolidation"])
def core_memory(namespace: str, bank: Bank) -> CoreMemory:
    return CoreMemory(text=bank.core_memory())
