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


PRICING = "Vendor price pages lag behind; check the provider's API for current GPU prices."
FLAKY = "The integration suite is flaky on Mondays; rerun it once before bisecting."
QUOTA = "The export job hit its storage quota; clean the scratch bucket first."


def test_without_a_goal_insights_about_a_similar_task_come_first(store_url: str) -> None:
    with LessonBank(store_url, llm=FakeLLM([PRICING, FLAKY, QUOTA]), settings=FAST) as bank:
        goals = [
            ("goal-1", "Research GPU pricing", "completed"),
            ("goal-2", "Fix the integration suite", "failed"),
            ("goal-3", "Export the monthly report", "failed"),
        ]
        for goal_id, title, status in goals:
            bank.finish_goal(goal_id, title=title, status=status)
            assert bank.flush(timeout=30)
        task = "Compare GPU prices across cloud providers"
        block = bank.context(task, formats=["past_reflections"])
        lines = block.text.splitlines()
        assert lines[2] == f"• [Goal: Research GPU pricing] {PRICING}"  # then the recent goals' insights
        assert len(lines) == 4
        # Without a goal or formats, the context carries the insight about the similar task.
        block = bank.context(task)
        assert "[PAST REFLECTIONS]" in block.text and PRICING in block.text
        # Nothing like the task: no past reflections by default.
        assert "[PAST REFLECTIONS]" not in bank.context("Rotate the TLS certificates").text
