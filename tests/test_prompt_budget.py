"""Reflection prompts stay within 500 tokens, system prompt included; inputs are cut by priority."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.models import Episode
from lessonbank.reflectors.budget import OMITTED, Field, fit_fields
from lessonbank.reflectors.dual import DualReflector
from lessonbank.reflectors.insight import InsightReflector
from lessonbank.reflectors.lesson import LessonReflector
from lessonbank.text import estimate_tokens

REFLECTORS = [LessonReflector(), DualReflector(), InsightReflector()]


def _tokens(reflector: LessonReflector | DualReflector | InsightReflector, episode: Episode) -> int:
    return sum(estimate_tokens(m["content"]) for m in reflector.messages(episode, "error"))


@pytest.mark.parametrize("reflector", REFLECTORS, ids=lambda r: r.name)
def test_huge_episode_fits_with_the_task_and_the_error_head_kept(
    reflector: LessonReflector | DualReflector | InsightReflector,
) -> None:
    episode = Episode(
        task="TASK-HEAD " + "t" * 50_000,
        error="ERROR-HEAD " + "e" * 50_000,
        attempt="ATTEMPT-HEAD " + "a" * 50_000,
        output="o" * 50_000,
        actions=["x" * 10_000] * 20,
        goal_id="g",
        goal_title="TASK-HEAD " + "t" * 50_000,
        task_type="code",
        agent="coder",
        duration_s=80,
    )
    assert _tokens(reflector, episode) <= 500
    prompt = reflector.messages(episode, "error")[1]["content"]
    assert "TASK-HEAD" in prompt and "ERROR-HEAD" in prompt


@pytest.mark.parametrize("reflector", REFLECTORS, ids=lambda r: r.name)
def test_small_episode_is_not_cut(reflector: LessonReflector | DualReflector | InsightReflector) -> None:
    episode = Episode(
        task="refactor engine.go", error="timeout after 120s", attempt="full rewrite", goal_id="g"
    )
    prompt = reflector.messages(episode, "error")[1]["content"]
    assert "truncated" not in prompt and OMITTED not in prompt


@settings(max_examples=200, deadline=None)
@given(
    task=st.text(max_size=3000),
    error=st.text(max_size=6000),
    attempt=st.text(max_size=6000),
)
def test_lesson_and_dual_prompts_never_exceed_500_tokens(task: str, error: str, attempt: str) -> None:
    # A leading letter keeps the task valid whatever the episode model strips (blanks, control characters).
    episode = Episode(task=f"t{task}", error=error or None, attempt=attempt or None)
    for reflector in REFLECTORS:
        assert _tokens(reflector, episode) <= 500


def _render(values: dict[str, str]) -> str:
    return f"A: {values['a']}\nB: {values['b']}\nC: {values['c']}"


def test_fit_fields_cuts_least_important_first_to_floors_then_drops() -> None:
    fields = [Field("a", "A" * 900, 900), Field("b", "B" * 900, 900), Field("c", "C" * 900, 900)]
    loose = fit_fields(fields, _render, 10_000, estimate_tokens)
    assert loose == _render({"a": "A" * 900, "b": "B" * 900, "c": "C" * 900})
    mid = fit_fields(fields, _render, 500, estimate_tokens)
    assert estimate_tokens(mid) <= 500 and mid.startswith("A: " + "A" * 400)  # the first field is cut last
    tight = fit_fields(fields, _render, 60, estimate_tokens)
    assert estimate_tokens(tight) <= 60 and f"C: {OMITTED}" in tight and tight.startswith("A: AAAA")
