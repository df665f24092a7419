"""Hybrid recall through the bank on every backend: vectors written, searched, filtered, credited."""

from __future__ import annotations

from lessonbank import Episode, LessonBank, Settings
from lessonbank.llm import FakeLLM
from tests.conftest import SEED_004_REPLY

FAST = Settings.from_env(backoff_base_s=0.01, backoff_max_s=0.05, poll_interval_s=0.05)


def test_hybrid_recall_dedup_and_attribution(store_url: str) -> None:
    llm = FakeLLM([SEED_004_REPLY])
    with LessonBank(store_url, llm=llm, settings=FAST, embedder="hash") as bank:
        manual = bank.add_lesson(
            "keep pull requests under 400 lines",
            learned_from="review of a 3,000-line pull request",
            tags=["review"],
        )
        bank.record(
            Episode(
                task="refactor pkg/auth/manager.go into smaller go files", status="failure", error="timeout"
            )
        )
        assert bank.flush(timeout=30)
        reflected = next(lesson for lesson in bank.lessons() if lesson.id != manual.id)
        assert reflected.learned_from == "refactor pkg/auth/manager.go into smaller go files"
        assert bank.embed_missing() == 0  # the worker embedded what it wrote

        hits = bank.recall("split manager.go of pkg/auth", k=2, mode="vector")
        assert hits[0].lesson.id == reflected.id and hits[0].vector > 0
        assert [h.lesson.id for h in bank.recall("pull request review", k=1, mode="hybrid")] == [manual.id]
        assert bank.recall("pull request review", mode="vector", tags=["no-such-tag"]) == []

        # The same lesson in other words is reinforced; the injected lessons are credited.
        assert bank.add_lesson("Keep pull requests under 400 lines.").id == manual.id
        block = bank.context("review a pull request of 3,000 lines", agent="rev")
        assert manual.id in block.lesson_ids
        bank.record(Episode(task="review a pull request of 3,000 lines", agent="rev", status="success"))
        assert bank.get_lesson(manual.id).helpful == 1
        bank.forget(manual.id)
        assert all(h.lesson.id != manual.id for h in bank.recall("pull request review", mode="vector"))
