"""Each method of the bank as the request the REST API (:mod:`lessonbank.server.rest`) answers.

One function per method, taking the method's arguments and returning a :class:`~.calls.Call`; both
remote facades send these, so a request is written once. Paths are under ``/api/v1/ns/{namespace}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lessonbank.models import AuditEntry, ContextBlock, Decision, Episode, Hit, Job, Lesson
from lessonbank.proposals import DreamRun, Proposal
from lessonbank.remote import calls
from lessonbank.remote.calls import Call, one_or_many, query, segment, strings
from lessonbank.services.expansion import ExpansionReport

EXPAND_WAIT_S = 600.0  # one LLM call per lesson, on the server


def record(episode: Episode | dict[str, Any], context_ids: Sequence[str] | None) -> Call[Episode]:
    return Call("POST", "/episodes", calls.episode, json=calls.episode_body(episode, context_ids))


def reflect(episode_id: str, reflector: str | None) -> Call[Decision]:
    path = f"/episodes/{segment(episode_id, 'episode_id')}/reflect"
    return Call("POST", path, calls.decision, json={"reflector": reflector})


def finish_goal(
    goal_id: str,
    *,
    title: str | None,
    status: str,
    outputs: Sequence[str],
    errors: Sequence[str],
    agent: str | None,
) -> Call[Episode]:
    body = {
        "title": title,
        "status": status,
        # One string is refused by the server as by the bank: it is not a list of outputs.
        "outputs": outputs if isinstance(outputs, str) else list(outputs),
        "errors": errors if isinstance(errors, str) else list(errors),
        "agent": agent,
    }
    return Call("POST", f"/goals/{segment(goal_id, 'goal_id')}/finish", calls.episode, json=body)


def insights(goal_id: str | None) -> Call[list[Lesson]]:
    return Call("GET", "/insights", calls.lessons, params=query(goal_id=goal_id))


def rules(agent: str | None, stream: str | None) -> Call[list[Lesson]]:
    return Call("GET", "/rules", calls.lessons, params=query(agent=agent, stream=stream))


def replay(task: str | None, task_type: str | None, k: int) -> Call[list[Lesson]]:
    return Call("GET", "/replay", calls.lessons, params=query(task=task, task_type=task_type, k=k))


def confirm_rule(rule_id: str) -> Call[Lesson]:
    return Call("POST", f"/rules/{segment(rule_id, 'rule_id')}/confirm", calls.lesson)


def decisions(agent: str | None, limit: int) -> Call[list[dict[str, Any]]]:
    return Call("GET", "/decisions", calls.records, params=query(agent=agent, limit=limit))


def pending() -> Call[dict[str, int]]:
    return Call("GET", "/jobs/pending", calls.counts)


def flush(timeout: float) -> Call[bool]:
    return Call("POST", "/flush", calls.done, json={"timeout": timeout}, wait_s=timeout)


def add_lesson(
    text: str,
    *,
    tags: Iterable[str],
    kind: str,
    task_type: str | None,
    agent: str | None,
    goal_id: str | None,
    importance: float,
    pinned: bool,
    learned_from: str | None,
) -> Call[Lesson]:
    body = {
        "text": text,
        "tags": strings(tags if isinstance(tags, str) else list(tags)),
        "kind": kind,
        "task_type": task_type,
        "agent": agent,
        "goal_id": goal_id,
        "importance": importance,
        "pinned": pinned,
        "learned_from": learned_from,
    }
    return Call("POST", "/lessons", calls.lesson, json=body)


def recall(
    query_text: str,
    *,
    k: int,
    kind: str | Sequence[str] | None,
    tags: Sequence[str],
    task_type: str | None,
    agent: str | None,
    goal_id: str | None,
    mode: str | None,
    hyde: bool | None,
) -> Call[list[Hit]]:
    body = {
        "query": query_text,
        "k": k,
        "kind": one_or_many(kind),
        "tags": strings(tags),
        "task_type": task_type,
        "agent": agent,
        "goal_id": goal_id,
        "mode": mode,
        "hyde": hyde,
    }
    return Call("POST", "/recall", calls.hits, json=body)


def expand(
    lesson_ids: Sequence[str] | None, limit: int | None, dry_run: bool, actor: str
) -> Call[ExpansionReport]:
    # One string is refused by the server as by the bank: it is not a list of ids.
    ids = None if lesson_ids is None else (lesson_ids if isinstance(lesson_ids, str) else list(lesson_ids))
    body = {"lesson_ids": ids, "limit": limit, "dry_run": dry_run, "actor": actor}
    return Call("POST", "/expand", ExpansionReport.model_validate, json=body, wait_s=EXPAND_WAIT_S)


def embed_missing() -> Call[int]:
    return Call("POST", "/embed-missing", calls.count)


def context(
    task: str | None,
    *,
    goal_id: str | None,
    agent: str | None,
    task_type: str | None,
    budget_tokens: int,
    formats: Sequence[str] | None,
    kind: str | Sequence[str] | None,
    tags: Sequence[str],
) -> Call[ContextBlock]:
    body = {
        "task": task,
        "goal_id": goal_id,
        "agent": agent,
        "task_type": task_type,
        "budget_tokens": budget_tokens,
        "formats": strings(formats),
        "kind": one_or_many(kind),
        "tags": strings(tags),
    }
    return Call("POST", "/context", calls.context_block, json=body)


def lessons(
    *,
    kind: str | Sequence[str] | None,
    tags: Sequence[str],
    status: str | Sequence[str],
    limit: int,
    offset: int,
    sort: str,
    tier: str | None,
) -> Call[list[Lesson]]:
    params = query(
        kind=strings(kind),
        tags=strings(tags),
        status=strings(status),
        limit=limit,
        offset=offset,
        sort=sort,
        tier=tier,
    )
    return Call("GET", "/lessons", calls.lessons, params=params)


def get_lesson(lesson_id: str) -> Call[Lesson]:
    return Call("GET", f"/lessons/{segment(lesson_id, 'lesson_id')}", calls.lesson)


def show(record_id: str) -> Call[dict[str, Any]]:
    return Call("GET", f"/records/{segment(record_id, 'id')}", calls.mapping)


def forget(lesson_id: str, actor: str) -> Call[None]:
    path = f"/lessons/{segment(lesson_id, 'lesson_id')}"
    return Call("DELETE", path, calls.nothing, params=query(actor=actor))


def archive(lesson_id: str, reason: str | None, actor: str) -> Call[Lesson]:
    path = f"/lessons/{segment(lesson_id, 'lesson_id')}/archive"
    return Call("POST", path, calls.lesson, json={"reason": reason, "actor": actor})


def edit_lesson(
    lesson_id: str, pinned: bool | None, tags: Sequence[str] | None, importance: float | None, actor: str
) -> Call[Lesson]:
    path = f"/lessons/{segment(lesson_id, 'lesson_id')}"
    body = {
        "pinned": pinned,
        "tags": None if tags is None else list(tags),
        "importance": importance,
        "actor": actor,
    }
    return Call("PATCH", path, calls.lesson, json=body)


def restore(lesson_id: str, actor: str) -> Call[Lesson]:
    path = f"/lessons/{segment(lesson_id, 'lesson_id')}/restore"
    return Call("POST", path, calls.lesson, json={"actor": actor})


def audit(lesson_id: str | None, limit: int) -> Call[list[AuditEntry]]:
    return Call("GET", "/audit", calls.audit_entries, params=query(lesson_id=lesson_id, limit=limit))


def import_batch(batch: list[Any]) -> Call[dict[str, int]]:
    return Call("POST", "/import", calls.counts, json={"lessons": batch})


def export(format: str, live_only: bool) -> Call[str]:
    return Call("GET", "/export", calls.text, params=query(format=format, live_only=live_only), text=True)


def search_reflections(
    *,
    failure_category: str | Sequence[str] | None,
    min_confidence: float,
    keywords: Sequence[str],
    limit: int,
) -> Call[list[dict[str, Any]]]:
    params = query(
        failure_category=strings(failure_category),
        min_confidence=min_confidence,
        keywords=strings(keywords),
        limit=limit,
    )
    return Call("GET", "/reflections", calls.records, params=params)


def jobs(status: str | Sequence[str] | None, limit: int) -> Call[list[Job]]:
    return Call("GET", "/jobs", calls.jobs, params=query(status=strings(status), limit=limit))


def retry_jobs(job_ids: Sequence[str] | None) -> Call[int]:
    return Call("POST", "/jobs/retry", calls.count, json={"job_ids": strings(job_ids)})


def purge_jobs(statuses: Sequence[str]) -> Call[int]:
    return Call("POST", "/jobs/purge", calls.count, json={"statuses": strings(statuses)})


def consolidate(dry_run: bool, wait: bool) -> Call[Proposal | None]:
    waits = wait is True and dry_run is False
    body = {"dry_run": dry_run, "wait": wait}
    return Call(
        "POST", "/consolidate", calls.maybe_proposal, json=body, wait_s=calls.CYCLE_TIMEOUT_S if waits else 0
    )


def end_session(agent: str | None, session_id: str | None) -> Call[Job | None]:
    return Call("POST", "/sessions/end", calls.maybe_job, json={"agent": agent, "session_id": session_id})


def proposals(status: str | Sequence[str] | None, limit: int) -> Call[list[Proposal]]:
    return Call("GET", "/proposals", calls.proposals, params=query(status=strings(status), limit=limit))


def proposal(proposal_id: str) -> Call[Proposal]:
    return Call("GET", f"/proposals/{segment(proposal_id, 'proposal_id')}", calls.proposal)


def approve(
    proposal_id: str, only: Sequence[str] | None, edits: Mapping[str, str] | None, actor: str
) -> Call[Proposal]:
    # One string for ``only`` is sent as it is: the server refuses it, as the bank does.
    body = {
        "only": only if only is None or isinstance(only, str) else list(only),
        "edits": dict(edits) if edits is not None else None,
        "actor": actor,
    }
    return Call(
        "POST", f"/proposals/{segment(proposal_id, 'proposal_id')}/approve", calls.proposal, json=body
    )


def reject(proposal_id: str, reason: str | None, actor: str) -> Call[Proposal]:
    path = f"/proposals/{segment(proposal_id, 'proposal_id')}/reject"
    return Call("POST", path, calls.proposal, json={"reason": reason, "actor": actor})


def revert(proposal_id: str, actor: str) -> Call[Proposal]:
    path = f"/proposals/{segment(proposal_id, 'proposal_id')}/revert"
    return Call("POST", path, calls.proposal, json={"actor": actor})


def dreams(limit: int) -> Call[list[DreamRun]]:
    return Call("GET", "/dreams", calls.dream_runs, params=query(limit=limit))


def core_memory() -> Call[str]:
    return Call("GET", "/core-memory", calls.core_text)


def rescreen(dry_run: bool) -> Call[dict[str, int]]:
    return Call("POST", "/rescreen", calls.counts, json={"dry_run": dry_run})


def apply_retention(older_than_days: float | None, dry_run: bool) -> Call[dict[str, int]]:
    body = {"older_than_days": older_than_days, "dry_run": dry_run}
    return Call("POST", "/retention", calls.counts, json=body)


def stats() -> Call[dict[str, Any]]:
    return Call("GET", "/stats", calls.mapping)
