"""Scores that rank recalled lessons.

``temporal_score`` = (1 + ln(1 + access_count)) × e^(−days · ln2 / 30) × (0.5 + confidence):
use reinforces, a 30-day half-life since last use (or creation) fades, confidence weighs.
Pinned lessons do not fade. The final score blends it with lexical relevance, both
normalised to [0, 1] over the candidates: relevance decides, history breaks near-ties.
"""

from __future__ import annotations

import math

HALF_LIFE_DAYS = 30.0
LEXICAL_WEIGHT = 0.75


def temporal_score(access_count: int, confidence: float, last_used: float, pinned: bool, now: float) -> float:
    days = 0.0 if pinned else max(0.0, (now - last_used) / 86400.0)
    return (
        (1.0 + math.log1p(access_count)) * math.exp(-days * math.log(2) / HALF_LIFE_DAYS) * (0.5 + confidence)
    )


def blend(lexical: list[float], temporal: list[float]) -> list[float]:
    """Per candidate: LEXICAL_WEIGHT × lexical/max + (1 − LEXICAL_WEIGHT) × temporal/max."""
    top_lexical = max(lexical, default=0.0) or 1.0
    top_temporal = max(temporal, default=0.0) or 1.0
    return [
        LEXICAL_WEIGHT * lex / top_lexical + (1.0 - LEXICAL_WEIGHT) * tmp / top_temporal
        for lex, tmp in zip(lexical, temporal, strict=True)
    ]
