"""How likely two lessons of one scope are the same lesson, from what the bank has: a small logistic
regression over features of the pair. Pure and deterministic; no LLM, no store, no NumPy.

Features (each in [0, 1]; :func:`features`):

- ``dice``: the IDF-weighted Dice overlap of the two texts' terms (:meth:`.paraphrase.Weights.likeness`);
- ``cover``: the larger of the two texts' weighted shares found in the other (a one-line message
  inside a paragraph that explains it);
- ``rare``: the weight of the rarest term the two share, over the weight of a term only one lesson
  has (two texts naming one rare thing, "encode_cyclic", are likely about it);
- ``bm25``: the BM25 score of each text against the other with the scope's IDF, over the text's
  score against itself, the smaller of the two;
- ``template``: how much of the two texts is one sequence of words (:func:`.paraphrase.template_likeness`):
  high for siblings of one template, which a paraphrase's reordering and rewording lowers;
- ``ratio``: the shorter text's length in words over the longer's;
- ``named``: 1 when both name the same code spans, identifiers or numbers, else 0;
- ``cosine``: the pair's vector similarity, when an embedder is configured (:data:`VECTOR`), else
  the lexical model (:data:`LEXICAL`) runs without it.

The hard guards of :func:`.paraphrase.relation` (opposition, siblings, different names) come first:
a pair they veto is never scored. The coefficients were fitted by ``bench/consolidation_fit.py``
(Newton's method, L2 penalty 1.0, on the ``tune`` half of ``tests/data/lesson_pairs.jsonl`` only: every
pair of that half's texts that the guards let through, labelled by whether the two texts document one
rule code or one task); the thresholds are the lowest at which the tuning half's joined pairs are at
least 97% right. The held-out half and the bank benchmark were not used to fit them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from lessonbank.services.consolidation.framing import unframed
from lessonbank.services.consolidation.paraphrase import Weights, template_likeness, terms
from lessonbank.text import literals, words

FEATURES = ("dice", "cover", "rare", "mass", "bm25", "template", "ratio", "named")
MASS = 8.0  # rare terms shared at which ``mass`` is 1
BM25_K1 = 1.2
BM25_B = 0.75


@dataclass(frozen=True)
class Model:
    """A fitted logistic model: ``intercept``, one coefficient per feature (in :data:`FEATURES` order,
    then ``cosine`` when ``vectors``), and the probability from which a pair is joined (``join``) and
    from which two lessons may sit in one cluster (``member``: every pair of a cluster is at least this)."""

    intercept: float
    coefficients: tuple[float, ...]
    join: float
    member: float
    vectors: bool


# Fitted by `bench/consolidation_fit.py` on the tune half (see the module docstring); refit there, never by hand.
LEXICAL = Model(
    intercept=-8.778,
    coefficients=(1.401, 4.100, 3.068, 5.799, 2.388, -1.573, 0.678, 0.349),
    join=0.82,
    member=0.50,
    vectors=False,
)
VECTOR = Model(
    intercept=-10.044,
    coefficients=(0.063, 2.300, 2.824, 4.571, 0.529, -1.317, 0.313, 0.154, 6.674),
    join=0.79,
    member=0.51,
    vectors=True,
)


def features(a: str, b: str, weights: Weights) -> tuple[float, ...]:
    """The lexical features of a pair, in :data:`FEATURES` order (the module docstring says each)."""
    (weight_a, total_a), (weight_b, total_b) = weights.vector(a), weights.vector(b)
    shared = weight_a.keys() & weight_b.keys()
    shared_weight = sum(weight_a[t] for t in shared)
    dice = 2.0 * shared_weight / (total_a + total_b) if total_a + total_b else 0.0
    cover = max(shared_weight / total_a if total_a else 0.0, shared_weight / total_b if total_b else 0.0)
    top = weights.weight("\x00")  # a term no lesson has: the highest weight there is
    rare = max((weight_a[t] for t in shared), default=0.0) / top
    mass = min(1.0, shared_weight / (MASS * top))
    bm25 = min(_bm25(a, b, weights), _bm25(b, a, weights))
    length_a, length_b = len(words(a)), len(words(b))
    ratio = min(length_a, length_b) / max(length_a, length_b, 1)
    named_a, named_b = literals(a), literals(b)
    named = 1.0 if named_a and named_a == named_b else 0.0
    values = (dice, cover, rare, mass, bm25, template_likeness(a, b), ratio, named)
    return tuple(min(1.0, value) for value in values)  # sums in another order may pass 1 by a rounding


def _bm25(query: str, document: str, weights: Weights) -> float:
    """BM25 of ``query``'s terms against ``document``, over ``document`` against itself (in [0, 1])."""
    counts = _counts(document)
    length = sum(counts.values())
    if not length:
        return 0.0
    average = max(weights.average_length(), 1.0)
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / average)

    def score(found: frozenset[str]) -> float:
        return sum(
            weights.weight(t) * counts[t] * (BM25_K1 + 1.0) / (counts[t] + norm) for t in found if t in counts
        )

    best = score(frozenset(counts))
    return score(terms(query)) / best if best else 0.0


@lru_cache(maxsize=65536)
def _counts(text: str) -> dict[str, int]:
    """How often each of the text's terms occurs in it."""
    counts: dict[str, int] = {}
    for word in words(unframed(text)):
        for term in terms(word):
            counts[term] = counts.get(term, 0) + 1
    return counts


def probability(model: Model, values: tuple[float, ...]) -> float:
    """The model's probability that a pair with these feature values is one lesson."""
    z = model.intercept + sum(c * v for c, v in zip(model.coefficients, values, strict=True))
    return 1.0 / (1.0 + math.exp(-z)) if z > -60 else 0.0


def score(a: str, b: str, weights: Weights, *, cosine: float | None = None) -> float:
    """The probability that ``a`` and ``b`` are one lesson: the vector model when ``cosine`` is
    given, the lexical one otherwise. The guards of :func:`.paraphrase.relation` are not applied here."""
    values = features(a, b, weights)
    if cosine is None:
        return probability(LEXICAL, values)
    return probability(VECTOR, (*values, cosine))
