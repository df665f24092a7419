"""The reflexion reflector (seed 001): schema-shaped self-reflection parsed from messy replies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank import LessonBank
from lessonbank.errors import ParseError
from lessonbank.llm import FakeLLM
from lessonbank.models import Episode, VerificationResult
from lessonbank.reflectors.reflexion import FAILURE_CATEGORIES, ReflexionReflector, parse_reflexion

SCHEMA = json.loads(Path("/work/shared/schemas/reflection-memory.json").read_text())
SELF_REFLECTION_SCHEMA = SCHEMA["properties"]["self_reflection"]

SEED_REPLY = {
    "reflection_text": (
        "In my previous attempt, I tried to map over userData without checking if it exists. The error "
        "occurred because the API response was empty in the test case. In the next attempt, I will verify "
        "userData exists and return an empty array if it doesn't."
    ),
    "credit_assignment": {
        "failing_action_indices": [0],
        "root_cause": "Missing null check for API response",
        "failure_category": "edge_case_miss",
    },
    "causal_reasoning": "userData is undefined when the API returns empty, so .map() throws TypeError.",
    "actionable_insights": ["Add null check: if (!userData) return []"],
    "lessons_learned": ["Always validate API responses before processing"],
    "confidence": 0.9,
    "related_reflections": [],
}

EPISODE = Episode(
    task="Increase test coverage to 80% for authentication module",
    task_type="code",
    loop_id="ralph-auth",
    iteration=1,
    status="failure",
    actions=[
        {"type": "code_modification", "description": "Added unit tests for login", "file_path": "login.ts"}
    ],
    verification=[
        VerificationResult(
            tool="npm test",
            status="failed",
            exit_code=1,
            stderr="TypeError: Cannot read property 'map' of undefined",
            errors=[
                {
                    "type": "test_failure",
                    "message": "should handle empty API response",
                    "file": "login.test.ts",
                    "line": 34,
                }
            ],
        )
    ],
    metadata={
        "previous_reflections": [
            {"iteration": 0, "reflection_text": "I forgot the import.", "lessons_learned": ["Check imports"]}
        ]
    },
)


def _validate(fields: dict[str, Any]) -> None:
    jsonschema.validate(fields["self_reflection"], SELF_REFLECTION_SCHEMA)


def test_prompt_has_the_seed_sections() -> None:
    system, user = ReflexionReflector().messages(EPISODE, "failure")
    assert "Self-Reflection component" in system["content"]
    text = user["content"]
    for part in (
        "## Previous Reflections",
        "### Iteration 0",
        "I forgot the import.",
        "- Check imports",
        "**Task**: Increase test coverage",
        "0. Added unit tests for login | File: login.ts",
        "- npm test: failed (exit 1)",
        "- test_failure: should handle empty API response\n  Location: login.test.ts:34",
    ):
        assert part in text


def test_clean_reply_validates_and_is_not_low_quality() -> None:
    parsed = parse_reflexion(json.dumps(SEED_REPLY))
    _validate(parsed.fields)
    assert parsed.fields["self_reflection"]["credit_assignment"]["failure_category"] == "edge_case_miss"
    assert parsed.fields["low_quality"] is False


def test_fences_and_prose_around_the_object() -> None:
    text = (
        "Sure! Here is my reflection:\n```json\n"
        + json.dumps(SEED_REPLY, indent=2)
        + "\n```\nHope it helps {not json}"
    )
    parsed = parse_reflexion(text)
    assert parsed.fields["self_reflection"]["reflection_text"].startswith("In my previous attempt")


def test_coercions_and_low_quality_indicators() -> None:
    reply = {
        "reflection_text": "I failed.",
        "credit_assignment": {
            "failure_category": "Weird Thing",
            "failing_action_indices": ["2", -1, 1.0, True],
        },
        "confidence": 85,
        "actionable_insights": [],
    }
    parsed = parse_reflexion(json.dumps(reply))
    _validate(parsed.fields)
    reflection = parsed.fields["self_reflection"]
    assert reflection["credit_assignment"]["failure_category"] == "other"
    assert reflection["credit_assignment"]["failing_action_indices"] == [2, 1]
    assert reflection["confidence"] == 0.85
    assert parsed.fields["low_quality_indicators"] == [
        "no_actionable_insights",
        "reflection_text_under_100_chars",
    ]
    none = parse_reflexion(json.dumps({"reflection_text": "x" * 120, "actionable_insights": ["a"]}))
    assert none.fields["low_quality_indicators"] == ["no_credit_assignment"]


@pytest.mark.parametrize(
    "text", ["", "   ", "no json here", '{"foo": 1}', '{"reflection_text": "  "}', "[1, 2]"]
)
def test_unusable_replies_raise(text: str) -> None:
    with pytest.raises(ParseError):
        parse_reflexion(text)


@settings(max_examples=60, deadline=None)
@given(
    st.text(max_size=80).filter(lambda s: "{" not in s), st.text(max_size=80).filter(lambda s: "{" not in s)
)
def test_noise_around_a_valid_answer(before: str, after: str) -> None:
    parsed = parse_reflexion(f"{before}\n{json.dumps(SEED_REPLY)}\n{after}")
    _validate(parsed.fields)
    assert parsed.fields["self_reflection"]["lessons_learned"] == SEED_REPLY["lessons_learned"]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(list(SEED_REPLY)),
        st.one_of(st.none(), st.integers(), st.text(max_size=20), st.lists(st.integers(), max_size=3)),
    )
)
def test_any_shape_validates_or_raises(junk: dict[str, Any]) -> None:
    data = {**SEED_REPLY, **junk}
    try:
        parsed = parse_reflexion(json.dumps(data))
    except ParseError:
        assert not isinstance(data.get("reflection_text"), str) or not data["reflection_text"].strip()
        return
    _validate(parsed.fields)
    assert parsed.fields["self_reflection"]["credit_assignment"]["failure_category"] in FAILURE_CATEGORIES


def test_policy_routes_a_failed_loop_iteration_to_reflexion(db_url: str) -> None:
    llm = FakeLLM([json.dumps(SEED_REPLY)])
    with LessonBank(db_url, llm=llm) as bank:
        bank.record(EPISODE)
        assert bank.flush()
        shown = bank.show(EPISODE.id)
        decision = shown["decision"]
        assert decision["reflector"] == "reflexion"
        (reflection,) = shown["reflections"]
        _validate(reflection["parsed"])
        (lesson,) = bank.lessons(tags=["reflexion"])
        assert lesson.kind == "lesson"
        assert lesson.correction == "Always validate API responses before processing"
        assert "edge-case-miss" in lesson.tags
        assert lesson.confidence == 0.9
        assert len(llm.calls) == 1
        # An iteration the agent recorded itself is searchable once its background reflection ran.
        (found,) = bank.search_reflections(failure_category="edge_case_miss", keywords=["userData"])
        assert found["loop_id"] == "ralph-auth" and found["iteration"] == 1
