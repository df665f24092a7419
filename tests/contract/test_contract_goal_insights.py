"""Seed 000 on every backend: insights are per goal, so the same insight text for two goals is two lessons."""

from __future__ import annotations

from lessonbank import LessonBank, Settings
from lessonbank.llm import FakeLLM

FAST = Settings.from_env(backoff_base_s=0.01, backoff_max_s=0.05, poll_interval_s=0.05)
SAME = "The price data was outdated; use web_search with a recent date filter next time."
NEAR = "The price data was outdated; use web_search with a recent date filter next time, always."


def test_the_same_insight_for_two_goals_is_two_lessons(store_url: str) -> None:
    with LessonBank(store_url, llm=FakeLLM([SAME, SAME, SAME]), settings=FAST) as bank:
        bank.finish_goal("goal-1", title="Research pricing", status="failed")
        assert bank.flush(timeout=30)
        bank.finish_goal("goal-2", title="Research pricing again", status="failed")
        assert bank.flush(timeout=30)
        (first,) = bank.insights(goal_id="goal-1")
        (second,) = bank.insights(goal_id="goal-2")
        assert first.id != second.id and first.content == second.content == SAME
        assert first.access_count == second.access_count == 0
        assert second.metadata["goal_title"] == "Research pricing again"
        # The same goal repeating its insight still reinforces its own lesson.
        bank.finish_goal("goal-2", title="Research pricing again", status="failed", outputs=["again"])
        assert bank.flush(timeout=30)
        (again,) = bank.insights(goal_id="goal-2")
        assert again.id == second.id and again.access_count == 1
        assert bank.get_lesson(first.id).access_count == 0


def test_a_near_duplicate_insight_never_reinforces_another_goals(store_url: str) -> None:
    with LessonBank(store_url, llm=FakeLLM([SAME, NEAR]), settings=FAST) as bank:
        bank.finish_goal("goal-1", title="Research pricing", status="failed")
        assert bank.flush(timeout=30)
        bank.finish_goal("goal-2", title="Research pricing again", status="failed")
        assert bank.flush(timeout=30)
        (first,) = bank.insights(goal_id="goal-1")
        (second,) = bank.insights(goal_id="goal-2")
        assert first.id != second.id and first.access_count == 0
