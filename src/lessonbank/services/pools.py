"""The pools: where reflections go and how long they live: goal insights, rules, replay examples.

Everything is a :class:`~lessonbank.models.Lesson`, so every store holds it without new
tables; the structured extras sit in ``Lesson.metadata`` (times as Unix seconds).

- Insights (seed 000): the newest 3 per goal, each expiring 7 days after it was written.
  Context takes a goal's insights by importance, else the most important among the 10 most
  recently reflected goals, at most 2.
- Rules (seed 003, kind ``principle``): a new rule is tactical, expires 4 weeks after it was
  last confirmed, at most 10 per agent (the least recently confirmed drops). Deriving the same
  or a near-duplicate rule again, or marking it helpful, confirms it; a tactical rule confirmed
  across 4+ weeks is promoted to the strategic stream (no expiry, at most 5 per agent).
- Replay (seed 003, kind ``procedure``): successes kept 4 weeks, failures 8 weeks, at most 100
  per task type (the oldest drops); matched by exact task type first, then keyword overlap;
  top 3 with at least one failure among them when one matches.

Expired lessons never come back: reads filter them, and every write here purges them first,
so an exact repeat of an expired text is added fresh instead of reviving the old one. Placement
(:meth:`Pools.placement`) runs inside the transaction that writes the lessons (for a job, the one
that finishes it), so a retried job confirms a rule once. The caps are kept inside the write that
adds to a pool (:class:`lessonbank.lessons.Cap`, ``LessonWriter.keep_cap``), so no reader sees a
pool over its cap, however many workers write at once.

Known limit: lessons are unique per (namespace, kind, content), so the very same rule text
derived for two agents is one rule, kept by the agent that learned it first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from lessonbank.errors import InputError, NotFoundError
from lessonbank.lessons import INSIGHTS_PER_GOAL as INSIGHTS_PER_GOAL
from lessonbank.lessons import REPLAY_PER_TYPE as REPLAY_PER_TYPE
from lessonbank.lessons import STRATEGIC_PER_AGENT as STRATEGIC_PER_AGENT
from lessonbank.lessons import TACTICAL_PER_AGENT as TACTICAL_PER_AGENT
from lessonbank.lessons import pick_near_duplicate, ranked_pool, stream_of
from lessonbank.models import Lesson, from_timestamp
from lessonbank.ports import (
    NEAR_DUPLICATE_JACCARD,
    LessonQuery,
    LessonSearch,
    LessonStore,
    LessonTx,
    Placement,
)
from lessonbank.services.scope import Scope, check_count
from lessonbank.text import keywords

DAY = 86_400.0
INSIGHT_TTL_S = 7 * DAY
RECENT_GOALS = 10
INSIGHTS_IN_CONTEXT = 2

TACTICAL_TTL_S = 28 * DAY
PROMOTE_AFTER_S = 28 * DAY
RULE_MATCH_JACCARD = NEAR_DUPLICATE_JACCARD  # the same "near duplicate" as the store uses

REPLAY_SUCCESS_TTL_S = 28 * DAY
REPLAY_FAILURE_TTL_S = 56 * DAY
REPLAY_IN_CONTEXT = 3
REPLAY_CANDIDATES = 20
RECENT_SCAN = 300  # newest insights read to find the 10 most recently reflected goals

_SCAN = 1000


class Lessons(LessonStore, LessonSearch, Protocol):
    """The ports the pools use: lessons written and listed (:class:`~lessonbank.ports.LessonStore`),
    searched and credited (:class:`~lessonbank.ports.LessonSearch`)."""


class Pools:
    """The pools of one bank: what the bank's ``insights``, ``rules``, ``replay`` and ``confirm_rule``
    read and write, and :meth:`place`, which readies freshly reflected lessons for writing."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def place(self, lessons: Sequence[Lesson]) -> list[Lesson]:
        """Ready ``lessons`` for their pools and write them, in one transaction (see :func:`place`)."""
        return [result.lesson for result in self.scope.store.write_lessons(lessons, place=self.placement())]

    def placement(self) -> Placement:
        """What readies freshly reflected lessons inside the transaction that writes them (see
        :func:`place`); a quarantined lesson is left as it is: it makes no room, confirms no rule,
        and does not expire."""
        clock = self.scope.clock

        def run(tx: LessonTx, lessons: list[Lesson]) -> list[Lesson]:
            placed = iter(
                place_in(tx, [lesson for lesson in lessons if lesson.status != "quarantined"], clock())
            )
            return [lesson if lesson.status == "quarantined" else next(placed) for lesson in lessons]

        return run

    def insights(self, goal_id: str | None) -> list[Lesson]:
        """A goal's live insights by importance, or (no goal) those of the 10 most recently reflected goals."""
        return insights(self.scope.store, self.scope.namespace, goal_id, fallback=False)

    def rules(self, agent: str | None, stream: str | None) -> list[Lesson]:
        return list_rules(self.scope.store, self.scope.namespace, agent, stream)

    def replay(self, task: str | None, task_type: str | None, k: int) -> list[Lesson]:
        check_count(k, "k")
        return replay(self.scope.store, self.scope.namespace, task=task, task_type=task_type, k=k)

    def confirm_rule(self, rule_id: str) -> Lesson:
        """Mark a rule helpful: one more confirmation."""
        return confirm_rule_by_id(self.scope.store, self.scope.namespace, rule_id, self.scope.clock())


def every_lesson(store: LessonStore, query: LessonQuery, *, sort: str = "created") -> list[Lesson]:
    """Every lesson passing ``query``, read a page at a time."""
    out: list[Lesson] = []
    while batch := store.list_lessons(query, limit=_SCAN, offset=len(out), sort=sort):  # type: ignore[arg-type]
        out.extend(batch)
        if len(batch) < _SCAN:
            break
    return out


def _at(seconds: float) -> datetime:
    stamp = from_timestamp(seconds)
    assert stamp is not None
    return stamp


# --------------------------------------------------------------------------- write side


class Placing(Protocol):
    """What placing lessons reads and writes: a store's write transaction
    (:class:`~lessonbank.ports.LessonTx`), or a store itself, each step its own write (:func:`place`)."""

    def members(self, query: LessonQuery) -> list[Lesson]: ...
    def put(self, lesson: Lesson, previous: Lesson | None) -> None: ...
    def purge_expired(self, namespace: str) -> int: ...


class _EachStep:
    """A store as :class:`Placing`: every step written at once, in its own transaction."""

    def __init__(self, store: LessonStore) -> None:
        self.store = store

    def members(self, query: LessonQuery) -> list[Lesson]:
        return every_lesson(self.store, query)

    def put(self, lesson: Lesson, previous: Lesson | None) -> None:
        self.store.update_lesson(lesson)

    def purge_expired(self, namespace: str) -> int:
        return self.store.purge_expired(namespace)


def place(store: LessonStore, lessons: Sequence[Lesson], now: float) -> list[Lesson]:
    """:func:`place_in` on ``store``, each step its own write (a job places its lessons inside the
    transaction that finishes it instead: :meth:`Pools.placement`)."""
    return place_in(_EachStep(store), lessons, now)


def place_in(tx: Placing, lessons: Sequence[Lesson], now: float) -> list[Lesson]:
    """Ready freshly reflected lessons for writing, inside the transaction ``tx`` that writes them:
    expired lessons purged, each stamped with its expiry, and a principle that repeats one of its
    agent's rules turned into a confirmation of that rule. The write that follows keeps the pool's
    cap (the oldest, or the least recently confirmed rule, drops in the same transaction).

    A confirmed rule keeps its text, so the write that follows reinforces that very rule. All of it
    commits with the write (and, for a job, with the job done), so a retried job confirms once.
    """
    if not lessons:
        return []
    tx.purge_expired(lessons[0].namespace)
    return [_place(tx, lesson, now) for lesson in lessons]


def _place(tx: Placing, lesson: Lesson, now: float) -> Lesson:
    namespace = lesson.namespace
    if lesson.kind == "insight":
        return lesson.model_copy(update={"expires_at": _at(now + INSIGHT_TTL_S)})
    if lesson.kind == "procedure":
        ttl = REPLAY_FAILURE_TTL_S if lesson.metadata.get("result") == "failure" else REPLAY_SUCCESS_TTL_S
        return lesson.model_copy(update={"expires_at": _at(now + ttl)})
    if lesson.kind == "principle":
        query = LessonQuery(namespace, kinds=["principle"], agent=lesson.agent)
        current = ranked_pool([rule for rule in tx.members(query) if rule.agent == lesson.agent])
        match = pick_near_duplicate(lesson.content, current, RULE_MATCH_JACCARD)
        if match is not None:
            confirmed = confirmation(match, now)
            tx.put(confirmed, match)
            return lesson.model_copy(
                update={"content": confirmed.content, "tags": confirmed.tags, "metadata": confirmed.metadata}
            )
        metadata = {
            "stream": "tactical",
            **lesson.metadata,
            "confirmations": 1,
            "first_confirmed": now,
            "last_confirmed": now,
        }
        return lesson.model_copy(update={"metadata": metadata, "expires_at": _at(now + TACTICAL_TTL_S)})
    return lesson


def confirmation(rule: Lesson, now: float) -> Lesson:
    """``rule`` confirmed once more: the expiry moves 4 weeks ahead; 4+ weeks of confirmations promote it."""
    meta = dict(rule.metadata)
    first = float(meta.get("first_confirmed", rule.created_at.timestamp()))
    meta["confirmations"] = int(meta.get("confirmations", 1)) + 1
    meta["last_confirmed"] = now
    meta.setdefault("first_confirmed", first)
    meta.setdefault("stream", "tactical")
    tags = list(rule.tags)
    expires_at: datetime | None = _at(now + TACTICAL_TTL_S)
    if meta["stream"] == "strategic":
        expires_at = None
    elif now - first >= PROMOTE_AFTER_S:
        meta["stream"] = "strategic"
        meta["promoted_at"] = now
        expires_at = None
        tags = [("strategic" if tag == "tactical" else tag) for tag in tags]
        if "strategic" not in tags:
            tags.append("strategic")
    return rule.model_copy(
        update={"metadata": meta, "expires_at": expires_at, "tags": tags, "updated_at": _at(now)}
    )


def confirm_rule(store: Lessons, rule: Lesson, now: float, *, helpful: bool = False) -> Lesson:
    """One more confirmation of a stored rule (see :func:`confirmation`); ``helpful`` adds to its counter."""
    stored = store.update_lesson(confirmation(rule, now))
    if helpful:
        # The counter moves atomically in the store, like outcome credits, never read-modify-written here.
        store.credit_lessons(rule.namespace, [rule.id], helpful=1)
        stored = store.get_lesson(rule.id)
    return stored


def confirm_rule_by_id(store: Lessons, namespace: str, rule_id: str, now: float) -> Lesson:
    """Mark a live rule of ``namespace`` helpful (a confirmation). An expired rule stays gone."""
    rule = store.get_lesson(rule_id)
    if rule.namespace != namespace or rule.kind != "principle":
        raise NotFoundError("rule", rule_id)
    store.purge_expired(namespace)
    try:
        live = store.get_lesson(rule_id)
    except NotFoundError:
        raise InputError(f"rule {rule_id} has expired; expired rules do not come back", field="id") from None
    return confirm_rule(store, live, now, helpful=True)


# --------------------------------------------------------------------------- read side


def rules(store: LessonStore, namespace: str, agent: str | None) -> list[Lesson]:
    """The agent's live rules (``agent=None``: rules with no agent), strategic first, then the most
    recently confirmed."""
    found = [
        lesson
        for lesson in every_lesson(store, LessonQuery(namespace, kinds=["principle"], agent=agent))
        if lesson.agent == agent
    ]
    return _ranked_rules(found)


def _ranked_rules(found: list[Lesson]) -> list[Lesson]:
    return ranked_pool(found)


def context_rules(store: LessonStore, namespace: str, agent: str | None) -> list[Lesson]:
    """Rules for a prompt: the agent's own plus the agent-less ones (all rules when no agent)."""
    if agent is None:
        return rules_all(store, namespace)
    own = rules(store, namespace, agent)
    shared = store.list_lessons(LessonQuery(namespace, kinds=["principle"]), limit=RECENT_SCAN)
    return [*own, *_ranked_rules([rule for rule in shared if rule.agent is None])]


def list_rules(store: LessonStore, namespace: str, agent: str | None, stream: str | None) -> list[Lesson]:
    """Live rules, strategic first: those an agent is given (its own, then the agent-less ones, as
    a context injects them: a rule without an agent serves every agent), or every rule when
    ``agent`` is None."""
    if stream not in (None, "tactical", "strategic"):
        raise InputError(f"stream must be tactical or strategic, got {stream!r}", field="stream")
    found = context_rules(store, namespace, agent)
    return [rule for rule in found if stream is None or stream_of(rule) == stream]


def rules_all(store: LessonStore, namespace: str) -> list[Lesson]:
    return _ranked_rules(every_lesson(store, LessonQuery(namespace, kinds=["principle"])))


def insights(
    store: LessonStore, namespace: str, goal_id: str | None, *, fallback: bool = True
) -> list[Lesson]:
    """A goal's live insights by importance then recency; without a goal (or, with ``fallback``,
    when the goal has none), those of the 10 most recently reflected goals, the same way."""
    if goal_id is not None:
        own = store.list_lessons(LessonQuery(namespace, kinds=["insight"], goal_id=goal_id), limit=_SCAN)
        if own or not fallback:
            return _by_importance(own)
    recent = store.list_lessons(LessonQuery(namespace, kinds=["insight"]), limit=RECENT_SCAN)
    chosen = set(_goals(recent))
    return _by_importance([lesson for lesson in recent if lesson.goal_id in chosen])


def _goals(recent: Sequence[Lesson]) -> list[str]:
    """The first RECENT_GOALS distinct goals of insights listed newest first."""
    goals: dict[str, None] = {}
    for lesson in recent:
        if lesson.goal_id and len(goals) < RECENT_GOALS:
            goals.setdefault(lesson.goal_id, None)
    return list(goals)


def _by_importance(found: list[Lesson]) -> list[Lesson]:
    return sorted(found, key=lambda lesson: (-lesson.importance, -lesson.created_at.timestamp()))


def recent_goals(store: LessonStore, namespace: str) -> list[str]:
    """The 10 most recently reflected goals, newest first."""
    return _goals(store.list_lessons(LessonQuery(namespace, kinds=["insight"]), limit=RECENT_SCAN))


def replay(
    store: Lessons, namespace: str, *, task: str | None, task_type: str | None, k: int = REPLAY_IN_CONTEXT
) -> list[Lesson]:
    """Replay examples: exact task type first (newest first), then by keyword overlap with the
    task; the top ``k`` hold at least one failure whenever a matching failure exists.

    The work is bounded: the newest ``k`` of the exact type, its newest failure, and at most
    REPLAY_CANDIDATES keyword candidates from the store's lexical search, only when still needed.
    """
    if k <= 0:
        return []
    query = LessonQuery(namespace, kinds=["procedure"], task_type=task_type)
    exact: list[Lesson] = []
    if task_type is not None:
        exact = [p for p in store.list_lessons(query, limit=k) if p.task_type == task_type]
        if exact and not any(_result(p) == "failure" for p in exact):
            failed = store.list_lessons(replace(query, tags=["failure"]), limit=1)
            exact += [p for p in failed if p.task_type == task_type and _result(p) == "failure"]
    ranked = list(exact)
    words = set(keywords(task or "")) | set(keywords(task_type or ""))
    if words and (len(exact) < k or not any(_result(p) == "failure" for p in exact)):
        seen = {p.id for p in exact}
        found = store.search(replace(query, task_type=None), sorted(words), REPLAY_CANDIDATES)
        scored = []
        for p in store.get_lessons([c.lesson_id for c in found if c.lesson_id not in seen]):
            about = str(p.metadata.get("task", p.content))
            overlap = len(words & set(keywords(about) + keywords(p.task_type or "")))
            if overlap:
                scored.append((overlap, p.created_at.timestamp(), p))
        ranked += [p for _, _, p in sorted(scored, key=lambda item: (-item[0], -item[1]))]
    top = ranked[:k]
    if top and not any(_result(p) == "failure" for p in top):
        failure = next((p for p in ranked[k:] if _result(p) == "failure"), None)
        if failure is not None:
            top = [*top[: k - 1], failure]
    return top


def _result(procedure: Lesson) -> str:
    return str(procedure.metadata.get("result", "success"))
