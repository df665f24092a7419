"""The consolidation cycle's deterministic pre-pass: the candidates a cycle may propose, found without
any LLM, in time and memory that stay bounded on a bank of 100k lessons.

A pure function of the lessons, the clock and (optionally) their vectors: no store, no I/O.

Which lessons take part: only the **live active** ones (status ``active``, not superseded, not
expired at ``now``). A pinned lesson is the person's word: never clustered, never archived.

- **Archive**: every unpinned live lesson whose :func:`~.decay.decay_score` is below 0.05 (tier
  ``archive``), with its score. A decayed lesson is proposed for archive, never merged: merging it
  would revive it as a new lesson.
- **Clusters** of near duplicates, within one scope only — same namespace, kind and pool (an
  insight's goal, a rule's agent and stream, a procedure's task type) — among the lessons not
  proposed for archive. Two lessons are **joined** when:

  - **same lesson** (words): the two texts are :func:`~lessonbank.text.same_lesson` — the same content
    words stemmed and in order, the same negations, code spans, identifiers and numbers. Found by
    hashing each text's signature (content stems, literals, negation count), then checking the
    lessons that share one: linear in the bank, exact;
  - **marked by an embedder**: the lesson names the other in ``metadata["similar_to"]`` with
    ``by="vector:<embedder>"`` (write-time dedup, :mod:`lessonbank.retrieval.dedup`) and the guards
    below let the pair through. A mark ``by="words"`` counts only when the texts are the same lesson
    or paraphrases by :data:`~.paraphrase.PARAPHRASE`;
  - **scored** (:mod:`.scorer`): a candidate pair that the guards of :func:`~.paraphrase.relation`
    let through (not opposed, not siblings, not naming different things) and whose probability of
    being one lesson is at least the model's ``join`` — the lexical model without vectors, the one
    with the cosine when ``vectors`` are given (or a cosine at least ``cosine`` and a probability at
    least ``member``). Candidates: lessons sharing one of their :data:`RARE_TERMS` rarest terms
    (blocks of at most :data:`MAX_BLOCK`), and with vectors each lesson's :data:`NEIGHBOURS` nearest
    of those after it from cosine :data:`CANDIDATE_COSINE` (each pair computed once). A pair that is
    opposed instead ("always" / "never", "use" / "avoid", a negation) is a contradiction candidate,
    never merged. A pair one of whose lessons has a **rival** — another partner within
    :data:`RIVAL_MARGIN` of the pair's probability that is not one lesson with the pair's other side (a
    one-line message as close to a sibling rule's summary as to its own explanation) — is ambiguous and
    not joined (on both halves of ``bench/consolidation_pairs.py`` the words pass's bank precision rose
    from 0.74-0.77 to 0.84-0.85).

  Joined pairs become clusters from the most likely down, by **complete linkage**: two clusters
  become one only if every pair across them passes the guards and is joined or at least ``member``
  likely, so a chain A ~ B ~ C never puts A with a C that is another lesson (union-find did).

  **Siblings are not near duplicates.** "Check whitespace *after* keywords" and "... *before*
  keywords" share most of their words and a word-overlap rule would cluster them; the word that
  differs is the lesson (:func:`~.paraphrase.siblings`: opposite places, two words swapped, a
  qualifier added, one template's slot, negations on different words, different names); nor are two
  lessons of two sentences that share one and differ in the other, one situation with two corrections
  (:func:`~.paraphrase.sentences_apart`: on 10k remixed reflections the words pass had proposed 1,387
  clusters, 755 joining lessons of other problems). Figures, tuned half and held-out half: ``bench/consolidation_pairs.py`` (labelled pairs) and
  ``bench/consolidation_bank.py`` (a whole cycle on ~1,160 lessons). The cycle proposes, a person
  decides: a merge keeps every source, superseded.
- **Contradictions**: pairs named in ``metadata["contradicts"]`` when both are still live (pinned or
  not: a flag writes nothing, the person decides) and their texts show opposition
  (:func:`~.paraphrase.opposed`: "use Edit, not a rewrite" / "use Edit rather than rewriting" is a
  paraphrase), and the opposed pairs the word and vector passes found.
- **Promotions**: tactical rules confirmed at least twice whose first confirmation is 4 weeks old
  or more (:data:`~lessonbank.services.pools.PROMOTE_AFTER_S`): the next confirmation promotes them;
  a cycle may propose it sooner.

Cost: the words pass is one signature per lesson and a dictionary, then the weighted Dice of the
pairs in rare-term blocks, one matrix product per block (:class:`.pairtable.TermTable`); only each
lesson's :data:`NEIGHBOURS` likeliest partners from :data:`LIKENESS_FLOOR` on are scored, all at once
with NumPy, and only those whose probability may reach ``member`` get their guards and word-order
alignment (Python, a fraction of a millisecond a pair); a cluster holds at most :data:`MAX_CLUSTER`
texts, so both grow linearly. Without NumPy the pairs are scored one by one. The vector pass multiplies
blocks of at most :data:`BLOCK_CELLS` similarities (NumPy, float32) into one reused buffer (32 MB beside
its normalized copy of the n × d matrix); its time is n² × d / 2 multiply-adds. Measured on 2 cores
shared with other work, one scope of the redundant ``_corpus`` text (the worst case: most lessons share
a sentence with about twenty others, so nearly every candidate needs its guards): 10k lessons by words in
13-16 s of CPU and 54 MB at most, against 38-40 s and 324 MB before the pairs were scored at once, run
side by side under the same load (``bench/consolidation_prepass.py`` gives wall and CPU seconds).
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from lessonbank.lessons import passes, stream_of
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.services.consolidation import scorer
from lessonbank.services.consolidation.decay import decay_score, tier_of
from lessonbank.services.consolidation.offers import FLOOR, PER_LESSON, Offer, offered
from lessonbank.services.consolidation.paraphrase import (
    Relation,
    Weights,
    one_sentence,
    opposed,
    relation,
    same_text,
    terms,
)
from lessonbank.services.pools import PROMOTE_AFTER_S
from lessonbank.text import STOPWORDS, literals, negations, same_lesson, stem, words

if TYPE_CHECKING:
    import numpy as np

    from lessonbank.services.consolidation.pairtable import TermTable


# The default of ``find_candidates`` (LESSONBANK_CONSOLIDATION_COSINE): from this cosine a pair the
# guards let through is joined once the scorer gives it at least ``member`` (below, the scorer's
# ``join`` decides). A close cosine alone lost distinct lessons in a whole cycle (bench/consolidation_bank.py).
COSINE = 0.92
NEIGHBOURS = 10  # nearest neighbours of each lesson scored by vector
# Below this weighted Dice no pair of the tuning half scored 0.3 (bench/consolidation_fit.py): not scored,
# which keeps the words pass near its old cost on 10k lessons.
LIKENESS_FLOOR = 0.2
CANDIDATE_COSINE = 0.5  # below this two lessons' vectors are not about one thing: never scored
BLOCK_CELLS = 8_000_000  # similarities computed at once: 32 MB of float32
MAX_CLUSTER = 12  # distinct texts (retypes not counted) a cluster may hold
RARE_TERMS = 6  # each lesson is compared by words with the lessons sharing one of its rarest terms (4 missed
# partners on the tuning half: recall 0.229 against 0.301 from 6 on, bench/consolidation_pairs.py)
MAX_BLOCK = 200  # a term shared by more lessons than this is too common to pair lessons by
# A scored pair is not joined when either lesson has another partner this close in probability that is not
# one lesson with the pair's other side (``_Pairs.contested``). Chosen on the tuning half's bank
# (bench/consolidation_bank.py).
RIVAL_MARGIN = 0.4

Pair = tuple[str, str]


@dataclass
class Candidates:
    """What the pre-pass found, for the deterministic operations and the LLM phases.

    ``clusters``: lesson ids of near duplicates (each sorted, two or more); ``contradictions``:
    pairs of ids (sorted); ``archive``: (id, decay score below 0.05); ``promotions``: tactical rules
    due. ``counts``: ``lessons`` given, ``live`` taking part, and the near-duplicate pairs found
    by ``marks``, ``words`` and ``vectors``, and the pairs ``offered``. ``offers``: the pairs not
    joined that the LLM phase may confirm, likeliest first.
    """

    clusters: list[list[str]] = field(default_factory=list)
    contradictions: list[Pair] = field(default_factory=list)
    archive: list[tuple[str, float]] = field(default_factory=list)
    promotions: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    offers: list[Offer] = field(default_factory=list)  # pairs for the LLM phase to confirm (:mod:`.offers`)

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
    offers_per_lesson: int = PER_LESSON,
    offer_floor: float = FLOOR,
) -> Candidates:
    """The candidates of one namespace's lessons at ``now`` (see the module docstring); each lesson
    offers its ``offers_per_lesson`` likeliest unjoined pairs from ``offer_floor`` (:mod:`.offers`)."""
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
    trusted = marked | same
    clusters: list[list[str]] = []
    offers: list[Offer] = []
    found_counts = {"paraphrases": 0, "vectors": 0}
    for key, group in groups.items():
        pairs = _Pairs(group, weights[key], vectors)
        lexical = pairs.lexical()
        near = []
        if vectors:
            near = [
                (found, close)
                for found, close in _vector_pairs(group, vectors, min(cosine, CANDIDATE_COSINE))
                if found not in trusted
            ]
        pairs.score_many([*lexical, *(found for found, _ in near)])  # every rival known before a join
        for found in lexical:
            kind = pairs.relations.get(found)
            if kind == "contradiction":
                opposed_pairs.add(found)
            elif kind == "paraphrase" and found not in trusted:
                pairs.candidate(found, "paraphrases")
        for found, close in near:
            pairs.candidate(found, "vectors", forced=close >= cosine)
        joined = pairs.clusters(trusted, same, opposed_pairs)
        clusters += joined
        offers += offered(pairs, joined, opposed_pairs, per_lesson=offers_per_lesson, floor=offer_floor)
        for source, count in pairs.joined.items():
            found_counts[source] += count
    clusters = sorted(sorted(members) for members in clusters)
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
            "paraphrases": found_counts["paraphrases"],
            "vectors": found_counts["vectors"],
            "opposed": len(found_by_words),
            "offered": len(offers),
        },
        offers=sorted(offers, key=lambda o: (-o.probability, o.a, o.b)),
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


def _vector_pairs(
    group: Sequence[Lesson], vectors: Mapping[str, np.ndarray], floor: float
) -> Iterator[tuple[Pair, float]]:
    """Pairs of one scope at cosine ≥ ``floor`` among each lesson's :data:`NEIGHBOURS` nearest, with
    their cosine. The similarities are computed a block of rows at a time."""
    import numpy as np  # only with vectors: an embedder brings NumPy, the base install does not

    members = [lesson for lesson in group if lesson.id in vectors]
    if len(members) < 2:
        return
    matrix = _normalized(members, vectors)
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
        for row in np.flatnonzero(sims.max(axis=1) >= floor):  # most rows have no hit
            cols = np.flatnonzero(sims[row] >= floor)
            if len(cols) > NEIGHBOURS:
                cols = cols[np.argsort(-sims[row, cols])[:NEIGHBOURS]]
            a = members[start + int(row)]
            for col in cols:
                yield _pair(a.id, members[start + int(col)].id), float(sims[row, col])


def _normalized(members: Sequence[Lesson], vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    import numpy as np

    matrix = np.stack([np.asarray(vectors[lesson.id], dtype=np.float32) for lesson in members])
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))[:, None]  # no n × d temporary
    matrix /= np.where(norms > 0, norms, 1.0)
    return matrix


class _Pairs:
    """The candidate pairs of one scope, scored (:mod:`.scorer`), and their clusters.

    A candidate the guards of :func:`~.paraphrase.relation` let through is **joined** when its
    probability is at least the model's ``join`` (or its cosine is at least the caller's threshold and
    its probability at least ``member``). Clusters grow from the most likely pair down, and two
    clusters become one only if **every** pair across them passes the guards and is trusted (the same
    lesson, an embedder's mark) or at least ``member`` likely: a chain A ~ B ~ C never joins A and C
    when A and C are two lessons (complete linkage)."""

    def __init__(
        self, group: Sequence[Lesson], weights: Weights, vectors: Mapping[str, np.ndarray] | None
    ) -> None:
        self.text = {lesson.id: lesson.content for lesson in group}
        self.ids = [lesson.id for lesson in group]
        self.index = {lesson_id: n for n, lesson_id in enumerate(self.ids)}
        self.weights = weights
        self.table: TermTable | None = None
        try:  # NumPy scores every pair at once; a base install without it scores them one by one
            from lessonbank.services.consolidation.pairtable import TermTable

            self.table = TermTable([lesson.content for lesson in group], weights)
        except ImportError:
            pass
        self.model = scorer.VECTOR if vectors else scorer.LEXICAL
        self.row: dict[str, int] = {}
        self.matrix: np.ndarray | None = None
        if vectors:
            members = [lesson for lesson in group if lesson.id in vectors]
            if members:
                self.matrix = _normalized(members, vectors)
                self.row = {lesson.id: n for n, lesson in enumerate(members)}
        self.scores: dict[Pair, float] = {}
        self.bounds: dict[Pair, float] = {}  # each scored pair's probability before word order counts
        self.relations: dict[Pair, Relation | None] = {}
        self.edges: dict[Pair, float] = {}
        self.joined: Counter[str] = Counter()
        self._partners: dict[str, list[tuple[str, float]]] | None = None

    def lexical(self) -> list[Pair]:
        """The candidate pairs by words: each lesson's :data:`NEIGHBOURS` likeliest partners (weighted
        Dice from :data:`LIKENESS_FLOOR`) among the lessons sharing one of its :data:`RARE_TERMS` rarest
        terms in blocks of at most :data:`MAX_BLOCK` (a term more common than that tells nothing)."""
        if self.table is not None:
            found = self.table.likely_pairs(RARE_TERMS, MAX_BLOCK, LIKENESS_FLOOR, NEIGHBOURS)
            return [_pair(self.ids[i], self.ids[j]) for i, j in found.tolist()]
        blocks: dict[str, list[str]] = defaultdict(list)
        for lesson_id, text in self.text.items():
            for term in sorted(terms(text), key=lambda t: (self.weights.frequency[t], t))[:RARE_TERMS]:
                blocks[term].append(lesson_id)
        seen: set[Pair] = set()
        nearest: dict[str, list[tuple[float, Pair]]] = defaultdict(list)
        for block in blocks.values():
            if 2 <= len(block) <= MAX_BLOCK:
                for i, a in enumerate(block):
                    for b in block[i + 1 :]:
                        if (key := _pair(a, b)) not in seen:
                            seen.add(key)
                            likeness = self.weights.likeness(self.text[a], self.text[b])
                            if likeness >= LIKENESS_FLOOR:
                                nearest[a].append((likeness, key))
                                nearest[b].append((likeness, key))
        return sorted({key for found in nearest.values() for _, key in heapq.nlargest(NEIGHBOURS, found)})

    def score_many(self, found: Sequence[Pair]) -> None:
        """Scores the pairs not scored yet, all at once (:class:`.pairtable.TermTable`). A pair whose
        probability cannot reach ``member`` even before its word order is aligned is 0 without its
        guards, unless both texts are one sentence (it may then be a contradiction candidate); the
        others get their guards (:func:`~.paraphrase.relation`) and their exact probability."""
        todo = sorted({pair for pair in found if pair not in self.scores})
        if not todo:
            return
        if self.table is None:
            for pair in todo:
                self._score_one(pair)
            return
        import numpy as np

        from lessonbank.services.consolidation.pairtable import alignments, probabilities

        rows = np.asarray([(self.index[a], self.index[b]) for a, b in todo], dtype=np.int64)
        values = self.table.features(rows)
        cosines = [self._cosine(pair) for pair in todo]
        with_vector = np.asarray([c is not None for c in cosines], dtype=bool)
        cosine = np.asarray([0.0 if c is None else c for c in cosines])
        bound = np.where(
            with_vector,
            probabilities(self.model, values, cosine) if self.model.vectors else 0.0,
            probabilities(scorer.LEXICAL, values),
        )
        self.bounds.update(zip(todo, bound.tolist(), strict=True))
        member = np.where(with_vector, self.model.member, scorer.LEXICAL.member)
        template = scorer.FEATURES.index("template")
        exact: list[tuple[int, Pair]] = []
        for n, pair in enumerate(todo):
            a, b = self.text[pair[0]], self.text[pair[1]]
            checked = bound[n] >= member[n] or (one_sentence(a) and one_sentence(b))
            if values[n, 0] < LIKENESS_FLOOR or not checked:
                self.scores[pair] = 0.0
                continue
            self.relations[pair] = found_relation = relation(a, b, self.weights, paraphrase=0.0)
            if bound[n] < member[n] or (found_relation != "paraphrase" and not same_text(a, b)):
                self.scores[pair] = 0.0
            else:
                exact.append((n, pair))
        aligned = alignments([(self.text[a], self.text[b]) for _, (a, b) in exact])
        for (n, pair), likeness in zip(exact, aligned, strict=True):
            row = tuple(
                float(value) for value in (*values[n, :template], likeness, *values[n, template + 1 :])
            )
            if with_vector[n]:
                self.scores[pair] = scorer.probability(self.model, (*row, float(cosine[n])))
            else:
                self.scores[pair] = scorer.probability(scorer.LEXICAL, row)

    def _score_one(self, pair: Pair) -> None:
        """A pair's guards and probability without NumPy."""
        a, b = self.text[pair[0]], self.text[pair[1]]
        if self.weights.likeness(a, b) < LIKENESS_FLOOR:
            self.scores[pair] = 0.0
            return
        self.relations[pair] = found_relation = relation(a, b, self.weights, paraphrase=0.0)
        if found_relation != "paraphrase" and not same_lesson(a, b):
            self.scores[pair] = 0.0
            return
        values = scorer.features(a, b, self.weights)
        cosine = self._cosine(pair)
        if cosine is None:
            self.scores[pair] = scorer.probability(scorer.LEXICAL, values)
        else:
            self.scores[pair] = scorer.probability(self.model, (*values, cosine))

    def probability(self, pair: Pair) -> float:
        """The scorer's probability for a pair (0 when the guards veto it), computed once."""
        if pair not in self.scores:
            self.score_many([pair])
        return self.scores[pair]

    def _cosine(self, pair: Pair) -> float | None:
        if self.matrix is None or pair[0] not in self.row or pair[1] not in self.row:
            return None
        return float(self.matrix[self.row[pair[0]]] @ self.matrix[self.row[pair[1]]])

    def model_of(self, pair: Pair) -> scorer.Model:
        return self.model if self._cosine(pair) is not None else scorer.LEXICAL

    def candidate(self, pair: Pair, source: str, *, forced: bool = False) -> None:
        if pair in self.edges:
            return
        probability = self.probability(pair)
        model = self.model_of(pair)
        if probability >= model.join or (forced and probability >= model.member):
            if self.contested(pair, probability):
                return
            self.edges[pair] = probability
            self.joined[source] += 1

    def contested(self, pair: Pair, probability: float) -> bool:
        """Whether one of the two lessons has a **rival**: another partner within :data:`RIVAL_MARGIN`
        of the pair's probability (or above it) that is not one lesson with the pair's other side. A
        one-line message as close to a sibling rule's summary as to the paragraph that explains it is
        ambiguous, and an ambiguous pair is left to the person; three tellings of one lesson are no
        rivals of each other (each pair of them is at least ``member`` likely)."""
        if RIVAL_MARGIN <= 0:
            return False
        for side, other in (pair, pair[::-1]):
            for rival, likely in self.partners.get(side, ()):
                if rival == other or likely < probability - RIVAL_MARGIN:
                    continue
                if self.probability(_pair(other, rival)) < self.model_of(_pair(other, rival)).member:
                    return True
        return False

    @property
    def partners(self) -> dict[str, list[tuple[str, float]]]:
        """Each lesson's scored partners with a probability above 0, from the scores when first asked
        (the candidates are all scored by then; a rival check scores a few pairs more, no new rivals)."""
        if self._partners is None:
            self._partners = defaultdict(list)
            for (a, b), likely in self.scores.items():
                if likely > 0:
                    self._partners[a].append((b, likely))
                    self._partners[b].append((a, likely))
        return self._partners

    def clusters(self, trusted: set[Pair], same: set[Pair], opposed: set[Pair]) -> list[list[str]]:
        """Clusters of the joined pairs, the most likely first, every pair across two clusters checked
        before they become one. The same lesson retyped is one lesson: only the first text of each
        is checked."""
        head = {lesson_id: lesson_id for lesson_id in self.text}
        for a, b in sorted(pair for pair in same if pair[0] in self.text and pair[1] in self.text):
            head[b] = head[a] if head[a] != b else head[b]
        edges = {pair: 2.0 for pair in trusted if pair[0] in self.text and pair[1] in self.text}
        edges.update((pair, p) for pair, p in self.edges.items() if pair not in edges)
        members = {lesson_id: [lesson_id] for lesson_id in self.text}
        heads = {lesson_id: {head[lesson_id]} for lesson_id in self.text}
        for pair, _ in sorted(edges.items(), key=lambda item: (-item[1], item[0])):
            if pair in opposed:
                continue
            one, other = members[pair[0]], members[pair[1]]
            if one is other:
                continue
            heads_one, heads_other = heads[pair[0]], heads[pair[1]]
            if len(heads_one) + len(heads_other) > MAX_CLUSTER:
                continue  # a person reviews a merge of a few lessons; and the checks grow as its square
            across = [_pair(a, b) for a in heads_one for b in heads_other if a != b]
            self.score_many([found for found in across if found not in edges and found not in opposed])
            if not all(
                a == b or self._together(_pair(a, b), edges, opposed) for a in heads_one for b in heads_other
            ):
                continue
            one.extend(other)
            heads_one |= heads_other
            for member in other:
                members[member], heads[member] = one, heads_one
        unique = {id(found): found for found in members.values() if len(found) > 1}
        return list(unique.values())

    def _together(self, pair: Pair, edges: Mapping[Pair, float], opposed: set[Pair]) -> bool:
        if pair in opposed:
            return False
        if pair in edges:
            return True
        return self.probability(pair) >= self.model_of(pair).member


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
