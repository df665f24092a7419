"""Fits the consolidation pre-pass's pair scorer (``services/consolidation/scorer.py``) on the ``tune`` half
of ``tests/data/lesson_pairs.jsonl`` and prints the constants to commit.

The half's distinct texts are one bank (one scope, IDF among them, as the pre-pass computes it). Every pair
of two texts that the guards of ``paraphrase.relation`` let through (not opposed, not siblings, not naming
different things) and that share a term or sit at cosine ≥ 0.3 is one example, labelled 1 when the two texts
document one item (one rule code, one hand-written pair; ``consolidation_pairs.bank_of``); two reflections
on one problem are left out (``same-problem``: not known to be one lesson or two). Two
models: the lexical features alone, and with the MiniLM cosine. Logistic regression by Newton's method with
an L2 penalty (:data:`PENALTY`, the intercept not penalized). ``join`` is the lowest probability from which
the tuning half's pairs are at least :data:`JOIN_PRECISION` right; ``member`` (what every pair of a cluster
must reach) the lowest at :data:`MEMBER_PRECISION`. The held-out half is never read.

    .venv/bin/python bench/consolidation_fit.py            # prints the Model constants and a sweep
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from itertools import combinations

import numpy as np

import _pairdata
from consolidation_pairs import bank_of, unknown, vectors_for
from lessonbank.services.consolidation import scorer
from lessonbank.services.consolidation.paraphrase import Weights, named_apart, opposed, siblings, terms

PENALTY = 1.0
JOIN_PRECISION = 0.97
MEMBER_PRECISION = 0.85
MIN_COSINE = 0.3


def examples(half: str = "tune") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Feature rows (lexical features then the cosine), labels and the cosine of every example pair."""
    records = [record for record in _pairdata.load() if record["half"] == half]
    lessons, _, items = bank_of(records)
    texts = [lesson.content for lesson in lessons]
    vectors = vectors_for(records, "minilm")
    matrix = np.stack([np.asarray(vectors[text], dtype=np.float64) for text in texts])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    cosines = matrix @ matrix.T
    weights = Weights.of(texts)
    rows, labels = [], []
    for i, j in combinations(range(len(texts)), 2):
        a, b = texts[i], texts[j]
        if not (terms(a) & terms(b)) and cosines[i, j] < MIN_COSINE:
            continue
        if opposed(a, b) or siblings(a, b) or named_apart(a, b):
            continue
        if unknown(items[lessons[i].id], items[lessons[j].id]):  # two reflections on one problem
            continue
        rows.append((*scorer.features(a, b, weights), float(cosines[i, j])))
        labels.append(items[lessons[i].id] == items[lessons[j].id])
    x = np.asarray(rows)
    return x, np.asarray(labels, dtype=np.float64), x[:, -1]


def fit(x: np.ndarray, y: np.ndarray, penalty: float = PENALTY) -> np.ndarray:
    """Logistic regression weights (intercept first) by Newton's method with an L2 penalty."""
    design = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(design.shape[1])
    ridge = penalty * np.eye(design.shape[1])
    ridge[0, 0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-design @ beta))
        gradient = design.T @ (y - p) - ridge @ beta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + ridge
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def lowest_at(probabilities: np.ndarray, y: np.ndarray, precision: float) -> float:
    """The lowest probability p such that the pairs at p or above are at least ``precision`` right,
    rounded up to 0.01."""
    order = np.argsort(-probabilities)
    hits = np.cumsum(y[order])
    shares = hits / np.arange(1, len(order) + 1)
    ok = np.flatnonzero(shares >= precision)
    if not len(ok):
        return 1.0
    return float(np.ceil(probabilities[order][ok[-1]] * 100) / 100)


def model(name: str, beta: np.ndarray, join: float, member: float, vectors: bool) -> str:
    coefficients = ", ".join(f"{value:.3f}" for value in beta[1:])
    return (
        f"{name} = Model(\n    intercept={beta[0]:.3f},\n    coefficients=({coefficients}),\n"
        f"    join={join:.2f},\n    member={member:.2f},\n    vectors={vectors},\n)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    x, y, _ = examples("tune")
    print(f"tune examples: {len(y)} pairs, {int(y.sum())} of one item; features {scorer.FEATURES} + cosine")
    for name, columns, vectors in (("LEXICAL", slice(0, -1), False), ("VECTOR", slice(None), True)):
        beta = fit(x[:, columns], y)
        probabilities = 1.0 / (1.0 + np.exp(-(beta[0] + x[:, columns] @ beta[1:])))
        join = lowest_at(probabilities, y, JOIN_PRECISION)
        member = lowest_at(probabilities, y, MEMBER_PRECISION)
        print(model(name, beta, join, member, vectors))
        for cut in (0.3, 0.5, 0.7, 0.8, 0.9, 0.95, join):
            chosen = probabilities >= cut
            right = int(y[chosen].sum())
            print(f"  p>={cut:.2f}: pairs {int(chosen.sum())} right {right} recall {right / y.sum():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
