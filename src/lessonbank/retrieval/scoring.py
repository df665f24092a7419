"""Scores that rank recalled lessons.

A recalled lesson's score = relevance blended with a prior, times its utility:

- relevance: how well the lesson matches the query (BM25, cosine, or their fusion), normalised
  to [0, 1] over the candidates;
- prior = temporal × (0.5 + importance), where ``temporal_score`` =
  (1 + ln(1 + access_count)) × e^(−days · ln2 / 30) × (0.5 + confidence): use reinforces, a
  30-day half-life since last use (or creation) fades, confidence weighs; pinned lessons do not
  fade. Normalised to [0, 1] over the candidates; RELEVANCE_WEIGHT of the blend is relevance,
  so relevance decides and history breaks near-ties;
- utility = (helpful + 1) / (helpful + harmful + 2), the outcome record of the contexts the
  lesson was injected into (0.5 when it has none); the blend is multiplied by 0.5 + utility,
  so a lesson that keeps coming with failures sinks and one that keeps helping rises.
"""

from __future__ import annotations

import math

HALF_LIFE_DAYS = 30.0
RELEVANCE_WEIGHT = 0.75
LEXICAL_WEIGHT = RELEVANCE_WEIGHT  # the name this weight had when recall was lexical only


def temporal_score(access_count: int, confidence: float, last_used: float, pinned: bool, now: float) -> float:
    days = 0.0 if pinned else max(0.0, (now - last_used) / 86400.0)
    return (
        (1.0 + math.log1p(access_count)) * math.exp(-days * math.log(2) / HALF_LIFE_DAYS) * (0.5 + confidence)
    )


def utility(helpful: int, harmful: int) -> float:
    """Laplace-smoothed share of helpful outcomes: 0.5 with no evidence, toward 1 or 0 with it."""
    return (helpful + 1.0) / (helpful + harmful + 2.0)


def blend(relevance: list[float], prior: list[float]) -> list[float]:
    """Per candidate: RELEVANCE_WEIGHT × relevance/max + (1 − RELEVANCE_WEIGHT) × prior/max."""
    top_relevance = max(relevance, default=0.0) or 1.0
    top_prior = max(prior, default=0.0) or 1.0
    return [
        RELEVANCE_WEIGHT * rel / top_relevance + (1.0 - RELEVANCE_WEIGHT) * pri / top_prior
        for rel, pri in zip(relevance, prior, strict=True)
    ]
