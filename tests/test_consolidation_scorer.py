"""The consolidation pre-pass's pair scorer: its features stay in [0, 1], the cosine counts when
vectors are configured, and the fitted thresholds keep their meaning (join at least member)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from lessonbank.models import Lesson
from lessonbank.services.consolidation import scorer
from lessonbank.services.consolidation.paraphrase import Weights
from lessonbank.services.consolidation.prepass import find_candidates

NOW = datetime(2026, 6, 1, tzinfo=UTC)

BANK = [
    "Set PIP_INDEX_URL to the internal mirror before pip install in CI",
    "In CI, point PIP_INDEX_URL at the internal mirror before running pip install",
    "Run the linter before pushing",
    "Close database connections when a test ends.",
    "Pin dependency versions in requirements files.",
    "Restart the worker after changing its configuration.",
]


def test_features_are_shares_and_one_for_the_same_text() -> None:
    weights = Weights.of(BANK)
    for a in BANK:
        for b in BANK:
            values = scorer.features(a, b, weights)
            assert len(values) == len(scorer.FEATURES)
            assert all(0.0 <= value <= 1.0 for value in values), (a, b, values)
    same = dict(zip(scorer.FEATURES, scorer.features(BANK[2], BANK[2], weights), strict=True))
    for name in ("dice", "cover", "bm25", "template", "ratio"):
        assert same[name] == pytest.approx(1.0), name


def test_the_issues_paraphrase_scores_above_join_and_unrelated_lessons_far_below() -> None:
    weights = Weights.of(BANK)
    assert scorer.score(BANK[0], BANK[1], weights) >= scorer.LEXICAL.join
    assert scorer.score(BANK[0], BANK[1], weights, cosine=0.94) >= scorer.VECTOR.join
    assert scorer.score(BANK[3], BANK[4], weights) < 0.01
    assert scorer.score(BANK[3], BANK[4], weights, cosine=0.3) < 0.01


@pytest.mark.parametrize("cosine", [0.2, 0.5, 0.8])
def test_a_closer_vector_never_lowers_the_probability(cosine: float) -> None:
    weights = Weights.of(BANK)
    low = scorer.score(BANK[2], BANK[5], weights, cosine=cosine)
    assert scorer.score(BANK[2], BANK[5], weights, cosine=cosine + 0.15) > low


@pytest.mark.parametrize("model", [scorer.LEXICAL, scorer.VECTOR])
def test_fitted_models_have_one_coefficient_per_feature_and_member_below_join(model: scorer.Model) -> None:
    assert len(model.coefficients) == len(scorer.FEATURES) + (1 if model.vectors else 0)
    assert 0.0 < model.member <= model.join < 1.0


# The pre-pass scores its candidate pairs all at once (pairtable.TermTable): the same features as the
# scalar scorer, and the same clusters as a base install without NumPy scoring one pair at a time.
PAIRS_BANK = [
    *BANK,
    "Run the linter before you push.",
    "Always run the full test suite before committing.",
    "Run the tests before committing, always.",
    "Never commit secrets; keep API keys in the environment.",
    "Keep API keys in environment variables, never in the repository.",
    "Use `*args` to accept extra positional arguments.",
    "Use `**kwargs` to accept extra keyword arguments.",
    "",
    "Restart the worker once its configuration changes.",
    "Pin dependency versions in the requirements files.",
    "the",  # no term at all, last: its row is empty
]


def test_vectorised_features_equal_the_scalar_scorers_but_the_alignment() -> None:
    from lessonbank.services.consolidation.pairtable import TEMPLATE, TermTable

    weights = Weights.of(PAIRS_BANK)
    table = TermTable(PAIRS_BANK, weights)
    pairs = np.asarray([(i, j) for i in range(len(PAIRS_BANK)) for j in range(len(PAIRS_BANK)) if i != j])
    found = table.features(pairs)
    for (i, j), row in zip(pairs.tolist(), found, strict=True):
        expected = list(scorer.features(PAIRS_BANK[i], PAIRS_BANK[j], weights))
        expected[TEMPLATE] = 0.0
        assert row.tolist() == pytest.approx(expected, abs=1e-12), (PAIRS_BANK[i], PAIRS_BANK[j])


def test_likely_pairs_are_each_texts_best_partners_from_the_floor() -> None:
    from lessonbank.services.consolidation.pairtable import TermTable

    weights = Weights.of(PAIRS_BANK)
    found = TermTable(PAIRS_BANK, weights).likely_pairs(4, 200, 0.2, 2)
    assert len(found) and all(i < j for i, j in found.tolist())
    for i, j in found.tolist():
        assert weights.likeness(PAIRS_BANK[i], PAIRS_BANK[j]) >= 0.2
    assert (0, 1) in {tuple(pair) for pair in found.tolist()}  # the issue's pip paraphrase
    per_text = np.bincount(found.ravel(), minlength=len(PAIRS_BANK))
    assert per_text.max() <= 2 * 2  # its own two best, and at most two texts that chose it


def test_clusters_are_the_same_with_and_without_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    lessons = [
        Lesson(id=f"l{n:02d}", content=text, created_at=NOW - timedelta(days=1))
        for n, text in enumerate(PAIRS_BANK)
        if text
    ]
    with_numpy = find_candidates(lessons, NOW)
    monkeypatch.setitem(sys.modules, "lessonbank.services.consolidation.pairtable", None)
    without = find_candidates(lessons, NOW)
    assert with_numpy.clusters == without.clusters
    assert with_numpy.contradictions == without.contradictions
    assert with_numpy.clusters  # something to compare: the pip and linter paraphrases at least
