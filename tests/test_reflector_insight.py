"""The goal insight reflector (seed 000): prompt, tolerant parser, importance, goal episodes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.errors import InputError, ParseError
from lessonbank.models import Episode
from lessonbank.reflectors.insight import (
    INSIGHT_MAX_CHARS,
    InsightReflector,
    goal_episode,
    importance_of,
    parse_insight,
)
from lessonbank.text import estimate_tokens

NOW = datetime(2026, 3, 11, 14, 23, tzinfo=UTC)
INSIGHT = "The price data was outdated; use web_search with recent date filter next time."


def _goal(
    status: str = "failed", errors: list[str] | None = None, outputs: list[str] | None = None
) -> Episode:
    return goal_episode(
        "abc-123",
        title="Research competitor pricing",
        status=status,
        outputs=outputs if outputs is not None else ["Collected prices from 3 vendor pages"],
        errors=errors if errors is not None else ["price table dated 2023"],
        agent=None,
        now=NOW,
    )


def test_prompt_snapshot() -> None:
    reflector = InsightReflector()
    (system, user) = reflector.messages(_goal(), "terminal")
    assert system["role"] == "system" and "1 to 3 sentences" in system["content"]
    assert user["content"] == (
        "GOAL: Research competitor pricing\n"
        "STATE: failed\n"
        "\n"
        "TASK OUTPUTS:\n"
        "- Collected prices from 3 vendor pages\n"
        "\n"
        "ERRORS:\n"
        "- price table dated 2023\n"
        "\n"
        "Write the insight now."
    )
    assert reflector.max_output_tokens == 200


def test_prompt_stays_within_500_tokens_with_huge_inputs() -> None:
    episode = _goal(outputs=["x" * 5000] * 40, errors=["Traceback " * 800] * 30)
    reflector = InsightReflector()
    total = sum(estimate_tokens(m["content"]) for m in reflector.messages(episode, "terminal"))
    assert total <= 500
    assert "GOAL: Research competitor pricing" in reflector.user_prompt(episode, "terminal")


@pytest.mark.parametrize(
    ("status", "errors", "expected"),
    [("failed", [], 0.8), ("completed", [], 0.5), ("failed", ["boom"], 1.0), ("completed", ["boom"], 0.7)],
)
def test_importance_follows_the_seed(status: str, errors: list[str], expected: float) -> None:
    assert importance_of(_goal(status, errors=errors)) == pytest.approx(expected)


@pytest.mark.parametrize(
    "reply",
    [
        INSIGHT,
        f"**Insight:** {INSIGHT}",
        f"```\n{INSIGHT}\n```",
        f"## Reflection\n\n- {INSIGHT}",
        f'"{INSIGHT}"',
        f"Insight - {INSIGHT}",
        f'```json\n{{"insight": "{INSIGHT}"}}\n```',
        f'{{"reflection": "{INSIGHT}", "importance": 0.8}}',
        f"  {INSIGHT.replace('web_search', '`web_search`')}  ",
    ],
)
def test_markdown_and_labels_are_stripped(reply: str) -> None:
    assert parse_insight(reply).fields["insight"] == INSIGHT


def test_at_most_three_sentences_and_500_chars() -> None:
    reply = "One thing failed. Two things helped. Three matters. Four is too many."
    assert parse_insight(reply).fields["insight"] == "One thing failed. Two things helped. Three matters."
    long = " ".join(f"word{i}" for i in range(400)) + "."
    insight = parse_insight(long).fields["insight"]
    assert len(insight) <= INSIGHT_MAX_CHARS and insight.endswith("…")


@pytest.mark.parametrize("reply", ["", "   ", "```\n```", "**OK**", "ok."])
def test_unusable_replies_are_parse_errors(reply: str) -> None:
    with pytest.raises(ParseError):
        parse_insight(reply)


@pytest.mark.parametrize(
    "reply",
    [
        f"Here is my insight: {INSIGHT}",
        f"Here is my insight:\n\n{INSIGHT}",
        f"Sure! Here's a reflection on the goal:\n{INSIGHT}",
        f"Based on the task outputs and errors, here is the insight: {INSIGHT}",
        f"The key insight is: {INSIGHT}",
        f"My insight: {INSIGHT[0].lower() + INSIGHT[1:]}",
    ],
)
def test_a_preamble_is_stripped(reply: str) -> None:
    assert parse_insight(reply).fields["insight"] == INSIGHT


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("word " * 600, "only 1 distinct"),  # 3,000 characters of one word
        ("check the cache " * 60, "only 3 distinct"),
        (" ".join(f"step{i}" for i in range(200)), "without a sentence"),
    ],
)
def test_degenerate_replies_are_parse_errors(reply: str, why: str) -> None:
    with pytest.raises(ParseError, match=why):
        parse_insight(reply)


noise = st.text(alphabet=st.sampled_from(list(" \n\t*#_`>-")), max_size=12)


@settings(max_examples=150, deadline=None)
@given(before=noise, after=noise)
def test_noise_around_a_valid_insight_is_ignored(before: str, after: str) -> None:
    insight = parse_insight(before + INSIGHT + after).fields["insight"]
    assert insight == INSIGHT


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=3000))
def test_any_text_parses_within_limits_or_is_a_parse_error(text: str) -> None:
    try:
        insight = parse_insight(text).fields["insight"]
    except ParseError:
        return
    assert 0 < len(insight) <= INSIGHT_MAX_CHARS
    assert "**" not in insight and "```" not in insight


def test_lesson_carries_goal_title_importance_and_kind() -> None:
    episode = _goal()
    (lesson,) = InsightReflector().lessons(parse_insight(INSIGHT), episode, "terminal")
    assert lesson.kind == "insight" and lesson.goal_id == "abc-123"
    assert lesson.metadata == {"goal_title": "Research competitor pricing", "goal_state": "failed"}
    assert lesson.importance == 1.0 and lesson.content == INSIGHT


def test_goal_episode_shape_and_validation() -> None:
    episode = _goal("completed", errors=[])
    assert (episode.status, episode.goal_title, episode.error) == (
        "success",
        "Research competitor pricing",
        None,
    )
    assert episode.metadata["goal_state"] == "completed"
    bad: list[dict[str, object]] = [
        {"status": "done"},
        {"outputs": "one string"},
        {"errors": [1, 2]},
        {"goal_id": "  "},
        {"goal_id": 5},
    ]
    for change in bad:
        kwargs: dict[str, object] = {
            "goal_id": "g",
            "title": "t",
            "status": "failed",
            "outputs": [],
            "errors": [],
            "agent": None,
            "now": NOW,
            **change,
        }
        with pytest.raises(InputError):
            goal_episode(**kwargs)  # type: ignore[arg-type]
