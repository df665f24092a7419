"""The record path: an episode validated, redacted, decided on by the policy, and stored with its jobs.

``record()`` does no LLM work: the episode and its reflection job are written in one store
transaction and a worker runs the job later. Manual reflections, finished goals and the
operator's view of the queue (list, retry, purge, count) live here too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from lessonbank.errors import InputError
from lessonbank.jobs import NO_LLM_DETAIL, Worker
from lessonbank.llm import LLM
from lessonbank.models import Decision, Episode, Job
from lessonbank.policy import (
    HISTORY_LIMIT,
    decide_all,
    decision_rows,
    dedupe_key,
    history_of,
    history_since,
    manual_decision,
    manual_reflector,
    needs_history,
)
from lessonbank.redact import redact_episode
from lessonbank.reflectors.base import Reflector
from lessonbank.reflectors.insight import goal_episode
from lessonbank.requests import FinishGoalRequest
from lessonbank.services.attribution import LastContexts, check_context_ids
from lessonbank.services.feedback import feedback_job
from lessonbank.services.scope import Scope, check_count


def flush_answer(pending: dict[str, int], worker: Worker | None, deadline: float) -> bool | None:
    """flush()'s answer once it has one: True when no job is queued, leased or finishing (False if
    some wait for an LLM), False at the deadline; None while jobs are still to run."""
    finishing = worker is not None and worker.finishing > 0
    if not pending.get("queued") and not pending.get("leased") and not finishing:
        return not pending.get("waiting")
    return False if time.monotonic() >= deadline else None


@dataclass(eq=False)
class Recorder:
    """Episodes in, jobs out. ``reflectors`` is the bank's registry (shared with the job handler)."""

    scope: Scope
    _: KW_ONLY
    reflection_llm: LLM | None
    reflectors: dict[str, Reflector]
    last_contexts: LastContexts

    def record(
        self, episode: Episode | dict[str, Any], context_ids: Sequence[str] | None
    ) -> tuple[Episode, Job | None]:
        """Store the episode with the policy's decision; the job returned (if any) is queued."""
        settings = self.scope.settings
        episode = self.prepare(episode, context_ids)
        history = None
        if needs_history(episode, settings):
            recent = self.scope.store.recent_episodes(
                self.scope.namespace,
                agent=episode.agent,
                since=history_since(episode, settings),
                limit=HISTORY_LIMIT,
            )
            history = history_of(episode, recent, settings)
        decision, *more = decide_all(episode, settings, history)
        return self.store(episode, decision, more)

    def prepare(self, episode: Episode | dict[str, Any], context_ids: Sequence[str] | None) -> Episode:
        """The episode as it will be stored: validated, in this namespace, secrets redacted, with the
        ids of the lessons injected for it (given, or remembered from the last context for its task)."""
        if isinstance(episode, dict):
            episode = Episode.model_validate(episode)
        elif not isinstance(episode, Episode):
            raise InputError(f"record() takes an Episode or a dict, got {type(episode).__name__}")
        namespace = self.scope.namespace
        if episode.namespace not in (None, namespace):
            raise InputError(
                f"episode belongs to namespace {episode.namespace!r} but this bank serves "
                f"{namespace!r}; open LessonBank(namespace={episode.namespace!r}) for it",
                field="namespace",
            )
        updates: dict[str, Any] = {"namespace": namespace}
        if context_ids is not None:
            updates["context_ids"] = check_context_ids(context_ids)
        elif not episode.context_ids and self.scope.settings.attribution:
            remembered = self.last_contexts.take(episode.agent, episode.task, episode.task_type)
            if remembered:
                updates["context_ids"] = remembered
        return redact_episode(episode.model_copy(update=updates))

    def store(
        self, episode: Episode, decision: Decision, more: Sequence[Decision] = (), *, credit: bool = True
    ) -> tuple[Episode, Job | None]:
        """Write a prepared episode with ``decision`` (and a job for it and each of ``more``); returns
        the episode and the job the worker should be woken for (its reflection, else its feedback).

        ``credit``: whether the episode's outcome credits the lessons injected for it."""
        job = None
        if decision.reflect:
            assert decision.trigger is not None and decision.reflector is not None
            job = self._new_job(
                episode, dedupe_key(episode, decision.trigger), decision.trigger, decision.reflector
            )
            decision = decision.model_copy(update={"job_id": job.id})
        # Further reflections (max_reflections_per_episode > 1): one job each, named in the decision.
        extra = [
            self._new_job(
                episode, dedupe_key(episode, f"{d.trigger}:{d.reflector}"), str(d.trigger), str(d.reflector)
            )
            for d in more
        ]
        if extra:
            also = ", ".join(
                f"{job.payload['reflector']} on {job.payload['trigger']} ({job.id})" for job in extra
            )
            decision = decision.model_copy(update={"reason": f"{decision.reason}; also {also}"})
        store = self.scope.store
        final = store.record_episode(
            episode, decision, job, credit=credit and self.scope.settings.attribution
        )
        # After the episode: a crash in between loses one task's provenance, never the episode.
        learned = feedback_job(episode, self.scope) if credit else None
        if learned is not None:
            store.enqueue_job(learned)
        if not final.reflect:
            return episode, learned
        for other in extra:
            store.enqueue_job(other)
        return episode, job

    def _new_job(self, episode: Episode, key: str, trigger: str, reflector: str) -> Job:
        """A reflection job stamped with the bank's clock, waiting if no LLM is set."""
        now = self.scope.now()
        return Job(
            namespace=episode.namespace or self.scope.namespace,
            episode_id=episode.id,
            dedupe_key=key,
            status="queued" if self.reflection_llm else "waiting",
            detail=None if self.reflection_llm else NO_LLM_DETAIL,
            max_attempts=self.scope.settings.job_max_attempts,
            payload={"trigger": trigger, "reflector": reflector},
            run_after=now,
            created_at=now,
            updated_at=now,
        )

    def reflect(self, episode_id: str, reflector: str | None = None) -> tuple[Decision, Job | None]:
        """Queue a manual reflection on a stored episode of this namespace, whatever the policy said."""
        episode, _ = self.scope.store.get_episode(episode_id, namespace=self.scope.namespace)
        name = reflector or manual_reflector(episode, self.scope.settings)
        if name not in self.reflectors:
            raise InputError(
                f"unknown reflector {name!r}; use one of {', '.join(sorted(self.reflectors))}",
                field="reflector",
            )
        job = self._new_job(episode, f"{dedupe_key(episode, 'manual')}:{self.scope.clock()}", "manual", name)
        self.scope.store.enqueue_job(job)
        return manual_decision(name).model_copy(update={"job_id": job.id}), job

    def finish_goal(self, request: FinishGoalRequest) -> tuple[Episode, Job | None]:
        """A goal's terminal state as an episode: the policy routes it to the insight reflector."""
        episode = goal_episode(
            request.goal_id,
            title=request.title,
            status=request.status,
            outputs=request.outputs,
            errors=request.errors,
            agent=request.agent,
            now=self.scope.now(),
        )
        return self.record(episode, None)

    def decisions(self, agent: str | None, limit: int) -> list[dict[str, Any]]:
        """The policy's latest decisions, newest first: reflect (trigger, reflector, job) or skip and why."""
        check_count(limit, "limit", minimum=1)
        return decision_rows(self.scope.store.recent_episodes(self.scope.namespace, agent=agent, limit=limit))

    # --------------------------------------------------------------- the queue, for operators

    def pending(self) -> dict[str, int]:
        return self.scope.store.count_jobs([self.scope.namespace])

    def jobs(self, status: str | Sequence[str] | None, limit: int) -> list[Job]:
        statuses = [status] if isinstance(status, str) else status
        return self.scope.store.list_jobs(self.scope.namespace, statuses, limit)

    def retry_jobs(self, job_ids: Sequence[str] | None) -> int:
        return self.scope.store.retry_jobs(self.scope.namespace, job_ids)

    def purge_jobs(self, statuses: Sequence[str]) -> int:
        return self.scope.store.purge_jobs(self.scope.namespace, statuses)
