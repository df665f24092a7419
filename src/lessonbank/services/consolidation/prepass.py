"""The consolidation cycle's deterministic pre-pass: the candidates a cycle may propose, found without
any LLM, in time and memory that stay bounded on a bank of 100k lessons.

A pure function of the lessons, the clock and (optionally) their vectors: no store, no I/O.

Which lessons take part: only the **live active** ones (status ``active``, not superseded, not
expired at ``now``). A pinned lesson is the person's word: never clustered, never archived.

- **Archive**: every unpinned live lesson whose :func:`~.decay.decay_score` is below 0.05 (tier
  ``archive``), with its score. A decayed lesson is proposed for archive, never merged: merging it
  would revive it as a new lesson.
- **Clusters** of near duplicates: connected components (union-find) of the pairs below, within one
  scope only — same namespace, kind and pool (an insight's goal, a rule's agent and stream, a
  procedure's task type) — among the lessons not proposed for archive:

  - **same lesson** (words): the two texts are :func:`~lessonbank.text.same_lesson` — the same content
    words stemmed and in order, the same negations, code spans, identifiers and numbers. Found by
    hashing each text's signature (content stems, literals, negation count), then checking the
    lessons that share one: linear in the bank, exact;
  - **paraphrases** (words): :func:`~.paraphrase.relation` — the IDF-weighted overlap of the two
    texts' stemmed terms (synonyms folded, order ignored) at least :data:`~.paraphrase.PARAPHRASE`,
    no opposition, not siblings. Only lessons sharing one of their :data:`RARE_TERMS` rarest terms
    are compared (blocks of at most :data:`MAX_BLOCK`); a pair that is opposed instead ("always" /
    "never", "use" / "avoid", a negation) is a contradiction candidate, never merged. Figures:
    ``bench/consolidation_pairs.py``;
  - **marked by an embedder**: the lesson names the other in ``metadata["similar_to"]`` with
    ``by="vector:<embedder>"`` (write-time dedup, :mod:`lessonbank.retrieval.dedup`, already
    applied its sibling guard). A mark ``by="words"`` counts only when the texts are the same lesson;
  - **close vectors** (when ``vectors`` are given): cosine ≥ ``cosine`` among each lesson's
    :data:`NEIGHBOURS` nearest of those after it (each pair is computed once), the same polarity, and either the same lesson or worded differently
    (token Jaccard < :data:`~lessonbank.retrieval.dedup.TEMPLATE_JACCARD`).

  **Siblings are not near duplicates.** "Check whitespace *after* keywords" and "... *before*
  keywords" share most of their words (token Jaccard ≥ 0.6) and a word-overlap rule would cluster
  them; the word that differs is the lesson. So a high Jaccard alone never joins two lessons:
  without an embedder only the same lesson retyped is clustered. Measured
  (``bench/consolidation_prepass.py``): on ruff's 950 distinct rule texts a Jaccard ≥ 0.6 rule within
  rare-keyword blocks makes 98 clusters (275 rules), this pre-pass 0 without vectors and 9 (19 rules)
  with MiniLM vectors at 0.92 (4 at 0.94, 0 at 0.96); on GPT-4's 340 reflections (true duplicates:
  those of one problem) it makes 20 clusters without vectors and 42 with MiniLM at 0.92, none
  joining two problems. The threshold with vectors, 0.85 (MiniLM), was chosen on the tuning half of
  ``tests/data/lesson_pairs.jsonl``, precision first: from 0.92 down to 0.85 the labelled paraphrases
  joined double (recall 0.07 → 0.15) at a higher precision (0.85 → 0.92), because the sibling guard
  now also vetoes one template with a slot filled differently (:func:`~.paraphrase.siblings`); below
  0.85 distinct rules join faster than paraphrases (0.80: precision 0.90, 4 distinct pairs merged). The cycle proposes, a person decides: a merge keeps every source, superseded.
- **Contradictions**: pairs named in ``metadata["contradicts"]`` when both are still live (pinned or
  not: a flag writes nothing, the person decides) and their texts show opposition
  (:func:`~.paraphrase.opposed`: "use Edit, not a rewrite" / "use Edit rather than rewriting" is a
  paraphrase), and the opposed pairs the word and vector passes found.
- **Promotions**: tactical rules confirmed at least twice whose first confirmation is 4 weeks old
  or more (:data:`~lessonbank.services.pools.PROMOTE_AFTER_S`): the next confirmation promotes them;
  a cycle may propose it sooner.

Cost: the words pass is one signature per lesson and a dictionary; the vector pass multiplies
blocks of at most :data:`BLOCK_CELLS` similarities (NumPy, float32) into one reused buffer, so beside
its normalized copy of the n × d matrix it holds one block (32 MB), whatever the bank's size; its time
is n² × d / 2 multiply-adds. Measured on 2 cores, one scope (``bench/consolidation_prepass.py``):
10k lessons 0.7 s without vectors, 1.0 s with 384-d vectors; 100k lessons 7 s (77 MB allocated at
the peak) and 36 s (196 MB: the 154 MB matrix copy and a block), the caller's vectors not counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from lessonbank.lessons import passes, stream_of
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.services.consolidation.decay import decay_score, tier_of
from lessonbank.services.consolidation.paraphrase import Relation, Weights, opposed, relation, terms
from lessonbank.services.pools import PROMOTE_AFTER_S
from lessonbank.text import STOPWORDS, literals, negations, same_lesson, stem, words

if TYPE_CHECKING:
    import numpy as np

# The default of ``find_candidates`` (LESSONBANK_CONSOLIDATION_COSINE). 0.85 merges twice the labelled
# paraphrases of bench/consolidation_pairs.py, but in a whole cycle over ~1,160 lessons of dense rule
# summaries (bench/consolidation_bank.py) it lost 22-24 distinct lessons against 6-8 at 0.92: a merge
# that loses a distinct lesson costs more than a duplicate left, so the stricter one is the default.
COSINE = 0.92
NEIGHBOURS = 5  # nearest neighbours of each lesson compared by vector
BLOCK_CELLS = 8_000_000  # similarities computed at once: 32 MB of float32
RARE_TERMS = 4  # each lesson is compared by words with the lessons sharing one of its rarest terms
MAX_BLOCK = 200  # a term shared by more lessons than this is too common to pair lessons by

Pair = tuple[str, str]


@dataclass
class Candidates:
    """What the pre-pass found, for the deterministic operations and the LLM phases.

    ``clusters``: lesson ids of near duplicates (each sorted, two or more); ``contradictions``:
    pairs of ids (sorted); ``archive``: (id, decay score below 0.05); ``promotions``: tactical rules
    due. ``counts``: ``lessons`` given, ``live`` taking part, and the near-duplicate pairs found
    by ``marks``, ``words`` and ``vectors``.
    """

    clusters: list[list[str]] = field(default_factory=list)
    contradictions: list[Pair] = field(default_factory=list)
    archive: list[tuple[str, float]] = field(default_factory=list)
    promotions: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.clusters or self.contradictions or self.archive or self.promotions)


def is_live(lesson: Lesson, now: datetime) -> bool:
    """Active, not superseded, not expired at ``now``: what recall sees (:func:`lessonbank.lessons.passes`)."""
    return passes(lesson, LessonQuery(lesson.namespace), now.timestamp())


def scope_key(lesson: Lesson) -> tuple[str, ...]:
    """The scope two lessons must share to be merged: namespace, kind and the lesson's pool."""
    if lesson.kind == "insight":
        pool = lesson.goal_id or ""
    elif lesson.kind == "principle":
        pool = f"{lesson.agent or ''}\x1f{stream_of(lesson)}"
    elif lesson.kind == "procedure":
        pool = lesson.task_type or ""
    else:
        pool = ""
    return (lesson.namespace, lesson.kind, pool)


def find_candidates(
    lessons: Sequence[Lesson],
    now: datetime,
    *,
    vectors: Mapping[str, np.ndarray] | None = None,
    cosine: float = COSINE,
) -> Candidates:
    """The candidates of one namespace's lessons at ``now`` (see the module docstring)."""
    live = {lesson.id: lesson for lesson in lessons if is_live(lesson, now)}
    archive: list[tuple[str, float]] = []
    for lesson in live.values():
        if lesson.pinned:
            continue
        score = decay_score(lesson, now)
        if tier_of(score) == "archive":
            archive.append((lesson.id, round(score, 4)))
    decayed = {lesson_id for lesson_id, _ in archive}
    mergeable = [lesson for lesson in live.values() if not lesson.pinned and lesson.id not in decayed]
    by_id = {lesson.id: lesson for lesson in mergeable}

    groups: dict[tuple[str, ...], list[Lesson]] = defaultdict(list)
    for lesson in mergeable:
        groups[scope_key(lesson)].append(lesson)

    weights = {key: Weights.of(lesson.content for lesson in group) for key, group in groups.items()}
    opposed_pairs: set[Pair] = set()
    marked = set(_marked_pairs(by_id, weights, opposed_pairs))
    same = set(_same_lesson_pairs(groups.values()))
    worded: set[Pair] = set()
    for key, group in groups.items():
        for found, kind in _lexical_pairs(group, weights[key]):
            (worded if kind == "paraphrase" else opposed_pairs).add(found)
    worded -= same
    close: set[Pair] = set()
    if vectors:
        for key, group in groups.items():
            for found, kind in _vector_pairs(group, vectors, cosine, weights[key]):
                (close if kind == "paraphrase" else opposed_pairs).add(found)
    parents = _UnionFind()
    for a, b in (marked | same | worded | close) - opposed_pairs:
        parents.union(a, b)
    clusters = sorted(sorted(members) for members in parents.groups() if len(members) > 1)
    contradictions = _contradictions(live, weights, marked)
    found_by_words = opposed_pairs - set(contradictions)

    return Candidates(
        clusters=clusters,
        contradictions=sorted(set(contradictions) | opposed_pairs),
        archive=sorted(archive),
        promotions=sorted(_promotions(live.values(), now)),
        counts={
            "lessons": len(lessons),
            "live": len(live),
            "marks": len(marked),
            "words": len(same),
            "paraphrases": len(worded),
            "vectors": len(close),
            "opposed": len(found_by_words),
        },
    )


def _pair(a: str, b: str) -> Pair:
    return (a, b) if a < b else (b, a)


def _marked_pairs(
    by_id: Mapping[str, Lesson], weights: Mapping[tuple[str, ...], Weights], opposed_pairs: set[Pair]
) -> Iterator[Pair]:
    """``similar_to`` marks between two mergeable lessons of one scope: an embedder's unless the two
    texts are opposed (then a contradiction candidate) or siblings; a word-overlap mark when the
    texts are a paraphrase (:func:`~.paraphrase.relation`)."""
    for lesson in by_id.values():
        for mark in _marks(lesson, "similar_to"):
            other = by_id.get(str(mark.get("id")))
            if other is None or other.id == lesson.id or scope_key(other) != scope_key(lesson):
                continue
            found = relation(
                lesson.content,
                other.content,
                weights[scope_key(lesson)],
                cosine=1.0 if str(mark.get("by", "")).startswith("vector:") else None,
                min_cosine=0.0,
            )
            if same_lesson(lesson.content, other.content) or found == "paraphrase":
                yield _pair(lesson.id, other.id)
            elif found == "contradiction":
                opposed_pairs.add(_pair(lesson.id, other.id))


def _marks(lesson: Lesson, key: str) -> list[dict[str, object]]:
    marks = lesson.metadata.get(key)
    return [mark for mark in marks if isinstance(mark, dict)] if isinstance(marks, list) else []


def signature(text: str) -> tuple[tuple[str, ...], frozenset[str], int]:
    """What two texts that are :func:`~lessonbank.text.same_lesson` always share: their content
    words stemmed, in order of first use; their literals; their count of negations."""
    stems = tuple(dict.fromkeys(stem(word) for word in words(text) if word not in STOPWORDS))
    return stems, literals(text), negations(text)


def _same_lesson_pairs(groups: Iterable[list[Lesson]]) -> Iterator[Pair]:
    """Pairs of one scope whose texts are the same lesson: lessons sharing a signature are checked
    against the first of each class found so far (same_lesson is an equivalence)."""
    for group in groups:
        buckets: dict[tuple[tuple[str, ...], frozenset[str], int], list[Lesson]] = defaultdict(list)
        for lesson in group:
            buckets[signature(lesson.content)].append(lesson)
        for bucket in buckets.values():
            heads: list[Lesson] = []
            for lesson in bucket:
                head = next((h for h in heads if same_lesson(h.content, lesson.content)), None)
                if head is None:
                    heads.append(lesson)
                else:
                    yield _pair(head.id, lesson.id)


def _lexical_pairs(group: Sequence[Lesson], weights: Weights) -> Iterator[tuple[Pair, Relation]]:
    """Pairs of one scope that are paraphrases or contradiction candidates by their words. Only
    lessons sharing one of their :data:`RARE_TERMS` rarest terms are compared, in blocks of at most
    :data:`MAX_BLOCK` lessons (a term more common than that tells nothing): linear in the bank."""
    blocks: dict[str, list[Lesson]] = defaultdict(list)
    for lesson in group:
        found = sorted(terms(lesson.content), key=lambda t: (weights.frequency[t], t))
        for term in found[:RARE_TERMS]:
            blocks[term].append(lesson)
    seen: set[Pair] = set()
    for block in blocks.values():
        if len(block) < 2 or len(block) > MAX_BLOCK:
            continue
        for i, a in enumerate(block):
            for b in block[i + 1 :]:
                key = _pair(a.id, b.id)
                if key in seen:
                    continue
                seen.add(key)
                found_relation = relation(a.content, b.content, weights)
                if found_relation is not None:
                    yield key, found_relation


def _vector_pairs(
    group: Sequence[Lesson], vectors: Mapping[str, np.ndarray], cosine: float, weights: Weights
) -> Iterator[tuple[Pair, Relation]]:
    """Pairs of one scope at cosine ≥ ``cosine`` among each lesson's nearest neighbours that pass
    the sibling guard. The similarities are computed a block of rows at a time."""
    import numpy as np  # only with vectors: an embedder brings NumPy, the base install does not

    members = [lesson for lesson in group if lesson.id in vectors]
    if len(members) < 2:
        return
    matrix = np.stack([np.asarray(vectors[lesson.id], dtype=np.float32) for lesson in members])
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))[:, None]  # no n × d temporary
    matrix /= np.where(norms > 0, norms, 1.0)
    n = len(members)
    rows = max(1, BLOCK_CELLS // n)
    buffer = np.empty(rows * n, dtype=np.float32)  # one block's similarities, reused by every block
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        # Each pair once: the rows of the block against the lessons from the block's first on (half
        # the products of a full square), the block's own lower triangle and diagonal masked.
        sims = buffer[: (stop - start) * (n - start)].reshape(stop - start, n - start)
        np.matmul(matrix[start:stop], matrix[start:].T, out=sims)
        sims[np.tril_indices(stop - start)] = -1.0
        for row in np.flatnonzero(sims.max(axis=1) >= cosine):  # most rows have no hit
            cols = np.flatnonzero(sims[row] >= cosine)
            if len(cols) > NEIGHBOURS:
                cols = cols[np.argsort(-sims[row, cols])[:NEIGHBOURS]]
            a = members[start + int(row)]
            for col in cols:
                b = members[start + int(col)]
                found = relation(
                    a.content, b.content, weights, cosine=float(sims[row, col]), min_cosine=cosine
                )
                if same_lesson(a.content, b.content):
                    yield _pair(a.id, b.id), "paraphrase"
                elif found is not None:
                    yield _pair(a.id, b.id), found


def _contradictions(
    live: Mapping[str, Lesson], weights: Mapping[tuple[str, ...], Weights], merged: set[Pair]
) -> list[Pair]:
    """Pairs named in ``metadata["contradicts"]``, both live, whose texts show opposition
    (:func:`~.paraphrase.opposed`); a mark between a paraphrase's two texts is not a contradiction."""
    found = set()
    for lesson in live.values():
        for mark in _marks(lesson, "contradicts"):
            other = live.get(str(mark.get("id")))
            if other is None or other.id == lesson.id:
                continue
            pair = _pair(lesson.id, other.id)
            if pair not in merged and opposed(lesson.content, other.content):
                found.add(pair)
    return sorted(found)


def _promotions(lessons: Iterable[Lesson], now: datetime) -> Iterator[str]:
    for lesson in lessons:
        if lesson.kind != "principle" or stream_of(lesson) != "tactical":
            continue
        meta = lesson.metadata
        first = float(meta.get("first_confirmed", lesson.created_at.timestamp()))
        if int(meta.get("confirmations", 1)) >= 2 and now.timestamp() - first >= PROMOTE_AFTER_S:
            yield lesson.id


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, item: str) -> str:
        root = self.parent.setdefault(item, item)
        while root != self.parent[root]:
            root = self.parent[root]
        while item != root:  # path compression
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a: str, b: str) -> None:
        root_a, root_b = self.find(a), self.find(b)
        if root_a != root_b:
            self.parent[max(root_a, root_b)] = min(root_a, root_b)

    def groups(self) -> list[list[str]]:
        found: dict[str, list[str]] = defaultdict(list)
        for item in self.parent:
            found[self.find(item)].append(item)
        return list(found.values())
