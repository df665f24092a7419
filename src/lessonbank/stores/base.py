"""The Store protocol: persistence of episodes, reflections, lessons and jobs.

Built-in implementations: :class:`lessonbank.stores.sqlite.SQLiteStore` (embedded default).

Invariants every store keeps:

- A lesson is identified within its namespace by ``content_hash`` (kind + case/space-folded
  content). Writing the same content again reinforces the stored lesson; writing a near
  duplicate (token Jaccard ≥ the threshold, same kind) reinforces it too. Never two copies.
- An episode and its reflection job are written in one transaction; so are a job's result
  (reflection + lessons) and the job leaving the ``leased`` state. A worker that lost its
  lease cannot write a result.
- Jobs are unique per (namespace, dedupe_key).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from lessonbank.models import Decision, Episode, Job, Lesson, Reflection
from lessonbank.text import jaccard, words

NEAR_DUPLICATE_JACCARD = 0.85
CONFIDENCE_STEP = 0.05

LessonSort = Literal["created", "score", "access", "confidence", "utility"]


@dataclass(frozen=True)
class LessonQuery:
    """Filters shared by listing and recall. ``tags`` must all be present on a lesson."""

    namespace: str
    kinds: Sequence[str] | None = None
    tags: Sequence[str] = ()
    task_type: str | None = None
    agent: str | None = None
    goal_id: str | None = None
    statuses: Sequence[str] = ("active",)


@dataclass(frozen=True)
class Candidate:
    """A recall candidate: just what scoring needs; the full Lesson is loaded for the winners only."""

    lesson_id: str
    relevance: float  # lexical relevance, higher is better (e.g. −BM25)
    access_count: int
    confidence: float
    pinned: bool
    last_used: float  # Unix time of the last use, or of creation


@dataclass(frozen=True)
class WriteResult:
    lesson: Lesson
    action: Literal["added", "reinforced"]


@dataclass
class StoreStats:
    namespace: str
    episodes: int = 0
    lessons: dict[str, int] = field(default_factory=dict)
    lessons_by_status: dict[str, int] = field(default_factory=dict)
    reflections: dict[str, int] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    llm_calls: int = 0
    cost_usd: float = 0.0
    # Reflection spend, one row per reflector and per UTC day: calls, tokens_in, tokens_out, cost_usd
    # (cost counts only models with a known price; unpriced_calls says how many had none).
    by_reflector: dict[str, dict[str, float]] = field(default_factory=dict)
    by_day: dict[str, dict[str, float]] = field(default_factory=dict)
    size_bytes: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class LeaseLostError(Exception):
    """The job's lease expired and another worker took it; this worker's result is dropped."""


def pick_near_duplicate(
    content: str, candidates: Sequence[Lesson], threshold: float = NEAR_DUPLICATE_JACCARD
) -> Lesson | None:
    """The most similar candidate at or above ``threshold`` token Jaccard, if any.

    All words count, stopwords included: "do not run X" must not merge into "run X".
    """
    tokens = words(content)
    best: tuple[float, Lesson] | None = None
    for candidate in candidates:
        similarity = jaccard(tokens, words(candidate.content))
        if similarity >= threshold and (best is None or similarity > best[0]):
            best = (similarity, candidate)
    return best[1] if best else None


def worker_owner() -> str:
    """A lease owner id that says which host and process holds the lease."""
    return f"{socket.gethostname()}@{os.getpid()}:{os.urandom(4).hex()}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) still answers signal 0 but runs nothing.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


def parse_owner(owner: str) -> tuple[str, int | None]:
    """The host and process id encoded in a lease owner by :func:`worker_owner`."""
    host, _, rest = owner.rpartition("@")
    pid_text = rest.split(":", 1)[0]
    return host, int(pid_text) if pid_text.isdigit() else None


class Store(Protocol):
    """What the bank needs from a backend. Methods are synchronous and thread-safe."""

    clock: Callable[[], float]

    def close(self) -> None: ...

    # episodes
    def record_episode(self, episode: Episode, decision: Decision, job: Job | None) -> Decision: ...
    def get_episode(self, episode_id: str) -> tuple[Episode, Decision | None]: ...
    def recent_episodes(
        self, namespace: str, *, agent: str | None = None, since: float = 0.0, limit: int = 20
    ) -> list[tuple[Episode, Decision | None]]:
        """The namespace's episodes created at or after ``since`` (Unix s), of ``agent`` when given
        (None: any agent), newest first, at most ``limit``."""
        ...

    # lessons
    def write_lesson(self, lesson: Lesson, *, threshold: float = NEAR_DUPLICATE_JACCARD) -> WriteResult: ...
    def import_lessons(self, lessons: Sequence[Lesson]) -> tuple[int, int]: ...
    def get_lesson(self, lesson_id: str) -> Lesson: ...
    def list_lessons(
        self, query: LessonQuery, *, limit: int = 100, offset: int = 0, sort: LessonSort = "created"
    ) -> list[Lesson]: ...
    def delete_lesson(self, namespace: str, lesson_id: str) -> bool: ...
    def update_lesson(self, lesson: Lesson) -> Lesson:
        """Overwrite every field of the stored lesson with ``lesson.id`` (same namespace), re-hashing its
        content; counters included. Returns the stored lesson. NotFoundError when absent. Expired
        lessons can be updated (so an expiry can be extended or cleared)."""
        ...

    def purge_expired(self, namespace: str) -> int:
        """Delete the namespace's lessons whose ``expires_at`` ≤ the store clock; returns how many."""
        ...

    def search(self, query: LessonQuery, terms: Sequence[str], limit: int) -> list[Candidate]: ...
    def get_lessons(self, lesson_ids: Sequence[str]) -> list[Lesson]: ...
    def touch_lessons(self, lesson_ids: Sequence[str]) -> None: ...

    # reflections
    def get_reflection(self, reflection_id: str) -> Reflection: ...
    def reflections_for_episode(self, episode_id: str) -> list[Reflection]: ...

    # jobs
    def enqueue_job(self, job: Job) -> None: ...
    def lease_job(self, owner: str, namespaces: Sequence[str] | None, lease_s: float) -> Job | None: ...
    def finish_job(
        self,
        job_id: str,
        owner: str,
        *,
        reflection: Reflection | None,
        lessons: Sequence[Lesson],
        detail: str,
    ) -> list[WriteResult]: ...
    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job: ...
    def release_job(self, job_id: str, owner: str) -> None: ...
    def park_job(self, job_id: str, owner: str, *, detail: str) -> None: ...
    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None: ...
    def release_waiting(self, namespaces: Sequence[str] | None) -> int: ...
    def get_job(self, job_id: str) -> Job: ...
    def list_jobs(
        self, namespace: str | None, statuses: Sequence[str] | None = None, limit: int = 100
    ) -> list[Job]: ...
    def retry_jobs(self, namespace: str, job_ids: Sequence[str] | None = None) -> int: ...
    def purge_jobs(self, namespace: str, statuses: Sequence[str]) -> int: ...
    def count_jobs(self, namespaces: Sequence[str] | None) -> dict[str, int]: ...

    def stats(self, namespace: str) -> StoreStats: ...
