"""The relevance floor: a lesson found by its vector alone must be close enough to be returned, and
scores shown to a person are comparable across queries (not 1.0 for every query's best hit)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from lessonbank import LessonBank
from lessonbank.errors import ConfigError
from lessonbank.settings import Settings

NULL_LESSON = "check the API response for null before reading its fields"
# Query → the cosine its vector has with the lesson's (the lesson's vector is the first axis).
COSINES = {
    "bake a chocolate cake for a birthday": 0.06,
    "write a go http handler": -0.036,
    "guard against an empty payload from the server": 0.8,
    "handle a missing payload from the server": 0.3,
    "reading fields of a null thing": 0.01,
}


class AxisEmbedder:
    """The lesson on one axis; each query at the cosine COSINES gives it (deterministic, no model)."""

    name = "axis-test"
    dim = 4

    def _vector(self, text: str) -> np.ndarray:
        if text.startswith(NULL_LESSON):
            return np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
        cosine = COSINES.get(text, 0.0)
        return np.array([cosine, (1 - cosine**2) ** 0.5, 0.0, 0.0], dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


def _bank(tmp_path: Path, **settings: float) -> LessonBank:
    bank = LessonBank(
        f"sqlite:///{tmp_path / 'floor.db'}",
        embedder=AxisEmbedder(),
        settings=Settings(home=tmp_path, **settings),  # type: ignore[arg-type]
    )
    bank.add_lesson(NULL_LESSON)
    return bank


def test_an_unrelated_query_recalls_nothing_above_the_floor(tmp_path: Path) -> None:
    with _bank(tmp_path, vector_floor=0.2) as bank:
        assert bank.recall("bake a chocolate cake for a birthday") == []
        assert bank.recall("bake a chocolate cake for a birthday", mode="vector") == []
        assert bank.context("bake a chocolate cake for a birthday").lesson_ids == []
        [hit] = bank.recall("handle a missing payload from the server")
        assert hit.vector == pytest.approx(0.3, abs=1e-4)


def test_a_lesson_pointing_away_from_the_query_is_never_injected(tmp_path: Path) -> None:
    with _bank(tmp_path) as bank:  # no floor configured: the default still refuses cosine ≤ 0
        assert bank.retriever.vector_floor == 0.0
        assert bank.context("write a go http handler").lesson_ids == []
        assert bank.recall("write a go http handler", k=5) == []


def test_a_query_word_match_is_kept_below_the_floor(tmp_path: Path) -> None:
    with _bank(tmp_path, vector_floor=0.5) as bank:
        [hit] = bank.recall("reading fields of a null thing")
        assert hit.lexical > 0 and hit.vector < 0.5


def test_scores_are_comparable_across_queries(tmp_path: Path) -> None:
    with _bank(tmp_path, vector_floor=0.0) as bank:
        [strong] = bank.recall("guard against an empty payload from the server")
        [weak] = bank.recall("handle a missing payload from the server")
        [faint] = bank.recall("bake a chocolate cake for a birthday")
        assert strong.score > weak.score > faint.score > 0
        assert faint.score < 0.1  # not 1.0 for being the best of one
        assert (faint.vector, faint.lexical) == (pytest.approx(0.06, abs=1e-4), 0.0)  # the parts are kept


def test_the_floor_is_a_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LESSONBANK_VECTOR_FLOOR", "0.35")
    assert Settings.from_env().vector_floor == 0.35
    with pytest.raises(ConfigError, match="LESSONBANK_VECTOR_FLOOR"):
        Settings(home=tmp_path, vector_floor=1.5)
