"""What a cycle reads (seed 002's input scope), gathered from the store before the LLM phases.

Incremental: only the episodes since the namespace's ``last_reflection`` (the first cycle: the last
:data:`FIRST_CYCLE_DAYS` days), at most :data:`MAX_EPISODES`, newest first; the live lessons whose
decay score is above :data:`INDEX_MIN_DECAY`, most relevant first, at most :data:`MAX_INDEX_LESSONS`
(the prompt is then cut to its budget from the end, so what is dropped is the least relevant); the
lessons below 0.5 (fading and dormant, lowest first); the quarantined lessons of untrusted agents;
the last 5 reflection-log entries, the evolution log and the core memory. The pre-pass found the
candidates over the whole bank already; nothing here grows with the bank beyond one pass over it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from lessonbank.models import Lesson
from lessonbank.services.consolidation.decay import decay_score, tier_of
from lessonbank.services.consolidation.documents import Documents, milestone
from lessonbank.services.consolidation.phases import CycleInput
from lessonbank.services.consolidation.prepass import Candidates, is_live
from lessonbank.services.scope import Scope

FIRST_CYCLE_DAYS = 7
MAX_EPISODES = 200
MAX_INDEX_LESSONS = 2_000
MAX_FADING = 200
INDEX_MIN_DECAY = 0.3
LOG_ENTRIES = 5


def pending_review(lessons: Sequence[Lesson]) -> list[Lesson]:
    """Quarantined lessons of untrusted agents (``metadata["quarantine"]``), waiting for a cycle."""
    return [
        lesson
        for lesson in lessons
        if lesson.status == "quarantined" and "quarantine" in lesson.metadata and lesson.superseded_by is None
    ]


def since_last(state: Mapping[str, Any], now: datetime) -> datetime:
    """Where this cycle's episodes start: the last cycle's start, or the last 7 days on the first."""
    last = state.get("last_reflection")
    if isinstance(last, str):
        try:
            return datetime.fromisoformat(last)
        except ValueError:
            pass
    return now - timedelta(days=FIRST_CYCLE_DAYS)


def gather(
    scope: Scope,
    lessons: Sequence[Lesson],
    candidates: Candidates,
    documents: Documents,
    state: Mapping[str, Any],
    now: datetime,
) -> CycleInput:
    since = since_last(state, now)
    episodes = [
        episode
        for episode, _ in scope.store.recent_episodes(
            scope.namespace, since=since.timestamp(), limit=MAX_EPISODES
        )
    ]
    scored = [(lesson, decay_score(lesson, now)) for lesson in lessons if is_live(lesson, now)]
    indexed = sorted(
        (pair for pair in scored if pair[1] > INDEX_MIN_DECAY or pair[0].pinned),
        key=lambda pair: (-pair[1], -pair[0].access_count, pair[0].id),
    )[:MAX_INDEX_LESSONS]
    fading = sorted(
        ((lesson, score, tier_of(score)) for lesson, score in scored if score < 0.5 and not lesson.pinned),
        key=lambda row: (row[1], row[0].id),
    )[:MAX_FADING]
    number = documents.count + 1
    last = state.get("last_reflection")
    return CycleInput(
        namespace=scope.namespace,
        now=now,
        core_memory=documents.core_memory,
        episodes=episodes,
        lessons=[lesson for lesson, _ in indexed],
        fading=fading,
        candidates=candidates,
        pending=pending_review(lessons),
        pinned=[lesson for lesson, _ in scored if lesson.pinned],
        by_id={lesson.id: lesson for lesson in lessons},
        last_reflection=last if isinstance(last, str) else None,
        reflection_log=documents.reflection_log(last=LOG_ENTRIES) if documents.reflections else "",
        evolution=documents.evolution_log() if documents.evolution else "",
        reflection_number=number,
        milestone=milestone(number),
    )
