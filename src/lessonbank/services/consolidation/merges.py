"""Merges that lose nothing. Pure functions of the operations, the lessons and a clock: no I/O.

- **Scope**: a merged lesson serves everything its sources served
  (:func:`~lessonbank.services.consolidation.operations.union_scope`).
- **Wording**: the pre-pass finds the near duplicates and proposes the text of the best one; the
  LLM phase refines. A model's MERGE over lessons a pre-pass MERGE joins takes that merge's place
  (:func:`prefer_model_wording`), over the sources of both, when it passes validation and the
  screens (its lesson not quarantined); else the pre-pass merge stays and the model's is dropped by
  validation as a conflict.
- **Counters**: uses, helpful and harmful are the sums of the sources' as they are when the merge is
  applied (:func:`summed_counters`), the latest use the latest of theirs.
- **Provenance**: ``metadata["merged_from"]`` lists the sources, best first.
- **Guards**: a model's MERGE (of a pair the pre-pass offered to confirm, or any other) is refused
  when two of its sources, with those of the pre-pass clusters it touches, fail the guards the
  pre-pass uses (:func:`guarded_merges`): opposed, siblings, naming different things. The model's
  word does not outweigh them; the refused merge is shown with why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from lessonbank.models import Lesson
from lessonbank.proposals import Operation
from lessonbank.services.consolidation.offers import refusal
from lessonbank.services.consolidation.operations import merged_lesson, validate
from lessonbank.services.consolidation.paraphrase import Weights
from lessonbank.services.consolidation.prepass import is_live, scope_key
from lessonbank.services.consolidation.screens import screened_operation


def summed_counters(sources: Sequence[Lesson]) -> dict[str, Any]:
    """The counters of a lesson merged from ``sources``: uses, helpful, harmful summed; latest use."""
    used = [lesson.last_accessed for lesson in sources if lesson.last_accessed is not None]
    return {
        "access_count": sum(lesson.access_count for lesson in sources),
        "helpful": sum(lesson.helpful for lesson in sources),
        "harmful": sum(lesson.harmful for lesson in sources),
        "last_accessed": max(used) if used else None,
    }


def prefer_model_wording(
    deterministic: Sequence[Operation],
    model: Sequence[Operation],
    lessons_by_id: Mapping[str, Lesson],
    now: datetime,
) -> list[Operation]:
    """``deterministic`` then ``model``, each model merge that shares a source with pre-pass merges
    put in their place (see the module docstring) when it passes validation and the screens."""
    pending = [op for op in deterministic if op.kind == "merge"]
    replacing: dict[str, Operation] = {}  # a pre-pass merge's id -> the model's merge in its place
    rest: list[Operation] = []
    for op in model:
        overlapping = [
            m
            for m in pending
            if m.id not in replacing and op.kind == "merge" and set(m.lesson_ids) & set(op.lesson_ids)
        ]
        worded = _worded(op, overlapping, lessons_by_id, now) if overlapping and op.lesson else None
        if worded is None:
            rest.append(op)
            continue
        for m in overlapping:
            replacing[m.id] = worded
    placed: set[str] = set()
    result: list[Operation] = []
    for op in deterministic:
        worded = replacing.get(op.id)
        if worded is None:
            result.append(op)
        elif worded.id not in placed:
            placed.add(worded.id)
            result.append(worded)
    return result + rest


def _worded(
    op: Operation, overlapping: Sequence[Operation], lessons_by_id: Mapping[str, Lesson], now: datetime
) -> Operation | None:
    """The model's merge ``op`` over its sources and those of ``overlapping``; None when it fails
    validation or reads as instructions."""
    assert op.lesson is not None
    ids = list(dict.fromkeys([*op.lesson_ids, *(i for m in overlapping for i in m.lesson_ids)]))
    if any(i not in lessons_by_id for i in ids):
        return None
    lesson = merged_lesson([lessons_by_id[i] for i in ids], now).model_copy(
        update={"content": op.lesson.content}
    )
    found = ", ".join(i for m in overlapping for i in m.lesson_ids)
    reason = "; ".join(
        part for part in (op.reason, f"the model's wording of the near duplicates {found}") if part
    )
    candidate = screened_operation(
        op.model_copy(
            update={"lesson_ids": lesson.metadata["merged_from"], "lesson": lesson, "reason": reason}
        )
    )
    if candidate.lesson is None or candidate.lesson.status == "quarantined":
        return None
    kept, _ = validate([candidate], lessons_by_id, now=now)
    return candidate if kept else None


def guarded_merges(
    model: Sequence[Operation],
    lessons_by_id: Mapping[str, Lesson],
    clusters: Sequence[Sequence[str]],
    now: datetime,
) -> tuple[list[Operation], list[Operation]]:
    """(kept, refused): the model's operations, each MERGE whose sources (with the members of the
    pre-pass clusters it shares one with, which it would join) fail the guards refused, dropped with
    the reason. Other operations and merges naming unknown lessons are left to validation."""
    weights: dict[tuple[str, ...], Weights] = {}

    def weights_of(lesson: Lesson) -> Weights:
        key = scope_key(lesson)
        if key not in weights:
            scope = [x.content for x in lessons_by_id.values() if scope_key(x) == key and is_live(x, now)]
            weights[key] = Weights.of(scope or [lesson.content])
        return weights[key]

    kept: list[Operation] = []
    refused: list[Operation] = []
    for op in model:
        ids = list(op.lesson_ids)
        if op.kind != "merge" or any(i not in lessons_by_id for i in ids):
            kept.append(op)
            continue
        ids += [i for cluster in clusters if set(cluster) & set(op.lesson_ids) for i in cluster]
        sources = [lessons_by_id[i] for i in dict.fromkeys(ids) if i in lessons_by_id]
        why = refusal(sources, clusters, weights_of)
        if why is None:
            kept.append(op)
        else:
            refused.append(op.model_copy(update={"status": "dropped", "note": why}))
    return kept, refused
