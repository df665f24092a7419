"""Dedup on write with vectors: mark a likely duplicate or contradiction for review.

The store folds exact repeats (content hash) and the same lesson retyped (token Jaccard and
:func:`~lessonbank.text.same_lesson`). Vectors find the rest: the same advice in other words. That is
a judgement, so it is never applied here: the new lesson is added and names the stored one in
``metadata["similar_to"]``, a candidate pair for the consolidation cycle's proposal to a person.
For each new lesson, the closest live lessons of the same namespace and kind are compared:

- cosine ≥ ``threshold`` (``Settings.dedup_cosine``, measured in bench/dedup.py), the same
  polarity, and worded differently (token Jaccard < ``TEMPLATE_JACCARD``) → the new lesson is
  likely the same advice in other words: marked ``similar_to`` the stored one. Two texts that share most of
  their words yet are not word-for-word repeats (those the store folds itself) are siblings — "check
  whitespace *after* keywords" and "... *before* keywords", ``os.path.getctime`` and ``getmtime`` —
  whose few different words are the point; embeddings put them at cosine 0.92–0.99, so they are kept;
- cosine ≥ ``threshold`` but one says "do X" and the other "do not X" → a likely contradiction:
  the new lesson is added and names the stored one in ``metadata["contradicts"]``, for the
  consolidation cycle to FLAG to a person. Negation cues are a crude signal: on ruff's rule texts
  every such verdict joined two distinct rules ("negated ``==``" / "negated ``!=``"), so it hides
  nothing by itself;
- a seed-004 lesson about the same situation (situation cosine ≥ ``SITUATION_COSINE``) whose
  correction says something else (correction cosine < ``CORRECTION_AGREES``, or the opposite
  polarity) → the new lesson supersedes it (seed 004: the environment changed and the old
  correction no longer holds; the old one is kept, marked ``superseded_by``, no longer recalled);
- a seed-004 lesson about the same situation whose correction says the same thing (correction
  cosine ≥ ``threshold``, same polarity) → a likely duplicate (marked), even when the two share most of their words:
  the situation and correction fields are compared one by one, so the sibling guard is not needed.

Nothing is ever deleted here; a superseded lesson can be inspected and restored.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from lessonbank.lessons import similar_to
from lessonbank.models import Lesson
from lessonbank.text import jaccard, negations, words

if TYPE_CHECKING:
    from lessonbank.retrieval.hybrid import Retriever

log = logging.getLogger("lessonbank.retrieval")

Verdict = Literal["duplicate", "contradicts", "supersede"]

NEIGHBOURS = 3
TEMPLATE_JACCARD = 0.6
RELATED_COSINE = 0.5  # below this the neighbours are not about the same thing at all
SITUATION_COSINE = 0.9
CORRECTION_AGREES = 0.75


def same_polarity(a: str, b: str) -> bool:
    """False when one text negates and the other does not: "use X" vs "never use X"."""
    return (negations(a) > 0) == (negations(b) > 0)


def verdict_for(new: str, old: str, cosine: float, threshold: float) -> Verdict | None:
    """What a new lesson is to a stored one of the same kind, from their texts and cosine."""
    if cosine < threshold:
        return None
    if not same_polarity(new, old):
        return "contradicts"
    if jaccard(words(new), words(old)) >= TEMPLATE_JACCARD:
        return None  # siblings from one template: the words that differ are the lesson
    return "duplicate"


def place_by_vector(retriever: Retriever, lessons: Sequence[Lesson], threshold: float) -> list[Lesson]:
    """The lessons to write, each marked ``similar_to`` a likely duplicate or ``contradicts`` a likely
    contradiction, or set to supersede a seed-004 lesson whose correction changed, where one is found
    (a likeness found by vectors is never merged at write time). A failure to embed leaves the lesson as it was (the store's own checks still run).
    """
    placed: list[Lesson] = []
    for lesson in lessons:
        try:
            placed.append(_place(retriever, lesson, threshold))
        except Exception as exc:
            log.warning("vector dedup skipped for a %s lesson (%s: %s)", lesson.kind, type(exc).__name__, exc)
            placed.append(lesson)
    return placed


def _place(retriever: Retriever, lesson: Lesson, threshold: float) -> Lesson:
    near = [(c, cosine) for c, cosine in retriever.nearest(lesson, NEIGHBOURS) if cosine >= RELATED_COSINE]
    if not near:
        return lesson
    stored = {old.id: old for old in retriever.store.get_lessons([c.lesson_id for c, _ in near])}
    for candidate, cosine in near:
        old = stored.get(candidate.lesson_id)
        if old is None or old.pinned:
            continue  # a pinned lesson is the human's word: never superseded automatically
        # Seed-004 fields, when both lessons have them, say more than the whole texts do.
        verdict = _compare_fields(retriever, lesson, old, threshold)
        if verdict is None:
            verdict = verdict_for(lesson.content, old.content, cosine, threshold)
        by = f"vector:{retriever.embedder.name if retriever.embedder else '?'}"
        if verdict in ("duplicate", "contradicts"):
            # The embedder's judgement: a candidate for the consolidation cycle's proposal, never
            # applied here (the store still folds a lesson that is the same word for word).
            key = "similar_to" if verdict == "duplicate" else "contradicts"
            return similar_to(lesson, old.id, cosine, by, key=key)
        if verdict == "supersede":
            return lesson.model_copy(update={"supersedes": old.id})
    return lesson


def _compare_fields(retriever: Retriever, new: Lesson, old: Lesson, threshold: float) -> Verdict | None:
    """Seed-004 lessons (the others have no such fields) about the same situation: the same
    correction is a duplicate, another correction supersedes."""
    if not (new.situation and old.situation and new.correction and old.correction):
        return None
    vectors = retriever.embed_texts([new.situation, old.situation, new.correction, old.correction])
    if float(vectors[0] @ vectors[1]) < SITUATION_COSINE:
        return None
    correction = float(vectors[2] @ vectors[3])
    if correction < CORRECTION_AGREES or not same_polarity(new.correction, old.correction):
        return "supersede"
    if correction >= threshold:
        return "duplicate"
    return None
