"""Learning from use: a task a lesson helped with becomes part of where the lesson was learned.

Outcome attribution counts an episode's result on the lessons injected for it (``helpful`` /
``harmful``), which moves a lesson's utility for every query alike. This adds what the counts
cannot: *which* tasks a lesson helped. When an episode succeeds with lessons injected, a
``feedback`` job (queued by ``record()``, run by the worker, never on the agent's path) adds the
episode's task to the provenance (``learned_from``) of the first :data:`LESSONS_TAUGHT` of them (the
context's order: best first), which recall indexes:
the next task like it finds the lesson by the words of the task it helped, even when the lesson
itself shares no word with it (the cold case: prose advice, code-only tasks).

Invariants:

- The provenance keeps what it was (where the lesson was learned, its example tasks) and gains the
  task as one of the newest tasks it helped (:func:`lessonbank.provenance.with_helped_task`: a
  bounded list within ``LEARNED_FROM_MAX_CHARS``); a task already there is not added again
  (normalised), so a retried job changes nothing.
- Only a success adds a task; a failure is already counted as ``harmful`` by attribution. A task
  that reads as instructions to a model (``lessonbank.injection``) is never added.
- Each change is one ``Store.change_lesson`` with an ``edit`` audit row by actor ``feedback``;
  lessons that are gone, archived or of another namespace are skipped.
- Off with ``Settings.learn_from_use`` (``LESSONBANK_LEARN_FROM_USE=0``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from lessonbank.errors import NotFoundError
from lessonbank.injection import injection_reason
from lessonbank.jobs import JobResult, offload
from lessonbank.models import Episode, Job, JobKind, Lesson
from lessonbank.provenance import provenance_change, with_helped_task
from lessonbank.services.scope import Scope

log = logging.getLogger("lessonbank.feedback")

KIND: JobKind = "feedback"
ACTOR = "feedback"
# The task joins the provenance of the first lessons of the context only: those recall ranked best,
# the likeliest to have helped; the rest of a context is mostly lessons that did not. Chosen on the
# ruff domain of bench/retrieval.py's feedback replay among 1, 2 and 5 (all): 2 gave the best recall@1
# and MRR on the next similar task, all 5 the worst (the task pulled unrelated lessons up).
LESSONS_TAUGHT = 2


def feedback_job(episode: Episode, scope: Scope) -> Job | None:
    """The job that adds ``episode``'s task to the provenance of the lessons injected for it, when
    the episode succeeded with lessons injected and the bank learns from use; else None."""
    if not (
        scope.settings.learn_from_use
        and scope.settings.attribution
        and episode.status == "success"
        and episode.context_ids
        and episode.task.strip()
    ):
        return None
    now = scope.now()
    return Job(
        # One per episode, by id: recording the same episode again (a retried call) queues nothing new.
        id=f"job_{KIND}_{episode.id}",
        namespace=episode.namespace or scope.namespace,
        kind=KIND,
        episode_id=episode.id,
        dedupe_key=f"{KIND}:{episode.id}",
        max_attempts=scope.settings.job_max_attempts,
        payload={},
        run_after=now,
        created_at=now,
        updated_at=now,
    )


class FeedbackHandler:
    """Runs ``feedback`` jobs: one episode's task added to the lessons injected for it."""

    def __init__(self, scope: Scope, reembed: Callable[[Sequence[Lesson]], object]) -> None:
        self.scope = scope
        self.reembed = reembed  # the retriever's embed_lessons: a changed provenance changes the vector

    async def handle(self, job: Job) -> JobResult:
        return await offload(self.run, job)  # store writes and embedding: off the event loop

    def run(self, job: Job) -> JobResult:
        store = self.scope.store
        if job.episode_id is None:
            return JobResult(reflection=None, detail="skipped: the job names no episode")
        try:
            episode, _ = store.get_episode(job.episode_id, namespace=job.namespace)
        except NotFoundError:
            return JobResult(reflection=None, detail="skipped: the episode is gone (retention)")
        hostile = injection_reason(episode.task)
        if hostile:  # kept out of what recall indexes and embeds for the lesson
            return JobResult(reflection=None, detail=f"skipped: the task reads as instructions ({hostile})")
        changed: list[Lesson] = []
        for lesson_id in episode.context_ids[:LESSONS_TAUGHT]:
            learned: list[bool] = []
            change = provenance_change(
                lambda value: with_helped_task(value, episode.task),
                at=self.scope.now(),
                actor=ACTOR,
                summary=lambda _: f"helped on the task of episode {episode.id}",
                written=learned,
            )
            try:
                lesson = store.change_lesson(job.namespace, lesson_id, change)
            except NotFoundError:
                continue  # forgotten since the context was built
            if learned and learned[-1]:
                changed.append(lesson)
        if changed:
            try:
                self.reembed(changed)
            except Exception as exc:  # the lexical index has it; the vector catches up on embed_missing
                log.warning("feedback: re-embedding %d lessons failed (%s)", len(changed), type(exc).__name__)
        return JobResult(
            reflection=None,
            detail=f"{len(changed)} of {len(episode.context_ids)} lessons learned the task they helped",
        )
