"""Dedup on write with vectors: near-duplicates reinforce, contradictions supersede, nothing is deleted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from lessonbank import Episode, LessonBank
from lessonbank.llm.fake import FakeLLM
from lessonbank.retrieval.dedup import negations, same_polarity


class TableEmbedder:
    """Vectors chosen by the test: the sum of the vectors of the known phrases a text holds.

    A text with no known phrase gets an axis of its own (from its characters), far from the rest.
    """

    name = "table-test"
    dim = 8

    def __init__(self, phrases: dict[str, tuple[float, ...]]) -> None:
        self.phrases = phrases

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dim, dtype=np.float32)
        for phrase, part in self.phrases.items():
            if phrase in text.lower():
                vector[: len(part)] += np.asarray(part, dtype=np.float32)
        if not vector.any():
            vector[4 + sum(map(ord, text)) % (self.dim - 4)] = 1.0
        return vector / np.linalg.norm(vector)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


def _angle(radians: float) -> tuple[float, float]:
    return (float(np.cos(radians)), float(np.sin(radians)))


def _bank(tmp_path: Path, phrases: dict[str, tuple[float, ...]], llm: FakeLLM | None = None) -> LessonBank:
    return LessonBank(
        f"sqlite:///{tmp_path / 'bank.db'}",
        namespace="t",
        worker=llm is not None,
        llm=llm,
        embedder=TableEmbedder(phrases),
    )


def test_polarity_cues() -> None:
    assert negations("never rewrite the whole file") == 1
    assert not same_polarity("rewrite the whole file", "do not rewrite the whole file")
    assert same_polarity("avoid full rewrites", "never do a full rewrite")
    # Words that also occur in plain advice are not negations.
    assert same_polarity(
        "run pytest -x to stop at the first failure", "run pytest -x, halt on the first failure"
    )
    assert same_polarity("build without the cache", "build with a clean cache")
    assert same_polarity("use rg instead of grep", "prefer rg over grep")
    assert negations("you must not push to main") == 1 and negations("no") == 0


def test_the_same_advice_in_other_words_is_kept_and_marked_for_consolidation(tmp_path: Path) -> None:
    # cos(0.1 rad) = 0.995: well above the default threshold, yet a likeness is a judgement, never
    # a merge at write time: the new lesson is added and names the stored one for review.
    with _bank(
        tmp_path, {"patch in small edits": _angle(0.0), "apply changes in little hunks": _angle(0.1)}
    ) as bank:
        first = bank.add_lesson("patch in small edits when the file is large")
        again = bank.add_lesson("apply changes in little hunks for big files")
        assert again.id != first.id
        [mark] = again.metadata["similar_to"]
        assert mark["id"] == first.id and mark["by"] == "vector:table-test" and mark["similarity"] > 0.99
        assert bank.get_lesson(first.id).access_count == 0
        assert len(bank.lessons()) == 2


def test_the_same_lesson_retyped_still_reinforces_with_an_embedder(tmp_path: Path) -> None:
    with _bank(tmp_path, {"patch in small edits": _angle(0.0)}) as bank:
        first = bank.add_lesson("Patch in small edits when the file is large.")
        again = bank.add_lesson("patch in small edits, when the file is large")
        assert again.id == first.id and bank.get_lesson(first.id).access_count == 1


def test_related_but_distinct_advice_is_kept_apart(tmp_path: Path) -> None:
    # cos(0.6 rad) = 0.83: related, under the threshold, and not a seed-004 lesson pair.
    with _bank(tmp_path, {"patch in small edits": _angle(0.0), "run gofmt after edits": _angle(0.6)}) as bank:
        bank.add_lesson("patch in small edits when the file is large")
        bank.add_lesson("run gofmt after edits")
        assert len(bank.lessons()) == 2


def test_the_opposite_advice_is_kept_and_flagged_as_a_contradiction(tmp_path: Path) -> None:
    # Negation cues are a crude signal (on ruff's rules every such pair was two distinct rules):
    # both lessons stay live, and the new one names the old for a person to decide.
    with _bank(tmp_path, {"cache the token": _angle(0.0), "do not cache the token": _angle(0.05)}) as bank:
        old = bank.add_lesson("cache the token between calls")
        new = bank.add_lesson("do not cache the token between calls: it expires in 60 s")
        assert new.id != old.id and new.supersedes is None
        [mark] = new.metadata["contradicts"]
        assert mark["id"] == old.id and mark["by"] == "vector:table-test"
        assert bank.get_lesson(old.id).superseded_by is None
        assert {h.lesson.id for h in bank.recall("cache the token", k=5)} == {old.id, new.id}


def test_a_pinned_lesson_is_never_superseded(tmp_path: Path) -> None:
    with _bank(tmp_path, {"cache the token": _angle(0.0), "do not cache the token": _angle(0.05)}) as bank:
        old = bank.add_lesson("cache the token between calls", pinned=True)
        new = bank.add_lesson("do not cache the token between calls")
        assert new.supersedes is None
        assert bank.get_lesson(old.id).superseded_by is None


def test_a_reflected_lesson_with_a_new_correction_for_the_same_situation_supersedes(tmp_path: Path) -> None:
    situation = "when the deploy script times out"
    # Whole lessons: cos 0.8 (related, under the threshold); situations: cos 1; corrections: cos 0.
    phrases = {
        situation: (2.0, 0.0, 0.0),
        "retry the deploy": (0.0, 1.0, 0.0),
        "raise the deploy": (0.0, 0.0, 1.0),
    }
    replies = [
        f"<situation>{situation}</situation><mistake>waited</mistake><correction>retry the deploy once</correction><tags>deploy, timeout</tags>",
        f"<situation>{situation}</situation><mistake>retried</mistake><correction>raise the deploy timeout to 300 s</correction><tags>deploy, timeout</tags>",
    ]
    llm = FakeLLM(replies)
    with _bank(tmp_path, phrases, llm=llm) as bank:
        bank.record(Episode(task="deploy api", status="failure", error="deploy timed out after 60s"))
        assert bank.flush(timeout=10)
        [old] = bank.lessons()
        bank.record(Episode(task="deploy web", status="failure", error="deploy timed out after 60s, retried"))
        assert bank.flush(timeout=10)
        live = bank.lessons()
        assert len(live) == 1 and live[0].id != old.id
        assert live[0].supersedes == old.id
        assert bank.get_lesson(old.id).superseded_by == live[0].id
        assert live[0].learned_from == "deploy web"


def test_a_reflected_near_duplicate_is_marked_inside_the_job(tmp_path: Path) -> None:
    situation = "when the deploy script times out"
    reply = (
        f"<situation>{situation}</situation><mistake>waited</mistake>"
        "<correction>{c}</correction><tags>deploy, timeout</tags>"
    )
    llm = FakeLLM([reply.format(c="retry the deploy once"), reply.format(c="retry the deploy one time")])
    with _bank(tmp_path, {situation: (1.0, 0.0)}, llm=llm) as bank:
        for task in ("deploy api", "deploy web"):
            bank.record(Episode(task=task, status="failure", error="deploy timed out"))
            assert bank.flush(timeout=10)
        first, second = sorted(bank.lessons(), key=lambda x: x.created_at)
        assert first.access_count == 0 and second.correction == "retry the deploy one time"
        assert [m["id"] for m in second.metadata["similar_to"]] == [first.id]
        reflections = [r for job in bank.jobs() for r in bank.show(job.episode_id or "")["reflections"]]
        assert sorted(r["lesson_ids"] for r in reflections) == sorted([[first.id], [second.id]])


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_lessons_are_still_refused_with_an_embedder(tmp_path: Path, bad: str) -> None:
    from lessonbank.errors import InputError

    with _bank(tmp_path, {}) as bank, pytest.raises(InputError):
        bank.add_lesson(bad)


def test_a_reflected_lesson_whose_correction_turns_negative_supersedes(tmp_path: Path) -> None:
    situation = "when the deploy script times out"
    reply = (
        f"<situation>{situation}</situation><mistake>waited</mistake>"
        "<correction>{c}</correction><tags>deploy, timeout</tags>"
    )
    # Every text holds the situation, so whole lessons and corrections alike sit at cosine 1:
    # only the "do not" tells the two corrections apart.
    llm = FakeLLM([reply.format(c="retry the deploy"), reply.format(c="do not retry the deploy")])
    with _bank(tmp_path, {situation: (1.0, 0.0), "retry the deploy": (1.0, 0.0)}, llm=llm) as bank:
        for task in ("deploy api", "deploy web"):
            bank.record(Episode(task=task, status="failure", error="deploy timed out"))
            assert bank.flush(timeout=10)
        [live] = bank.lessons()
        assert live.correction == "do not retry the deploy" and live.supersedes is not None
        assert bank.get_lesson(live.supersedes).superseded_by == live.id


@pytest.mark.parametrize("bad", ["0", "1.5", "-0.2"])
def test_a_dedup_threshold_outside_the_cosine_range_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    from lessonbank.errors import ConfigError

    monkeypatch.setenv("LESSONBANK_DEDUP_COSINE", bad)
    with pytest.raises(ConfigError, match="LESSONBANK_DEDUP_COSINE"):
        LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False)
