"""The consolidation cycle's deterministic operations, and the validation every operation passes
before it enters a proposal. Pure functions of the candidates, the lessons and a clock: no I/O.

:func:`deterministic_operations` is what a cycle proposes without an LLM (and what it proposes
besides the LLM's operations):

- **MERGE** per cluster of near duplicates: a new lesson (source ``consolidation``) with the content
  of the cluster's best lesson (most used, then most confident, then most helpful, then oldest),
  the union of the sources' scopes (:func:`union_scope`: never narrower than any source), the union
  of the tags (the best lesson's first, at most ``MAX_TAGS``), the highest importance and
  confidence, the summed counters (uses, helpful, harmful), the latest use, and
  ``metadata["merged_from"]``: the sources, best first. Once applied the sources are superseded by
  it, never deleted;
- **ARCHIVE** per lesson whose decay score fell below 0.05, with the score and why;
- **FLAG** per contradiction, for the person to decide (nothing is written).

An operation whose :attr:`~lessonbank.proposals.Operation.fingerprint` is in ``rejected`` is left
out: a person said no once. A FLAG writes nothing, so it would come back every cycle: the caller
puts the fingerprints of the flags a person has seen (decided either way) in the same set.

:func:`validate` keeps an operation, or drops it with ``status="dropped"`` and a ``note``, by the
rules in order (:data:`RULES`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from lessonbank.lessons import Cap, LessonWriter, pool_cap
from lessonbank.models import MAX_TAGS, Lesson
from lessonbank.proposals import Operation
from lessonbank.services.consolidation.decay import days_idle
from lessonbank.services.consolidation.prepass import Candidates, is_live, scope_key

MARKS = ("similar_to", "contradicts")  # write-time marks: about the sources, not the merged lesson

# What validate checks, in order; the first that fails drops the operation with its note.
RULES: tuple[str, ...] = (
    "shape: each kind carries what it needs (a merge two sources and its lesson, an archive one lesson, ...)",
    "unknown lesson: every id names a lesson of the bank",
    "new lesson: content not empty; a pattern is a procedure",
    "not live: a lesson changed (merged, archived) is active, not superseded, not expired",
    "pinned: a pinned lesson is never merged or archived",
    "scope: a merge joins lessons of one kind and scope, and its lesson is of them",
    "conflict: a lesson changed by two operations stays with the first",
    "duplicate: a new lesson's text is not another lesson's (nor another operation's)",
    "cap: the pool a new lesson joins (insights per goal, rules per agent, replay per task type) holds",
)
CHANGES = frozenset({"merge", "archive", "admit"})  # the kinds that change the lessons they name


def best_lesson(lessons: Sequence[Lesson]) -> Lesson:
    """The lesson a merge builds on: most used, then most confident, then most helpful, then oldest."""
    return min(
        lessons,
        key=lambda lesson: (
            -lesson.access_count,
            -lesson.confidence,
            -(lesson.helpful - lesson.harmful),
            lesson.created_at,
            lesson.id,
        ),
    )


SCOPE_FIELDS = ("agent", "task_type", "goal_id")


def union_scope(sources: Sequence[Lesson]) -> dict[str, str | None]:
    """The scope a merge of ``sources`` serves: each of agent, task type and goal the sources share,
    else None (every one). A source for every agent makes the merge for every agent, and so do two
    sources of different agents: a lesson holds one agent, and a merge is never narrower than a source."""
    scope: dict[str, str | None] = {}
    for name in SCOPE_FIELDS:
        values = {getattr(lesson, name) for lesson in sources}
        scope[name] = values.pop() if len(values) == 1 else None
    return scope


def merged_lesson(sources: Sequence[Lesson], now: datetime) -> Lesson:
    """One lesson standing for ``sources`` (see the module docstring)."""
    base = best_lesson(sources)
    scope = union_scope(sources)
    ordered = [base, *(lesson for lesson in sources if lesson.id != base.id)]
    tags = list(dict.fromkeys(tag for lesson in ordered for tag in lesson.tags))[:MAX_TAGS]
    used = [lesson.last_accessed for lesson in sources if lesson.last_accessed is not None]
    expiries = [lesson.expires_at for lesson in sources]
    metadata = {key: value for key, value in base.metadata.items() if key not in MARKS}
    metadata["merged_from"] = [lesson.id for lesson in ordered]
    if base.kind == "principle":
        confirmed = [lesson.metadata for lesson in sources if "first_confirmed" in lesson.metadata]
        if confirmed:
            metadata["first_confirmed"] = min(float(m["first_confirmed"]) for m in confirmed)
            metadata["last_confirmed"] = max(float(m.get("last_confirmed", 0.0)) for m in confirmed)
            metadata["confirmations"] = sum(int(m.get("confirmations", 1)) for m in confirmed)
    return Lesson(
        namespace=base.namespace,
        kind=base.kind,
        content=base.content,
        situation=base.situation,
        mistake=base.mistake,
        correction=base.correction,
        learned_from=base.learned_from,
        trigger=base.trigger,
        tags=tags,
        task_type=scope["task_type"],
        agent=scope["agent"],
        goal_id=scope["goal_id"],
        importance=max(lesson.importance for lesson in sources),
        confidence=max(lesson.confidence for lesson in sources),
        source="consolidation",
        episode_id=base.episode_id,
        reflection_id=base.reflection_id,
        access_count=sum(lesson.access_count for lesson in sources),
        last_accessed=max(used) if used else None,
        helpful=sum(lesson.helpful for lesson in sources),
        harmful=sum(lesson.harmful for lesson in sources),
        expires_at=None if None in expiries else max(e for e in expiries if e is not None),
        metadata=metadata,
        created_at=now,
        updated_at=now,
    )


def deterministic_operations(
    candidates: Candidates, lessons_by_id: Mapping[str, Lesson], now: datetime, *, rejected: set[str]
) -> list[Operation]:
    """MERGE per cluster, ARCHIVE per decayed lesson, FLAG per contradiction, in that order, less
    those whose fingerprint is in ``rejected``. Ids the lessons do not hold are skipped."""
    operations: list[Operation] = []
    for cluster in candidates.clusters:
        sources = [lessons_by_id[i] for i in cluster if i in lessons_by_id]
        if len(sources) < 2:
            continue
        merged = merged_lesson(sources, now)
        ids = merged.metadata["merged_from"]
        operations.append(
            Operation(
                kind="merge",
                lesson_ids=ids,
                lesson=merged,
                reason=f"near duplicates: {', '.join(ids)}; kept the text of {ids[0]} (most used)",
            )
        )
    for lesson_id, score in candidates.archive:
        lesson = lessons_by_id.get(lesson_id)
        if lesson is None:
            continue
        operations.append(
            Operation(
                kind="archive",
                lesson_ids=[lesson_id],
                score=score,
                reason=(
                    f"decay score {score:.3f} < 0.05: unused for {days_idle(lesson, now):.0f} days, "
                    f"{lesson.access_count} uses, importance {lesson.importance:.2f}"
                ),
            )
        )
    for a, b in candidates.contradictions:
        if a in lessons_by_id and b in lessons_by_id:
            operations.append(
                Operation(kind="flag", lesson_ids=[a, b], reason="marked as contradicting when written")
            )
    return [op for op in operations if op.fingerprint not in rejected]


def validate(
    operations: Sequence[Operation],
    lessons_by_id: Mapping[str, Lesson],
    *,
    now: datetime,
    caps: Callable[[Lesson], Cap | None] = pool_cap,
) -> tuple[list[Operation], list[Operation]]:
    """(kept, dropped): each operation checked by :data:`RULES` in order, given the bank's lessons
    (all of the namespace's, for the caps) at ``now``; a dropped one carries ``status="dropped"``
    and a ``note`` naming the rule."""
    kept: list[Operation] = []
    dropped: list[Operation] = []
    changed: set[str] = set()
    pools = _PoolCounts(lessons_by_id, now, caps)
    holders = {lesson.content_hash: lesson.id for lesson in lessons_by_id.values() if lesson.content_hash}
    for op in operations:
        note = (
            _check(op, lessons_by_id, now)
            or _conflict(op, changed)
            or _duplicate(op, holders)
            or pools.admit(op)
        )
        if note is not None:
            dropped.append(op.model_copy(update={"status": "dropped", "note": note}))
            continue
        if op.kind in CHANGES:
            changed.update(op.lesson_ids)
        if op.lesson is not None and op.kind in ("extract", "pattern", "merge"):
            holders[LessonWriter.prepared(op.lesson).content_hash] = op.lesson.id
        kept.append(op)
    return kept, dropped


def _check(op: Operation, lessons_by_id: Mapping[str, Lesson], now: datetime) -> str | None:
    shape = _shape(op)
    if shape is not None:
        return f"shape: {shape}"
    unknown = [i for i in op.lesson_ids if i not in lessons_by_id]
    if unknown:
        return f"unknown lesson: {', '.join(unknown)}"
    if op.kind in ("extract", "pattern", "merge"):
        if op.lesson is None or not op.lesson.content.strip():
            return "new lesson: its content is empty"
        if op.kind == "pattern" and op.lesson.kind != "procedure":
            return f"new lesson: a pattern is a procedure, not a {op.lesson.kind}"
    named = [lessons_by_id[i] for i in op.lesson_ids]
    if op.kind == "admit":
        waiting = named[0].status == "quarantined" and "quarantine" in named[0].metadata
        return (
            None
            if waiting
            else f"not pending: {named[0].id} is not a quarantined lesson of an untrusted agent"
        )
    if op.kind == "connect":
        gone = [lesson.id for lesson in named if not is_live(lesson, now)]
        return f"not live: {', '.join(gone)} (archived, superseded or expired)" if gone else None
    if op.kind not in CHANGES:
        return None
    gone = [lesson.id for lesson in named if not is_live(lesson, now)]
    if gone:
        return f"not live: {', '.join(gone)} (archived, superseded or expired)"
    pinned = [lesson.id for lesson in named if lesson.pinned]
    if pinned:
        return f"pinned: {', '.join(pinned)} is the person's word"
    if op.kind == "merge" and op.lesson is not None:
        scopes = {scope_key(lesson) for lesson in [*named, op.lesson]}
        if len(scopes) > 1:
            return "scope: the merge joins lessons of different kinds or scopes"
    return None


def _shape(op: Operation) -> str | None:
    n = len(op.lesson_ids)
    if op.kind == "merge" and (n < 2 or op.lesson is None or len(set(op.lesson_ids)) < n):
        return "a merge names two or more distinct sources and carries the merged lesson"
    if op.kind in ("extract", "pattern") and op.lesson is None:
        return f"{op.kind} carries the new lesson"
    if op.kind == "archive" and n != 1:
        return "an archive names one lesson"
    if op.kind == "connect" and (n != 2 or op.link is None or op.lesson_ids[0] == op.lesson_ids[1]):
        return "a connection names two lessons and the link"
    if op.kind == "flag" and len(set(op.lesson_ids)) < 2:
        return "a flag names two or more lessons"
    if op.kind == "evolve" and not (op.text or "").strip():
        return "an evolution carries its text"
    if op.kind == "admit" and n != 1:
        return "an admission names one lesson"
    return None


def _duplicate(op: Operation, holders: dict[str, str]) -> str | None:
    """A new lesson whose content another lesson (or an earlier kept operation's) already has: the
    store would refuse the whole approval. A merge may keep one of its sources' text."""
    if op.lesson is None or op.kind not in ("extract", "pattern", "merge"):
        return None
    content_hash = LessonWriter.prepared(op.lesson).content_hash
    holder = holders.get(content_hash)
    if holder is not None and holder not in op.lesson_ids:
        return f"duplicate: {holder} already says this"
    return None


def _conflict(op: Operation, changed: set[str]) -> str | None:
    if op.kind not in CHANGES:
        return None
    taken = [i for i in op.lesson_ids if i in changed]
    return f"conflict: {', '.join(taken)} is already changed by an earlier operation" if taken else None


class _PoolCounts:
    """How many live lessons each capped pool holds, as the kept operations leave it."""

    def __init__(
        self, lessons_by_id: Mapping[str, Lesson], now: datetime, caps: Callable[[Lesson], Cap | None]
    ) -> None:
        self.lessons_by_id = lessons_by_id
        self.caps = caps
        self.counts: Counter[str] = Counter()
        for lesson in lessons_by_id.values():
            cap = caps(lesson)
            if cap is not None and is_live(lesson, now):
                self.counts[cap.key] += 1

    def admit(self, op: Operation) -> str | None:
        """None, counting the operation in, when every pool it adds to stays within its cap; else why not."""
        delta: Counter[str] = Counter()
        # A lesson screened out (quarantined) takes no room, and a merge into one supersedes nothing.
        screened_out = op.lesson is not None and op.lesson.status == "quarantined"
        if op.kind == "archive" or (op.kind == "merge" and not screened_out):
            for lesson_id in op.lesson_ids:
                cap = self.caps(self.lessons_by_id[lesson_id])
                if cap is not None:
                    delta[cap.key] -= 1
        joining = op.lesson if op.kind in ("extract", "pattern", "merge") and not screened_out else None
        if op.kind == "admit":  # a quarantined lesson is in no pool until it is admitted
            joining = self.lessons_by_id[op.lesson_ids[0]]
        if joining is not None:
            cap = self.caps(joining)
            if cap is not None:
                delta[cap.key] += 1
                if self.counts[cap.key] + delta[cap.key] > cap.limit:
                    return f"cap: the pool {_pool_name(cap)} is full ({cap.limit})"
        self.counts.update(delta)
        return None


def _pool_name(cap: Cap) -> str:
    value = getattr(cap.query, cap.by)
    label = {"goal_id": "goal", "agent": "agent", "task_type": "task type"}[cap.by]
    kinds = "/".join(cap.query.kinds or ())
    stream = f" {cap.stream}" if cap.stream else ""
    return f"of {kinds}{stream} for {label} {value if value is not None else '(none)'}"


def admissions(pending: Sequence[Lesson]) -> list[Operation]:
    """An ADMIT per quarantined lesson of an untrusted agent (seed 002's pending sub-agent memories):
    the person decides whether it joins the bank."""
    return [
        Operation(
            kind="admit",
            lesson_ids=[lesson.id],
            reason=f"{lesson.metadata.get('quarantine', 'quarantined')}: review before it is recalled",
        )
        for lesson in pending
    ]
