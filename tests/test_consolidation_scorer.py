"""The consolidation pre-pass's pair scorer: its features stay in [0, 1], the cosine counts when
vectors are configured, and the fitted thresholds keep their meaning (join at least member)."""

from __future__ import annotations

import pytest

from lessonbank.services.consolidation import scorer
from lessonbank.services.consolidation.paraphrase import Weights

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
