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

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import PlainTextResponse, Response, StreamingResponse

from lessonbank.loop.analytics import analyze
from lessonbank.models import AuditEntry, ContextBlock, Decision, Episode, Hit, Job, Lesson
from lessonbank.ports import LessonSort
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.server.auth import Principal
from lessonbank.server.deps import AdminBank, ReadBank, Who, WriteBank, allowed
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
NS = "/ns/{namespace}"

Id = Annotated[str, Path(min_length=1, max_length=NAME_CHARS)]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
Text = Annotated[str | None, Query(min_length=1, max_length=NAME_CHARS)]
Many = Annotated[list[str] | None, Query(max_length=100)]
EXPORT_TYPES = {"json": "application/json", "jsonl": "application/x-ndjson", "markdown": "text/markdown"}


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


@router.post(f"{NS}/episodes", status_code=201, summary="Record an episode", tags=["episodes"])
def record(namespace: str, body: RecordBody, bank: WriteBank) -> Episode:
    """Store one attempt at a task; its reflection (if the policy wants one) is queued, never awaited."""
    return bank.record(body.episode, context_ids=body.context_ids)


@router.post(f"{NS}/episodes/{{episode_id}}/reflect", summary="Reflect on an episode", tags=["episodes"])
def reflect(namespace: str, episode_id: Id, body: ReflectBody, bank: WriteBank) -> Decision:
    """Queue a reflection on a stored episode (trigger ``manual``), whatever the policy said."""
    return bank.reflect(episode_id, reflector=body.reflector)


@router.get(f"{NS}/decisions", summary="The policy's latest decisions", tags=["episodes"])
def decisions(namespace: str, bank: ReadBank, agent: Text = None, limit: Limit = 50) -> list[dict[str, Any]]:
    return bank.decisions(agent=agent, limit=limit)


@router.get(f"{NS}/records/{{record_id}}", summary="Any record by id", tags=["episodes"])
def show(namespace: str, record_id: Id, bank: ReadBank) -> dict[str, Any]:
    """A lesson, episode (with its decision and reflections), job or reflection of this namespace."""
    return bank.show(record_id)


@router.get(f"{NS}/reflections", summary="Search past loop reflections", tags=["episodes"])
def search_reflections(
    namespace: str,
    bank: ReadBank,
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


@router.post(f"{NS}/lessons", status_code=201, summary="Add a lesson you already know", tags=["lessons"])
def add_lesson(namespace: str, body: AddLessonBody, bank: WriteBank) -> Lesson:
    """Store a lesson without an LLM (tags ``reflexion``, ``trigger:manual``, ``user-supplied``)."""
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


@router.get(f"{NS}/lessons", summary="List lessons", tags=["lessons"])
def lessons(
    namespace: str,
    bank: ReadBank,
    kind: Many = None,
    tags: Many = None,
    status: Annotated[list[str], Query(max_length=10)] = ["active"],  # noqa: B006 (FastAPI copies it)
    limit: Limit = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
    sort: LessonSort = "created",
    tier: Literal["active", "fading", "dormant", "archive"] | None = None,
) -> list[Lesson]:
    """Stored lessons, filtered (repeat ``kind``, ``tags``, ``status`` for several) and sorted; with
    ``tier`` only those whose decay score is in that tier now."""
    return bank.lessons(
        kind=_many(kind), tags=tags or (), status=status, limit=limit, offset=offset, sort=sort, tier=tier
    )


@router.get(f"{NS}/lessons/{{lesson_id}}", summary="Get a lesson", tags=["lessons"])
def get_lesson(namespace: str, lesson_id: Id, bank: ReadBank) -> Lesson:
    return bank.get_lesson(lesson_id)


@router.delete(
    f"{NS}/lessons/{{lesson_id}}", status_code=204, summary="Forget a lesson (admin)", tags=["lessons"]
)
def forget(
    namespace: str,
    lesson_id: Id,
    bank: AdminBank,
    who: Who,
    actor: Annotated[str, Query(min_length=1, max_length=NAME_CHARS)] = "api",
) -> Response:
    """Delete a lesson for good (audited); archive it instead to keep it."""
    bank.forget(lesson_id, actor=_actor(who, actor))
    return Response(status_code=204)


@router.post(f"{NS}/lessons/{{lesson_id}}/archive", summary="Archive a lesson", tags=["lessons"])
def archive(namespace: str, lesson_id: Id, body: ArchiveBody, bank: WriteBank, who: Who) -> Lesson:
    """Soft-delete: kept and audited, no longer recalled or injected."""
    return bank.archive(lesson_id, reason=body.reason, actor=_actor(who, body.actor))


@router.patch(
    f"{NS}/lessons/{{lesson_id}}", summary="Edit a lesson (pin, tags, importance)", tags=["lessons"]
)
def edit_lesson(namespace: str, lesson_id: Id, body: EditBody, bank: AdminBank, who: Who) -> Lesson:
    """Pin or unpin a lesson, set its tags or importance (audited). A person's word: admin, since a
    pinned lesson never decays and no cycle merges or archives it."""
    return bank.edit_lesson(
        lesson_id,
        pinned=body.pinned,
        tags=body.tags,
        importance=body.importance,
        actor=_actor(who, body.actor),
    )


@router.post(f"{NS}/lessons/{{lesson_id}}/restore", summary="Restore a lesson", tags=["lessons"])
def restore(namespace: str, lesson_id: Id, body: ActorBody, bank: WriteBank, who: Who) -> Lesson:
    """Make an archived lesson active again. For a quarantined or pending lesson this is its
    approval, which needs an admin key."""
    if bank.get_lesson(lesson_id).status in ("quarantined", "pending"):
        allowed(who, namespace, "admin")
    return bank.restore(lesson_id, actor=_actor(who, body.actor))


@router.post(f"{NS}/recall", summary="Recall the lessons most relevant to a query", tags=["lessons"])
def recall(namespace: str, body: RecallBody, bank: ReadBank) -> list[Hit]:
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


@router.post(f"{NS}/context", summary="A prompt block for a task, within a token budget", tags=["lessons"])
def context(namespace: str, body: ContextBody, bank: ReadBank) -> ContextBlock:
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


@router.get(f"{NS}/audit", summary="The audit log", tags=["lessons"])
def audit(namespace: str, bank: ReadBank, lesson_id: Text = None, limit: Limit = 100) -> list[AuditEntry]:
    """Who changed what and when, newest first (of one lesson when given)."""
    return bank.audit(lesson_id=lesson_id, limit=limit)


@router.post(f"{NS}/import", summary="Import lessons", tags=["lessons"])
def import_lessons(namespace: str, body: ImportBody, bank: WriteBank) -> dict[str, int]:
    """Bulk-add lessons (same content reinforces; invalid records are counted and skipped)."""
    return bank.import_lessons(body.lessons)


@router.get(f"{NS}/export", summary="Export every lesson", tags=["lessons"])
def export(
    namespace: str, bank: ReadBank, format: ExportFormat = "json", live_only: bool = False
) -> StreamingResponse:
    """The namespace's lessons as json, jsonl or markdown, streamed a page at a time."""
    chunks: Iterator[str] = bank.services.catalog.iter_export(format, live_only=live_only)
    return StreamingResponse(chunks, media_type=EXPORT_TYPES[format])


@router.post(f"{NS}/embed-missing", summary="Embed lessons that have no vector", tags=["lessons"])
def embed_missing(namespace: str, bank: WriteBank) -> Count:
    return Count(count=bank.embed_missing())


@router.post(f"{NS}/expand", summary="Example tasks for lessons written by hand (LLM)", tags=["lessons"])
def expand(namespace: str, body: ExpandBody, bank: WriteBank, who: Who) -> ExpansionReport:
    """Ask the LLM for example tasks that need each lesson and index them with it; ``dry_run``: only
    the plan (lessons, tokens, cost at most), nothing sent."""
    return bank.expand(body.lesson_ids, limit=body.limit, dry_run=body.dry_run, actor=_actor(who, body.actor))


@router.post(f"{NS}/rescreen", summary="Redact and screen every lesson again (admin)", tags=["lessons"])
def rescreen(namespace: str, body: DryRunBody, bank: AdminBank) -> dict[str, int]:
    return bank.rescreen(dry_run=body.dry_run)


@router.post(f"{NS}/retention", summary="Delete old episodes, reflections, jobs (admin)", tags=["lessons"])
def apply_retention(namespace: str, body: RetentionBody, bank: AdminBank) -> dict[str, int]:
    """Lessons are never deleted here."""
    return bank.apply_retention(older_than_days=body.older_than_days, dry_run=body.dry_run)


# ---------------------------------------------------------------------- goals, rules, replay


@router.post(f"{NS}/goals/{{goal_id}}/finish", summary="Report a goal's end", tags=["goals and rules"])
def finish_goal(namespace: str, goal_id: Id, body: FinishGoalBody, bank: WriteBank) -> Episode:
    """The goal's insight is reflected in the background."""
    return bank.finish_goal(
        goal_id,
        title=body.title,
        status=body.status,
        outputs=body.outputs,
        errors=body.errors,
        agent=body.agent,
    )


@router.get(f"{NS}/insights", summary="Goal insights", tags=["goals and rules"])
def insights(namespace: str, bank: ReadBank, goal_id: Text = None) -> list[Lesson]:
    return bank.insights(goal_id=goal_id)


@router.get(f"{NS}/rules", summary="Learned rules", tags=["goals and rules"])
def rules(
    namespace: str, bank: ReadBank, agent: Text = None, stream: Literal["tactical", "strategic"] | None = None
) -> list[Lesson]:
    """Live rules (kind ``principle``), strategic first."""
    return bank.rules(agent=agent, stream=stream)


@router.post(f"{NS}/rules/{{rule_id}}/confirm", summary="Confirm a rule", tags=["goals and rules"])
def confirm_rule(namespace: str, rule_id: Id, bank: WriteBank) -> Lesson:
    """Extends the rule and, confirmed across 4+ weeks, promotes it to strategic."""
    return bank.confirm_rule(rule_id)


@router.get(f"{NS}/replay", summary="Replay examples for a task", tags=["goals and rules"])
def replay(
    namespace: str,
    bank: ReadBank,
    task: Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY_CHARS)] = None,
    task_type: Text = None,
    k: Annotated[int, Query(ge=1, le=MAX_K)] = 3,
) -> list[Lesson]:
    return bank.replay(task=task, task_type=task_type, k=k)


# ---------------------------------------------------------------------- jobs and state


@router.get(f"{NS}/jobs", summary="List jobs", tags=["jobs"])
def jobs(namespace: str, bank: ReadBank, status: Many = None, limit: Limit = 100) -> list[Job]:
    return bank.jobs(status=_many(status), limit=limit)


@router.get(f"{NS}/jobs/pending", summary="Jobs counted by status", tags=["jobs"])
def pending(namespace: str, bank: ReadBank) -> dict[str, int]:
    return bank.pending()


@router.post(f"{NS}/jobs/retry", summary="Requeue dead-lettered jobs (admin)", tags=["jobs"])
def retry_jobs(namespace: str, body: RetryJobsBody, bank: AdminBank) -> Count:
    return Count(count=bank.retry_jobs(body.job_ids))


@router.post(f"{NS}/jobs/purge", summary="Delete finished jobs (admin)", tags=["jobs"])
def purge_jobs(namespace: str, body: PurgeJobsBody, bank: AdminBank) -> Count:
    return Count(count=bank.purge_jobs(statuses=body.statuses))


@router.post(f"{NS}/flush", summary="Wait for queued jobs", tags=["jobs"])
def flush(namespace: str, body: FlushBody, bank: WriteBank) -> Done:
    """Wait until no job is queued or running (at most ``timeout`` seconds)."""
    return Done(done=bank.flush(timeout=body.timeout))


@router.get(f"{NS}/stats", summary="Counts and the consolidation guards", tags=["jobs"])
def stats(namespace: str, bank: ReadBank) -> dict[str, Any]:
    return bank.stats()


@router.get(f"{NS}/analytics", summary="How Reflexion loops learn", tags=["jobs"])
def analytics(namespace: str, bank: ReadBank) -> dict[str, Any]:
    """Success rate, iterations, learning rate, failure categories and lesson reuse of the loops."""
    return analyze(bank).as_dict()


# ---------------------------------------------------------------------- consolidation


@router.post(f"{NS}/consolidate", summary="Run a consolidation cycle", tags=["consolidation"])
def consolidate(namespace: str, body: ConsolidateBody, bank: WriteBank) -> Proposal | None:
    """A pending proposal (null when there is nothing to propose, or with ``wait: false``); never applied."""
    return bank.consolidate(dry_run=body.dry_run, wait=body.wait)


@router.post(f"{NS}/sessions/end", summary="End a session", tags=["consolidation"])
def end_session(namespace: str, body: EndSessionBody, bank: WriteBank) -> Job | None:
    """Queue a session-end cycle; null when a daily cap or the circuit breaker refused it."""
    return bank.end_session(agent=body.agent, session_id=body.session_id)


@router.get(f"{NS}/proposals", summary="List proposals", tags=["consolidation"])
def proposals(namespace: str, bank: ReadBank, status: Many = None, limit: Limit = 50) -> list[Proposal]:
    return bank.proposals(status=_many(status), limit=limit)


@router.get(f"{NS}/proposals/{{proposal_id}}", summary="Get a proposal", tags=["consolidation"])
def proposal(namespace: str, proposal_id: Id, bank: ReadBank) -> Proposal:
    return bank.proposal(proposal_id)


@router.get(
    f"{NS}/proposals/{{proposal_id}}/markdown",
    summary="A proposal as the pending reflection (Markdown)",
    tags=["consolidation"],
    response_class=PlainTextResponse,
)
def proposal_markdown(namespace: str, proposal_id: Id, bank: ReadBank) -> PlainTextResponse:
    text = bank.services.consolidation.render(proposal_id)
    return PlainTextResponse(text, media_type="text/markdown; charset=utf-8")


@router.post(
    f"{NS}/proposals/{{proposal_id}}/approve", summary="Approve a proposal (admin)", tags=["consolidation"]
)
def approve(namespace: str, proposal_id: Id, body: ApproveBody, bank: AdminBank, who: Who) -> Proposal:
    """Apply it, all or nothing: ``only`` some operation ids (``core``: the core memory rewrite),
    ``edits`` the text to write instead of the cycle's. 409 if a lesson it touches changed since."""
    return bank.approve(proposal_id, only=body.only, edits=body.edits, actor=_actor(who, body.actor))


@router.post(
    f"{NS}/proposals/{{proposal_id}}/reject", summary="Reject a proposal (admin)", tags=["consolidation"]
)
def reject(namespace: str, proposal_id: Id, body: RejectBody, bank: AdminBank, who: Who) -> Proposal:
    return bank.reject(proposal_id, reason=body.reason, actor=_actor(who, body.actor))


@router.post(
    f"{NS}/proposals/{{proposal_id}}/revert",
    summary="Revert an applied proposal (admin)",
    tags=["consolidation"],
)
def revert(namespace: str, proposal_id: Id, body: ActorBody, bank: AdminBank, who: Who) -> Proposal:
    return bank.revert(proposal_id, actor=_actor(who, body.actor))


@router.get(f"{NS}/dreams", summary="The dream log", tags=["consolidation"])
def dreams(namespace: str, bank: ReadBank, limit: Limit = 50) -> list[DreamRun]:
    """Every consolidation cycle of this namespace, newest first."""
    return bank.dreams(limit=limit)


@router.get(f"{NS}/core-memory", summary="The core memory document", tags=["consolidation"])
def core_memory(namespace: str, bank: ReadBank) -> CoreMemory:
    return CoreMemory(text=bank.core_memory())
