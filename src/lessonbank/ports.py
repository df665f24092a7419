"""The ports: what the services need from a store, as small protocols, and the records they trade.

Built-in stores (each implements every port): :class:`~lessonbank.stores.sqlite.SQLiteStore` (embedded
default), :class:`~lessonbank.stores.postgres.PostgresStore`, :class:`~lessonbank.stores.redis.RedisStore`
and :class:`~lessonbank.stores.memory.MemoryStore` (the test double). Optional capabilities are
declared as attributes (``notifier``), never probed with ``getattr``.

Invariants every store keeps:

- A lesson is identified within its namespace by ``content_hash`` (kind + case/space-folded
  content). Writing the same content again reinforces the stored lesson; writing a near
  duplicate (token Jaccard ≥ the threshold, same kind) reinforces it too. Never two copies.
- An episode and its reflection job are written in one transaction; so are a job's result
  (reflection, lessons and their pool placement: expired lessons purged, a repeated rule
  confirmed) and the job leaving the ``leased`` state. A worker that lost its lease cannot write
  a result, nor any part of it.
- Lessons are written by :meth:`~lessonbank.lessons.LessonWriter.write_all` on the store's
  :class:`LessonTx`: the decisions are the writer's, the locks and reads the store's.
- Jobs are unique per (namespace, dedupe_key).
- Ids are unique across namespaces: an id a caller chose that another namespace holds is refused
  (see :mod:`lessonbank.scoping`). Every read by id takes ``namespace``: given, another
  namespace's record is not found (NotFoundError, or left out of a list); None reads any.
- A lesson is indexed lexically on its content, tags and ``learned_from`` (provenance, weighted
  below the content); the near-duplicate check compares content only.
- A superseded lesson (``superseded_by`` set) is kept but never recalled: ``search`` and
  ``candidates`` skip it, as they skip expired lessons.
- Vectors: each (lesson, embedder model) has at most one stored vector, with the hash of the
  text it embeds. Every write of a vector takes a new, ever-growing sequence number; removing a
  lesson removes its vectors in the same transaction; changing its content keeps them (the
  text hash no longer matches, which tells the bank to embed it again).
- Outcome credit (``helpful``/``harmful``) is added atomically in the store, never read-modify-
  written by the caller, and an episode's credit is written in the episode's own transaction.
- An audit entry given with a change to a lesson (``update_lesson``, ``delete_lesson``,
  ``change_lesson``) is written in the change's transaction: both are stored or neither.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Literal, Protocol

from lessonbank.models import AuditEntry, Decision, Episode, Job, Lesson, Reflection
from lessonbank.proposals import DreamRun, Proposal

NEAR_DUPLICATE_JACCARD = 0.85
# Stored lessons a near-duplicate check compares (the best by content BM25), on every store.
NEAR_DUPLICATE_POOL = 20
# The spend row of one reflector or one day in StoreStats, in this order.
SPEND_FIELDS = ("reflections", "calls", "tokens_in", "tokens_out", "cost_usd", "unpriced_calls")

LessonSort = Literal["created", "score", "access", "confidence", "utility"]
# What ``LessonStore.change_lesson`` applies: the stored lesson → (the lesson to store, its audit
# entry), or None for no change.
LessonChange = Callable[[Lesson], "tuple[Lesson, AuditEntry] | None"]


@dataclass(frozen=True)
class LessonQuery:
    """Filters shared by listing and recall. ``tags`` must all be present on a lesson.

    ``live_only=False`` also lets superseded and expired lessons through (a backup lists them)."""

    namespace: str
    kinds: Sequence[str] | None = None
    tags: Sequence[str] = ()
    task_type: str | None = None
    agent: str | None = None
    goal_id: str | None = None
    statuses: Sequence[str] = ("active",)
    live_only: bool = True


@dataclass(frozen=True)
class Candidate:
    """A recall candidate: just what scoring needs; the full Lesson is loaded for the winners only."""

    lesson_id: str
    relevance: float  # lexical relevance, higher is better (e.g. −BM25)
    access_count: int
    confidence: float
    pinned: bool
    last_used: float  # Unix time of the last use, or of creation
    importance: float = 0.5
    helpful: int = 0
    harmful: int = 0


@dataclass(frozen=True)
class VectorChanges:
    """What changed in the vectors of one (namespace, model) since a sequence number.

    Readers keep a cache of the vectors and call ``vector_changes(ns, model, after=seq)`` with the
    ``seq`` of their last call. Sequence numbers only grow, but on a server store two writers may
    commit theirs out of order, and deletes have no sequence number: a reader whose cached id
    count differs from ``count`` reloads everything (``after=0``), which catches both.

    Asked with a ``limit``, the rows are the first ``limit`` in sequence order and ``more`` says
    whether others follow: ``seq`` is then the last row's, to pass as ``after`` for the next page (a
    full load reads the store a page at a time, so no step holds every row at once).
    """

    rows: list[tuple[str, bytes]]  # (lesson_id, vector bytes) written after `after`, newest write per lesson
    seq: int  # the highest sequence now (pass it as `after` next time)
    count: int  # live vectors of (namespace, model) in all
    more: bool = False  # a page cut at its ``limit``: rows after ``seq`` follow

    @staticmethod
    def limit_of(limit: int | None) -> int:
        """A page's ``limit`` as a store's query takes it: -1 for none (SQL's ``LIMIT -1``, or a
        count that nothing reaches)."""
        if limit is None:
            return -1
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"a page of vector changes holds 1 row or more, not {limit!r}")
        return limit

    @classmethod
    def page(
        cls, rows: Sequence[tuple[str, bytes, int]], after: int, top: int, count: int, limit: int | None
    ) -> VectorChanges:
        """The changes read as ``rows`` (lesson id, vector, sequence; in sequence order, at most
        ``limit``) with the store's ``top`` sequence and ``count`` of the same moment."""
        top = max(after, int(top))
        more = limit is not None and len(rows) >= limit and int(rows[-1][2]) < top
        return cls(
            rows=[(lesson_id, vector) for lesson_id, vector, _ in rows],
            seq=int(rows[-1][2]) if more else top,
            count=int(count),
            more=more,
        )


@dataclass(frozen=True)
class WriteResult:
    lesson: Lesson
    action: Literal["added", "reinforced"]


class LessonTx(Protocol):
    """One write transaction over a store's lessons: the locked reads the write path needs and the
    writes it makes, all committed together or not at all (SQLite's write lock, a PostgreSQL
    transaction with an advisory lock per pool, a Redis MULTI/EXEC after WATCHed reads, the memory
    store's lock). Reads see the transaction's own writes. The write path's decisions
    (:meth:`lessonbank.lessons.LessonWriter.write_all`) run on it the same way for every store; a
    store may run them more than once (a Redis transaction replans when a WATCHed key moved)."""

    def lock_pools(self, pools: Sequence[tuple[str, str]]) -> None:
        """Hold these capped pools, ``(namespace, Cap.key)`` in sorted order, until the end."""
        ...

    def holder(self, namespace: str, lesson_id: str) -> str | None:
        """The namespace of the stored lesson with that id (any namespace), or None; read by a writer
        about to add that lesson to ``namespace``."""
        ...

    def by_hash(self, namespace: str, content_hash: str) -> Lesson | None: ...
    def by_id(self, namespace: str, lesson_id: str) -> Lesson | None: ...
    def members(self, query: LessonQuery) -> list[Lesson]:
        """The lessons passing ``query`` (a capped pool's members, read under its lock)."""
        ...

    def add(self, lesson: Lesson) -> bool:
        """Insert a prepared lesson; False when another writer took its content meanwhile."""
        ...

    def put(self, lesson: Lesson, previous: Lesson | None) -> None:
        """Overwrite the stored lesson with ``lesson.id`` (``previous``: as this transaction read it)."""
        ...

    def delete(self, lesson: Lesson) -> None:
        """Remove the lesson, its index entries and its vectors."""
        ...

    def purge_expired(self, namespace: str) -> int:
        """Remove the namespace's lessons whose ``expires_at`` ≤ the store clock; how many."""
        ...


# What readies lessons for their pools inside the write transaction (services.pools): expired
# lessons purged, expiry stamped, a repeated rule turned into a confirmation of the stored one.
Placement = Callable[[LessonTx, list[Lesson]], list[Lesson]]


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

    def count_reflection(self, reflection: Reflection) -> None:
        """Add one reflection to the counts and to its reflector's and UTC day's spend rows (for
        stores that aggregate in Python; the SQL stores aggregate in SQL)."""
        self.reflections[reflection.status] = self.reflections.get(reflection.status, 0) + 1
        self.tokens_in += reflection.tokens_in
        self.tokens_out += reflection.tokens_out
        day = reflection.created_at.astimezone(UTC).strftime("%Y-%m-%d")
        for key, target in ((reflection.reflector, self.by_reflector), (day, self.by_day)):
            row = target.setdefault(key, dict.fromkeys(SPEND_FIELDS, 0) | {"cost_usd": 0.0})
            row["reflections"] += 1
            row["calls"] += reflection.llm_calls
            row["tokens_in"] += reflection.tokens_in
            row["tokens_out"] += reflection.tokens_out
            row["cost_usd"] += reflection.cost_usd or 0.0
            row["unpriced_calls"] += int(reflection.cost_usd is None and reflection.llm_calls > 0)

    def total_spend(self) -> None:
        """Set ``llm_calls`` and ``cost_usd`` from the per-reflector rows, and sort the rows."""
        self.llm_calls = int(sum(row["calls"] for row in self.by_reflector.values()))
        self.cost_usd = float(sum(row["cost_usd"] for row in self.by_reflector.values()))
        self.by_reflector = dict(sorted(self.by_reflector.items()))
        self.by_day = dict(sorted(self.by_day.items()))


@dataclass(frozen=True)
class RetentionCutoffs:
    """What retention deletes: records older than these times (Unix s); None keeps that kind forever."""

    episodes_before: float | None = None  # by created_at
    reflections_before: float | None = None  # by created_at
    done_jobs_before: float | None = None  # done jobs, by finished_at


@dataclass
class Purged:
    """How many records of each kind retention deleted (or, in a dry run, would delete)."""

    episodes: int = 0
    reflections: int = 0
    jobs: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class EpisodeStore(Protocol):
    """Episodes and the reflections made of them."""

    def record_episode(
        self, episode: Episode, decision: Decision, job: Job | None, *, credit: bool = True
    ) -> Decision:
        """Store the episode and its job in one transaction; a repeated id is a no-op. An id another
        namespace holds is refused (InputError on ``id``) before anything is written.

        With ``credit`` and ``episode.context_ids``, the lessons injected for it (of its namespace)
        get helpful +1 on a success or harmful +1 on a failure (a partial credits nothing), in the
        same transaction."""
        ...

    def get_episode(
        self, episode_id: str, *, namespace: str | None = None
    ) -> tuple[Episode, Decision | None]:
        """The episode and its decision; with ``namespace``, only if it belongs to it (else NotFoundError)."""
        ...

    def recent_episodes(
        self, namespace: str, *, agent: str | None = None, since: float = 0.0, limit: int = 20
    ) -> list[tuple[Episode, Decision | None]]:
        """The namespace's episodes created at or after ``since`` (Unix s), of ``agent`` when given
        (None: any agent), newest first, at most ``limit``."""
        ...

    def get_reflection(self, reflection_id: str, *, namespace: str | None = None) -> Reflection: ...
    def reflections_for_episode(
        self, episode_id: str, *, namespace: str | None = None
    ) -> list[Reflection]: ...


class LessonStore(Protocol):
    """Lessons: written through the :class:`~lessonbank.lessons.LessonWriter` rules, listed, edited."""

    def write_lesson(
        self,
        lesson: Lesson,
        *,
        threshold: float = NEAR_DUPLICATE_JACCARD,
        duplicate_of: str | None = None,
    ) -> WriteResult:
        """Add ``lesson``, or reinforce the stored one it repeats: same content, else ``duplicate_of``
        when that names a live lesson of the namespace (a near duplicate the caller found, e.g. by
        cosine), else a near duplicate by token Jaccard ≥ ``threshold``. When the lesson is added and
        ``lesson.supersedes`` names a live lesson of the namespace, that lesson gets ``superseded_by``
        = the new id in the same transaction (kept, no longer recalled)."""
        ...

    def write_lessons(
        self, lessons: Sequence[Lesson], *, place: Placement | None = None
    ) -> list[WriteResult]:
        """Write ``lessons`` in one transaction, each as ``write_lesson`` writes it, after ``place``
        (run inside the transaction, under the locks of the lessons' pools) readied them."""
        ...

    def import_lessons(self, lessons: Sequence[Lesson]) -> tuple[int, int]: ...
    def get_lesson(self, lesson_id: str, *, namespace: str | None = None) -> Lesson: ...
    def get_lessons(self, lesson_ids: Sequence[str], *, namespace: str | None = None) -> list[Lesson]:
        """The lessons with these ids (of ``namespace`` when given), in the order given; others left out."""
        ...

    def list_lessons(
        self, query: LessonQuery, *, limit: int = 100, offset: int = 0, sort: LessonSort = "created"
    ) -> list[Lesson]: ...
    def update_lesson(self, lesson: Lesson, *, audit: AuditEntry | None = None) -> Lesson:
        """Overwrite every field of the stored lesson with ``lesson.id`` (same namespace), re-hashing its
        content; counters included. Returns the stored lesson. NotFoundError when absent. Expired
        lessons can be updated (so an expiry can be extended or cleared). With ``audit``, that entry
        is written in the same transaction with ``before``/``after`` = the lesson stored before/after."""
        ...

    def delete_lesson(self, namespace: str, lesson_id: str, *, audit: AuditEntry | None = None) -> bool:
        """Delete the namespace's lesson (False when there is none). With ``audit``, that entry is
        written in the same transaction, ``before`` = the lesson deleted, ``after`` = None."""
        ...

    def change_lesson(self, namespace: str, lesson_id: str, change: LessonChange) -> Lesson:
        """Apply ``change`` to the namespace's lesson inside one transaction: ``change`` gets the lesson
        as stored (read under the transaction's lock) and returns the lesson to store with the audit
        entry to write beside it, or None to leave it as it is (nothing written). Returns the lesson
        as stored after. NotFoundError when the namespace has no lesson with that id. ``change`` may
        run more than once (a store that retries on conflict calls it again) and may raise."""
        ...

    def purge_expired(self, namespace: str) -> int:
        """Delete the namespace's lessons whose ``expires_at`` ≤ the store clock; returns how many."""
        ...


class LessonSearch(Protocol):
    """Lexical recall candidates and the counters recall and outcomes move."""

    def search(self, query: LessonQuery, terms: Sequence[str], limit: int) -> list[Candidate]: ...
    def candidates(self, query: LessonQuery, lesson_ids: Sequence[str]) -> list[Candidate]:
        """Candidates (relevance 0.0) for those ids that pass every filter of ``query``, exactly the
        filters ``search`` applies (namespace, kinds, tags, task_type, agent, goal_id, statuses, not
        expired, not superseded), in the order given."""
        ...

    def credit_lessons(
        self, namespace: str, lesson_ids: Sequence[str], *, helpful: int = 0, harmful: int = 0
    ) -> int:
        """Atomically add to the helpful/harmful counters of those lessons (unknown ids ignored);
        returns how many were updated."""
        ...

    def touch_lessons(self, lesson_ids: Sequence[str]) -> None: ...


class VectorStore(Protocol):
    """Embedding vectors, plain bytes the store never looks inside."""

    def put_vectors(self, namespace: str, model: str, rows: Sequence[tuple[str, str, bytes]]) -> int:
        """Store (lesson_id, text_hash, vector bytes) for embedder ``model``, replacing that lesson's
        earlier vector for the same model. Rows whose lesson does not exist (deleted meanwhile) are
        skipped. Returns how many were written."""
        ...

    def vector_hashes(self, namespace: str, model: str, lesson_ids: Sequence[str]) -> dict[str, str]:
        """text_hash of the stored vector, per lesson id that has one for ``model``."""
        ...

    def vector_changes(
        self, namespace: str, model: str, after: int, limit: int | None = None
    ) -> VectorChanges:
        """Vectors of ``model`` in ``namespace`` written with sequence > ``after``, in sequence order,
        the first ``limit`` of them if given (see VectorChanges)."""
        ...

    def lessons_missing_vectors(
        self, namespace: str, model: str, limit: int, after: str | None = None
    ) -> list[Lesson]:
        """Lessons of the namespace (any status) that have no vector for ``model``, oldest first;
        with ``after`` (the last lesson id of the previous page), those after it in that order, so
        every page costs the same (a lesson no longer there: from the first)."""
        ...


def vector_pages(store: VectorStore, namespace: str, model: str, limit: int) -> Iterator[VectorChanges]:
    """Every vector of ``model`` in ``namespace``, ``limit`` rows a page, in sequence order; the last
    page's ``seq`` and ``count`` are the store's as a full read would give them. A store whose
    ``vector_changes`` takes no ``limit`` (written before it could) gives every row in one page."""
    try:
        paged = "limit" in inspect.signature(store.vector_changes).parameters
    except (TypeError, ValueError):  # no signature to read: ask for everything at once
        paged = False
    if not paged:
        yield store.vector_changes(namespace, model, 0)
        return
    after = 0
    while True:
        page = store.vector_changes(namespace, model, after, limit)
        yield page
        if not page.more:
            return
        after = page.seq


class JobQueue(Protocol):
    """The worker's side of the durable queue: lease, finish, fail, release, park."""

    def enqueue_job(self, job: Job) -> None: ...
    def lease_job(self, owner: str, namespaces: Sequence[str] | None, lease_s: float) -> Job | None: ...
    def lease_job_id(self, job_id: str, owner: str, lease_s: float) -> Job | None:
        """Lease that one job if it is runnable (queued and due, or its lease expired), as
        ``lease_job`` would; None otherwise (e.g. another worker holds it)."""
        ...

    def finish_job(
        self,
        job_id: str,
        owner: str,
        *,
        reflection: Reflection | None,
        lessons: Sequence[Lesson],
        detail: str,
        place: Placement | None = None,
    ) -> list[WriteResult]:
        """Write the job's result and mark it done, in one transaction: the lessons as
        ``write_lessons`` writes them (``place`` included), the reflection, the job done. A worker
        that lost its lease writes nothing (LeaseLostError), so a retried job places its lessons,
        and confirms a rule, once."""
        ...

    def fail_job(self, job_id: str, owner: str, *, error: str, retry_at: float | None) -> Job: ...
    def release_job(self, job_id: str, owner: str) -> None: ...
    def park_job(self, job_id: str, owner: str, *, detail: str) -> None: ...
    def next_run_after(self, namespaces: Sequence[str] | None) -> float | None: ...
    def release_waiting(self, namespaces: Sequence[str] | None) -> int: ...


class WorkerQueue(JobQueue, Protocol):
    """What a worker needs of a store (:class:`lessonbank.jobs.Worker`): the queue, how many jobs
    are left, the store clock and, when the store has one, its job announcements."""

    clock: Callable[[], float]
    notifier: JobNotifier | None

    def count_jobs(self, namespaces: Sequence[str] | None) -> dict[str, int]: ...


class JobAdmin(Protocol):
    """The operator's side of the queue: inspect, retry, purge, count."""

    def get_job(self, job_id: str, *, namespace: str | None = None) -> Job: ...
    def list_jobs(
        self, namespace: str | None, statuses: Sequence[str] | None = None, limit: int = 100
    ) -> list[Job]: ...
    def retry_jobs(self, namespace: str, job_ids: Sequence[str] | None = None) -> int: ...
    def purge_jobs(self, namespace: str, statuses: Sequence[str]) -> int: ...
    def count_jobs(self, namespaces: Sequence[str] | None) -> dict[str, int]: ...
    def namespaces(self) -> list[str]:
        """Every namespace holding an episode, a lesson or a job, sorted (what a worker serving
        them all checks the consolidation triggers of)."""
        ...


class JobNotifier(Protocol):
    """Pushes "a job became runnable" to workers, so they need not poll (PostgreSQL LISTEN/NOTIFY)."""

    def subscribe_jobs(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (from another thread) whenever a job becomes runnable; returns an unsubscribe."""
        ...


class RetentionStore(Protocol):
    """Deleting old records by age (the retention settings; ``lessonbank.services.retention``)."""

    def purge_old(self, namespace: str, cutoffs: RetentionCutoffs, *, dry_run: bool = False) -> Purged:
        """Delete the namespace's reflections created before ``reflections_before``, its done jobs
        finished before ``done_jobs_before``, and its episodes created before ``episodes_before`` that
        no unfinished job needs (a queued, leased, waiting or dead job keeps its episode: it may still
        run). Each kind is deleted independently: an episode's reflections outlive it when their own
        cut-off keeps them, and are still found by ``reflections_for_episode``. Lessons are never
        touched (they keep their text; their provenance ids may then name nothing). With ``dry_run``,
        count what would go and delete nothing."""
        ...


class AuditLog(Protocol):
    """The audit log: one row per change to a lesson (who, when, what, before and after), kept
    apart from the lessons so it outlives them. Rows a change makes are written with the change
    (see ``LessonStore``); ``append_audit`` writes rows on their own."""

    def append_audit(self, entries: Sequence[AuditEntry]) -> None: ...
    def audit_log(
        self, namespace: str, *, lesson_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """The namespace's audit rows (of ``lesson_id`` when given), newest first, at most ``limit``."""
        ...


class ConsolidationStore(Protocol):
    """Proposals, the dream log and each namespace's cycle state (seed 002 / seed 000's dream mode).

    ``apply_proposal`` is the one write of an approval, all or nothing: every stored lesson in
    ``writes`` must still have the ``updated_at`` recorded in ``proposal.based_on`` (else
    :class:`~lessonbank.errors.ConflictError` naming it, and nothing is written); then, in one
    transaction, the lessons are written (a new id inserted, an existing one replaced, its indexes
    kept in step), the audit rows appended and the proposal saved.
    """

    def save_proposal(self, proposal: Proposal) -> None:
        """Insert the proposal, or replace the stored one with its id."""
        ...

    def get_proposal(self, proposal_id: str, *, namespace: str) -> Proposal:
        """The proposal of ``namespace`` with that id; NotFoundError otherwise (another namespace's too)."""
        ...

    def list_proposals(
        self, namespace: str, *, statuses: Sequence[str] | None = None, limit: int = 50
    ) -> list[Proposal]:
        """The namespace's proposals (of those statuses when given), newest first."""
        ...

    def apply_proposal(
        self,
        proposal: Proposal,
        writes: Sequence[Lesson],
        audit: Sequence[AuditEntry],
        *,
        state: dict[str, Any] | None = None,
    ) -> None:
        """``state``, when given, replaces the namespace's cycle state in the same transaction (the
        core memory and logs an approval changes)."""
        ...

    def save_dream(self, run: DreamRun) -> None:
        """Insert the dream-log row, or replace the one with its id (a run is written when it starts
        and again when it ends)."""
        ...

    def dreams(self, namespace: str, *, limit: int = 50) -> list[DreamRun]:
        """The namespace's dream-log rows, newest first."""
        ...

    def cycle_state(self, namespace: str) -> dict[str, Any]:
        """The namespace's cycle state (``last_reflection``, rejected fingerprints, ...); {} when none."""
        ...

    def set_cycle_state(self, namespace: str, state: dict[str, Any]) -> None: ...


class Store(
    EpisodeStore,
    LessonStore,
    LessonSearch,
    VectorStore,
    JobQueue,
    JobAdmin,
    RetentionStore,
    AuditLog,
    ConsolidationStore,
    Protocol,
):
    """Every port in one backend. Methods are synchronous and thread-safe.

    ``notifier`` is the store's :class:`JobNotifier` when it can push job announcements, else None.
    ``term_vectors`` is True when the store writes each lesson's term vector
    (:func:`lessonbank.stores.lexical.term_vector`) as a vector of ``LEXICAL_SPACE`` in the lesson's
    own transaction, so recall can rank with the in-process lexical index.
    """

    clock: Callable[[], float]
    notifier: JobNotifier | None
    term_vectors: bool

    def close(self) -> None: ...
    def stats(self, namespace: str) -> StoreStats: ...
