"""Decay: how relevant a lesson still is, from its importance, age of use, kind and reinforcement.

A pure function of the lesson and a clock passed in: no store, no I/O. The formula is seed 002's
(cognitive-memory) decay model with one fix::

    score = min(1.0, importance × e^(−0.03 × days) × KIND_WEIGHTS[kind] × log2(access_count + 2))

- ``days``: days since ``last_accessed``, or since ``created_at`` when the lesson was never used;
  never negative (a timestamp after the clock counts as now).
- The fix: the seed reinforces by ``log2(access_count + 1)``, which is 0 for a lesson nobody has used
  yet, so every new item would score 0 and be proposed for archive on its first day. ``+ 2`` makes an
  unused lesson's factor 1 and each use add less than the one before (2 uses: 2.0, 6 uses: 3.0).
- The whole is capped at 1.0; a pinned lesson scores 1.0 and never decays.

Tiers (:data:`TIER_FLOORS`): ``active`` ≥ 0.5, ``fading`` ≥ 0.2, ``dormant`` ≥ 0.05, and below that
``archive``: proposed for archive by a consolidation run, for a person to approve. Nothing here
archives, hides or deletes a lesson.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal, get_args

from lessonbank.models import Lesson, LessonKind

DECAY_RATE = 0.03  # per day: e^(−0.03 × 23.1) = 0.5, an unused lesson's score halves in about 23 days
SECONDS_PER_DAY = 86_400.0

Tier = Literal["active", "fading", "dormant", "archive"]
TIERS: tuple[Tier, ...] = get_args(Tier)

# The lowest score of each tier, highest first; a score below the last floor is "archive".
TIER_FLOORS: tuple[tuple[Tier, float], ...] = (("active", 0.5), ("fading", 0.2), ("dormant", 0.05))

# Seed 002's type weights are core 1.5, semantic 1.2, procedural 1.0, episodic 0.8 (and vault: never
# decays, which is ``pinned`` here). Each kind takes the weight of the memory type it is closest to:
KIND_WEIGHTS: dict[LessonKind, float] = {
    # a goal's insight is about one goal's episodes (seed 000): episodic, the quickest to go stale
    "insight": 0.8,
    # a situation / mistake / correction learned from one episode but meant for the next similar
    # task (seed 004): between episodic and semantic, so neutral
    "lesson": 1.0,
    # a rule with its reason, "always X when Y because Z" (seed 003): general knowledge, semantic
    "principle": 1.2,
    # numbered steps that worked (seed 003's replay pool): procedural
    "procedure": 1.0,
}
# Seed 002's core weight (1.5) has no kind here: the core memory document is not a lesson.


def days_idle(lesson: Lesson, now: datetime) -> float:
    """Days since the lesson was last used (or written, if never used); 0 for a time after ``now``."""
    since = lesson.last_accessed or lesson.created_at
    return max(0.0, (now - since).total_seconds() / SECONDS_PER_DAY)


def reinforcement(access_count: int) -> float:
    """``log2(access_count + 2)``: 1.0 for an unused lesson, growing ever more slowly with use."""
    return math.log2(max(0, access_count) + 2)


def decay_score(lesson: Lesson, now: datetime) -> float:
    """The lesson's relevance at ``now`` (timezone-aware), between 0.0 and 1.0; 1.0 when pinned."""
    if lesson.pinned:
        return 1.0
    score = (
        lesson.importance
        * math.exp(-DECAY_RATE * days_idle(lesson, now))
        * KIND_WEIGHTS[lesson.kind]
        * reinforcement(lesson.access_count)
    )
    return min(1.0, score)


def tier_of(score: float) -> Tier:
    """The tier a score falls in: a score exactly on a floor belongs to the tier above it."""
    for tier, floor in TIER_FLOORS:
        if score >= floor:
            return tier
    return "archive"


def lesson_tier(lesson: Lesson, now: datetime) -> Tier:
    """:func:`tier_of` the lesson's :func:`decay_score` at ``now``."""
    return tier_of(decay_score(lesson, now))
