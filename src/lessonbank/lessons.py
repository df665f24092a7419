"""The rules of the lesson bank that every store applies the same way, decided once here.

- **Writing** (:class:`LessonWriter`): a lesson with the same content (``content_hash``) as a stored
  one reinforces it; else the live lesson the caller named as its duplicate (``duplicate_of``, e.g.
  found by cosine); else the stored near duplicate, when it is the same lesson (token Jaccard ≥ the
  threshold, same kind, and :func:`~lessonbank.text.same_lesson`: the same content words in the
  same order, negations, code spans, identifiers and numbers); else it is added, and the live lesson
  it ``supersedes`` is marked ``superseded_by`` it. The lesson it supersedes is never the one
  reinforced: "never do X" replacing "do X" is no repeat.
- **Nothing is merged on a likeness**: a near duplicate that is not the same lesson ("whitespace
  *after* keywords" / "*before* keywords") is added, and names the stored one in
  ``metadata["similar_to"]``: a candidate for the consolidation cycle to propose, never a silent merge.
- **Insights are per goal** (seed 000): the content hash of an insight includes its ``goal_id``
  (:func:`hash_scope`), and no lookup reinforces an insight of another goal, so the same insight
  text for two goals is two lessons. Insights stored before this rule keep their unscoped hash;
  they expire within 7 days, and until then the near-duplicate lookup (same goal only) still
  reinforces them.
- **Items are per address**: a lesson that is an item of a key-value store (the LangGraph store
  adapter's) names its address in ``metadata["item"]``; its content hash includes that address and
  no lookup reinforces an item of another address, so two keys holding the same text stay two items.
- **Reinforcing**: one more use, a little more confidence (capped at 1), the union of both tag
  lists (stored order first, at most ``MAX_TAGS``), ``last_accessed`` and ``updated_at`` now.
- **Filters and sorts** (:func:`passes`, :func:`sort_lessons`): the Python form of what the SQL
  stores express in SQL (``stores/sql``); the two are checked against each other by the contract suite.
- **Pool caps** (:class:`Cap`, :func:`pool_cap`): a goal keeps its newest 3 insights, an agent its
  10 tactical and 5 strategic rules (strategic first, then the most recently confirmed), a task
  type its newest 100 replay examples. :meth:`LessonWriter.keep_cap` applies the cap inside the
  write that adds to the pool, on the store's transaction: the pool locked, read, and what
  :meth:`Cap.evictions` names deleted, so no interleaving of writers leaves a pool over its cap.
- **Outcome credit** (:func:`episode_credit`): a success is helpful +1 to each lesson injected for
  it, a failure harmful +1, a partial nothing.

Everything here is pure (the clock is passed in), but for :meth:`LessonWriter.write_all`, which runs
the decisions on a store's transaction (:class:`~lessonbank.ports.LessonTx`): the one write path of
every store.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from lessonbank.errors import InputError, StoreError
from lessonbank.models import MAX_TAGS, Decision, Episode, Lesson, from_timestamp
from lessonbank.ports import (
    NEAR_DUPLICATE_JACCARD,
    LessonQuery,
    LessonSort,
    LessonTx,
    Placement,
    WriteResult,
)
from lessonbank.scoping import check_id_free
from lessonbank.text import content_hash, jaccard, same_lesson, words

CONFIDENCE_STEP = 0.05
INSIGHTS_PER_GOAL = 3
TACTICAL_PER_AGENT = 10
STRATEGIC_PER_AGENT = 5
REPLAY_PER_TYPE = 100
ITEM_KEY = "item"  # metadata key naming the store address a lesson is the item of
SORTS: tuple[str, ...] = ("created", "score", "access", "confidence", "utility")

# What a write looks up, in order, until one is found: ("hash", content hash), ("named", the id the
# caller named as a duplicate: must be live), ("similar", the near duplicate's id: must still exist).
Lookup = tuple[Literal["hash", "named", "similar"], str]


@dataclass(frozen=True)
class WriteDecision:
    """What a store does with a lesson: add it, or store ``lesson`` as the reinforced ``previous``.

    On an add, ``supersedes`` is the id of the live lesson to mark ``superseded_by`` the new one.
    """

    action: Literal["added", "reinforced"]
    lesson: Lesson
    previous: Lesson | None = None
    supersedes: str | None = None

    def result(self) -> WriteResult:
        return WriteResult(self.lesson, self.action)


class LessonWriter:
    """Decides how a lesson is written from what the store found, and writes it through the
    store's transaction (:class:`~lessonbank.ports.LessonTx`; see the module docstring for the rules)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    @staticmethod
    def prepared(lesson: Lesson) -> Lesson:
        """The lesson as it is stored: its content hash set, its tags capped."""
        update: dict[str, object] = {
            "content_hash": content_hash(
                lesson.namespace, lesson.kind, lesson.content, scope=hash_scope(lesson)
            )
        }
        if len(lesson.tags) > MAX_TAGS:
            update["tags"] = lesson.tags[:MAX_TAGS]
        return lesson.model_copy(update=update)

    @staticmethod
    def lookups(lesson: Lesson, similar: Lesson | None, duplicate_of: str | None) -> list[Lookup]:
        """What to look for, in order; the lesson ``lesson`` supersedes is left out."""
        found: list[Lookup] = [("hash", lesson.content_hash)]
        if duplicate_of is not None and duplicate_of != lesson.supersedes:
            found.append(("named", duplicate_of))
        if (
            similar is not None
            and similar.id != lesson.supersedes
            and same_lesson(lesson.content, similar.content)
        ):
            found.append(("similar", similar.id))
        return found

    def accepts(
        self, lookup: Lookup, found: Lesson | None, namespace: str, *, lesson: Lesson | None = None
    ) -> bool:
        """Whether ``found`` (what the store read for ``lookup``) is the lesson to reinforce
        (for ``lesson``, when given: never an insight of another goal)."""
        if found is None or found.namespace != namespace:
            return False
        if lesson is not None and not same_scope(lesson, found):
            return False
        return lookup[0] != "named" or self.is_live(found, namespace)

    def decide(
        self,
        lesson: Lesson,
        *,
        similar: Lesson | None,
        duplicate_of: str | None,
        read: Callable[[Lookup], Lesson | None],
    ) -> WriteDecision:
        """Reinforce the first lesson found by ``read`` (the store's read, inside its transaction,
        of each of :meth:`lookups`), else add ``lesson``."""
        for lookup in self.lookups(lesson, similar, duplicate_of):
            found = read(lookup)
            if found is not None and self.accepts(lookup, found, lesson.namespace, lesson=lesson):
                return WriteDecision("reinforced", self.reinforced(found, lesson.tags), previous=found)
        supersedes = lesson.supersedes if lesson.supersedes not in (None, lesson.id) else None
        if (
            similar is not None
            and similar.id not in (lesson.supersedes, lesson.id)
            and same_scope(lesson, similar)
        ):
            lesson = similar_to(
                lesson, similar.id, jaccard(words(lesson.content), words(similar.content)), "words"
            )
        return WriteDecision("added", lesson, supersedes=supersedes)

    def write_all(
        self,
        tx: LessonTx,
        lessons: Sequence[Lesson],
        similar: Sequence[Lesson | None],
        *,
        place: Placement | None = None,
        duplicate_of: str | None = None,
    ) -> list[WriteResult]:
        """Write ``lessons`` (prepared) in the transaction ``tx``, the one write path of every store:
        their pools locked (in one order: two writers never wait on each other), ``place`` run,
        then each lesson reinforced, added or superseding (:meth:`decide`, with ``similar``, its
        near duplicate found before the transaction), its pool kept to its cap."""
        tx.lock_pools(sorted({pool for lesson in lessons for pool in pools_of(lesson)}))
        if place is not None and lessons:
            lessons = [self.prepared(lesson) for lesson in place(tx, list(lessons))]
        return [
            self.write(tx, lesson, near, duplicate_of) for lesson, near in zip(lessons, similar, strict=True)
        ]

    def write(
        self, tx: LessonTx, lesson: Lesson, similar: Lesson | None, duplicate_of: str | None = None
    ) -> WriteResult:
        """Apply the decision for one prepared lesson in ``tx`` (see :meth:`write_all`)."""
        ns = lesson.namespace
        check_id_free("lesson", lesson.id, ns, tx.holder(ns, lesson.id))

        def read(lookup: Lookup) -> Lesson | None:
            how, key = lookup
            return tx.by_hash(ns, key) if how == "hash" else tx.by_id(ns, key)

        for _ in range(3):
            decision = self.decide(lesson, similar=similar, duplicate_of=duplicate_of, read=read)
            if decision.action == "reinforced":
                tx.put(decision.lesson, decision.previous)
                return decision.result()
            if tx.add(decision.lesson):
                self.keep_cap(tx, decision.lesson)
                old = tx.by_id(ns, decision.supersedes) if decision.supersedes is not None else None
                marked = self.superseded(old, lesson.id) if old is not None else None
                if marked is not None:
                    tx.put(marked, old)
                return decision.result()
            # Another writer added the same content in the meantime: reinforce theirs.
        raise StoreError(f"lesson {lesson.id} could not be written: its content kept changing hands")

    def keep_cap(self, tx: LessonTx, written: Lesson) -> None:
        """Remove what writing ``written`` pushes out of its pool (:class:`Cap`); the pool is locked."""
        cap = pool_cap(written)
        if cap is not None:
            for extra in cap.evictions(tx.members(cap.query), written, self.clock()):
                tx.delete(extra)

    def reinforced(self, stored: Lesson, new_tags: Sequence[str]) -> Lesson:
        """``stored`` after one more repeat (the only reinforce rule)."""
        now = from_timestamp(self.clock())
        return stored.model_copy(
            update={
                "access_count": stored.access_count + 1,
                "confidence": min(1.0, stored.confidence + CONFIDENCE_STEP),
                "tags": list(dict.fromkeys([*stored.tags, *new_tags]))[:MAX_TAGS],
                "last_accessed": now,
                "updated_at": now,
            }
        )

    def superseded(self, old: Lesson, new_id: str) -> Lesson | None:
        """``old`` marked superseded by ``new_id``, or None when it is not live (nothing to mark)."""
        if not self.is_live(old, old.namespace):
            return None
        return old.model_copy(update={"superseded_by": new_id, "updated_at": from_timestamp(self.clock())})

    def is_live(self, lesson: Lesson, namespace: str) -> bool:
        """Of ``namespace``, not superseded, not expired."""
        return (
            lesson.namespace == namespace
            and lesson.superseded_by is None
            and (lesson.expires_at is None or lesson.expires_at.timestamp() > self.clock())
        )


@dataclass(frozen=True)
class Cap:
    """At most ``limit`` live lessons in one pool: those passing ``query`` whose field ``by`` (goal,
    agent or task type) equals the query's exactly (None included), of ``stream`` for rules."""

    query: LessonQuery
    limit: int
    by: Literal["goal_id", "agent", "task_type"]
    stream: str | None = None

    @property
    def key(self) -> str:
        """The pool's name within its namespace (what a store locks or watches)."""
        value = getattr(self.query, self.by)
        parts = [*(self.query.kinds or ()), self.by, "" if value is None else f"={value}", self.stream or ""]
        return "\x1f".join(parts)

    def holds(self, lesson: Lesson, now: float) -> bool:
        """Whether ``lesson`` is one of the pool's live lessons."""
        return (
            passes(lesson, self.query, now)
            and getattr(lesson, self.by) == getattr(self.query, self.by)
            and (self.stream is None or stream_of(lesson) == self.stream)
        )

    def evictions(self, stored: Sequence[Lesson], written: Lesson, now: float) -> list[Lesson]:
        """What writing ``written`` drops from the pool, given the lessons ``stored`` (any superset
        of the pool's): the written lesson stays; of the others, the best ``limit - 1`` stay (all
        ``limit`` when ``written`` is not in the pool), by the pool's order."""
        others = [lesson for lesson in stored if lesson.id != written.id and self.holds(lesson, now)]
        keep = self.limit - 1 if self.holds(written, now) else self.limit
        return ranked_pool(others)[max(0, keep) :]


def pool_cap(lesson: Lesson) -> Cap | None:
    """The cap of the pool ``lesson`` belongs to, if any (see the module docstring)."""
    ns = lesson.namespace
    if lesson.kind == "insight" and lesson.goal_id:
        return Cap(LessonQuery(ns, kinds=["insight"], goal_id=lesson.goal_id), INSIGHTS_PER_GOAL, "goal_id")
    if lesson.kind == "procedure":
        return Cap(
            LessonQuery(ns, kinds=["procedure"], task_type=lesson.task_type), REPLAY_PER_TYPE, "task_type"
        )
    if lesson.kind == "principle":
        stream = stream_of(lesson)
        limit = STRATEGIC_PER_AGENT if stream == "strategic" else TACTICAL_PER_AGENT
        return Cap(LessonQuery(ns, kinds=["principle"], agent=lesson.agent), limit, "agent", stream)
    return None


def pools_of(lesson: Lesson) -> list[tuple[str, str]]:
    """The capped pools a write of ``lesson`` may change, as ``(namespace, Cap.key)``: a rule's
    confirmation may move it from the tactical stream to the strategic one, so a rule locks both."""
    cap = pool_cap(lesson)
    if cap is None:
        return []
    if lesson.kind != "principle":
        return [(lesson.namespace, cap.key)]
    return [(lesson.namespace, replace(cap, stream=stream).key) for stream in ("strategic", "tactical")]


def stream_of(rule: Lesson) -> str:
    """A rule's stream: ``tactical`` unless promoted to ``strategic``."""
    return str(rule.metadata.get("stream", "tactical"))


def ranked_pool(lessons: Sequence[Lesson]) -> list[Lesson]:
    """A pool's lessons best first: rules strategic first, then the most recently confirmed;
    anything else newest first. What a cap drops is the tail."""

    def rank(lesson: Lesson) -> tuple[bool, float, float]:
        created = lesson.created_at.timestamp()
        if lesson.kind != "principle":
            return False, -created, 0.0
        confirmed = float(lesson.metadata.get("last_confirmed", created))
        return stream_of(lesson) != "strategic", -confirmed, -created

    return sorted(lessons, key=rank)


def item_address(lesson: Lesson) -> str | None:
    """The key-value store address a lesson is the item of (``metadata["item"]``), if any."""
    address = lesson.metadata.get(ITEM_KEY)
    return address if isinstance(address, str) and address else None


def hash_scope(lesson: Lesson) -> str | None:
    """What besides namespace, kind and text makes a lesson's content its own: an insight's goal,
    a store item's address."""
    if lesson.kind == "insight" and lesson.goal_id:
        return f"goal:{lesson.goal_id}"
    address = item_address(lesson)
    return None if address is None else f"item:{address}"


def same_scope(new: Lesson, stored: Lesson) -> bool:
    """Whether ``stored`` may be reinforced by ``new``: always, except insights of different goals
    (or of another kind: an insight only repeats an insight) and items of different addresses."""
    if item_address(new) != item_address(stored):
        return False
    if new.kind != "insight" and stored.kind != "insight":
        return True
    return new.kind == stored.kind and new.goal_id == stored.goal_id


def similar_to(
    lesson: Lesson, other_id: str, similarity: float, by: str, *, key: str = "similar_to"
) -> Lesson:
    """``lesson`` naming ``other_id`` as a lesson it resembles (``metadata["similar_to"]``) or seems
    to contradict (``key="contradicts"``): a candidate pair for the consolidation cycle, which
    proposes a merge, or flags the contradiction, to a person."""
    marks = [m for m in lesson.metadata.get(key, []) if isinstance(m, dict) and m.get("id") != other_id]
    marks.append({"id": other_id, "similarity": round(float(similarity), 4), "by": by})
    return lesson.model_copy(update={"metadata": {**lesson.metadata, key: marks}})


def pick_near_duplicate(
    content: str, candidates: Sequence[Lesson], threshold: float = NEAR_DUPLICATE_JACCARD
) -> Lesson | None:
    """The candidate that is the same lesson (:func:`~lessonbank.text.same_lesson`: the writer
    reinforces it), else the most similar one at or above ``threshold`` token Jaccard (the writer
    marks it ``similar_to``), if any.

    All words count, stopwords included: "do not run X" must not merge into "run X".
    """
    tokens = words(content)
    best: tuple[bool, float, Lesson] | None = None
    for candidate in candidates:
        similarity = jaccard(tokens, words(candidate.content))
        same = same_lesson(content, candidate.content)
        if similarity < threshold and not same:
            continue
        rank = (same, similarity)
        if best is None or rank > best[:2]:
            best = (*rank, candidate)
    return best[2] if best else None


def episode_credit(episode: Episode) -> tuple[int, int]:
    """The (helpful, harmful) increments an episode's outcome gives the lessons injected for it."""
    return {"success": (1, 0), "failure": (0, 1)}.get(episode.status, (0, 0))


def matches(
    query: LessonQuery,
    now: float,
    *,
    status: str,
    kind: str,
    task_type: str | None,
    agent: str | None,
    goal_id: str | None,
    tags: Collection[str],
    superseded: bool,
    expires_at: float | None,
) -> bool:
    """Whether a lesson of ``query.namespace`` with these fields passes the filters of ``query``
    (the SQL stores' filter, in Python; stores that keep flat copies of the fields call it on those)."""
    if query.statuses and status not in query.statuses:
        return False
    if query.kinds and kind not in query.kinds:
        return False
    for wanted, value in ((query.task_type, task_type), (query.agent, agent), (query.goal_id, goal_id)):
        if wanted is not None and value != wanted:
            return False
    if query.tags and not set(query.tags) <= set(tags):
        return False
    return not query.live_only or (not superseded and (expires_at is None or expires_at > now))


def content_taken(holder_id: str | None, lesson: Lesson) -> None:
    """Refuse an update that gives ``lesson`` the content another lesson (``holder_id``) already has."""
    if holder_id is not None and holder_id != lesson.id:
        raise InputError(
            f"lesson {holder_id} of this kind already has this content; reinforce or delete that one instead",
            field="content",
        )


def duplicate_decision(decision: Decision, job_id: str | None) -> Decision:
    """The decision for an episode whose job repeats job ``job_id`` (same dedupe key): not reflected again."""
    return Decision(
        reflect=False,
        trigger=decision.trigger,
        reflector=decision.reflector,
        reason=f"duplicate: an identical episode is already reflected (job {job_id})",
        job_id=job_id,
    )


def passes(lesson: Lesson, query: LessonQuery, now: float) -> bool:
    """Whether ``lesson`` passes the filters of ``query``, its namespace included."""
    return lesson.namespace == query.namespace and matches(
        query,
        now,
        status=lesson.status,
        kind=lesson.kind,
        task_type=lesson.task_type,
        agent=lesson.agent,
        goal_id=lesson.goal_id,
        tags=lesson.tags,
        superseded=lesson.superseded_by is not None,
        expires_at=lesson.expires_at.timestamp() if lesson.expires_at else None,
    )


def check_sort(sort: str) -> None:
    if sort not in SORTS:
        raise InputError(f"unknown sort {sort!r}; use one of {', '.join(SORTS)}", field="sort")


def utility(helpful: int, harmful: int) -> tuple[float, int]:
    """The recall score's utility (Laplace share of helpful outcomes), then the net count."""
    return (helpful + 1.0) / (helpful + harmful + 2.0), helpful - harmful


def sort_lessons(lessons: list[Lesson], sort: LessonSort) -> list[Lesson]:
    """Lessons in ``sort`` order, newest first on ties (as the SQL stores' ``ORDER BY``)."""
    check_sort(sort)
    lessons = sorted(lessons, key=lambda lesson: lesson.created_at, reverse=True)
    keys: dict[str, Callable[[Lesson], float | tuple[float, int]]] = {
        "access": lambda lesson: lesson.access_count,
        "confidence": lambda lesson: lesson.confidence,
        "utility": lambda lesson: utility(lesson.helpful, lesson.harmful),
        "score": lambda lesson: lesson.importance * (0.5 + lesson.confidence),
    }
    if sort in keys:
        lessons.sort(key=keys[sort], reverse=True)  # stable: created order kept among equals
    return lessons


def last_used(lesson: Lesson) -> float:
    return (lesson.last_accessed or lesson.created_at).timestamp()
