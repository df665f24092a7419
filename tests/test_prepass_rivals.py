"""A scored pair is not joined when one of its lessons is about as likely one lesson with a third that is not
one lesson with the other side (a rival): the pre-pass leaves an ambiguous pair to the person."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lessonbank.models import Lesson
from lessonbank.services.consolidation import prepass
from lessonbank.services.consolidation.prepass import find_candidates

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OTHERS = [
    "Run the linter before pushing.",
    "Close database connections when a test ends.",
    "Restart the worker after changing its configuration.",
    "Read the error message before editing the code.",
    "Never commit secrets to the repository.",
    "Use pathlib instead of os.path for file paths.",
    "Set PIP_INDEX_URL to the internal mirror in CI.",
    "Annotate functions with return types.",
]
MESSAGE = "Unnecessary list comprehension"
EXPLANATION = "Checks for unnecessary list comprehensions."
SIBLING = "Unnecessary list comprehension passed to a builtin call"  # another rule's summary


def bank(*texts: tuple[str, str]) -> list[Lesson]:
    found = [
        Lesson(id=f"o{n}", content=text, created_at=NOW - timedelta(days=1)) for n, text in enumerate(OTHERS)
    ]
    return found + [Lesson(id=i, content=text, created_at=NOW - timedelta(days=1)) for i, text in texts]


def test_a_pair_without_a_rival_is_joined() -> None:
    assert find_candidates(bank(("a", MESSAGE), ("b", EXPLANATION)), NOW).clusters == [["a", "b"]]


def test_a_pair_with_a_rival_is_left_to_the_person(monkeypatch: pytest.MonkeyPatch) -> None:
    lessons = bank(("a", MESSAGE), ("b", EXPLANATION), ("c", SIBLING))
    # The explanation is about as likely one lesson with the sibling rule as with the message, and the
    # message and the sibling are two lessons: which rule it explains is not known.
    assert find_candidates(lessons, NOW).clusters == []
    monkeypatch.setattr(prepass, "RIVAL_MARGIN", 0.0)  # without the rule, the pair is joined
    assert find_candidates(lessons, NOW).clusters == [["a", "b"]]


def test_tellings_of_one_lesson_are_no_rivals() -> None:
    lessons = bank(
        ("a", "Set PIP_INDEX_URL to the internal mirror before pip install in CI"),
        ("b", "set pip_index_url to the internal mirror before pip install in ci"),  # retyped
        ("c", "In CI, point PIP_INDEX_URL at the internal mirror before running pip install"),
    )
    lessons = [found for found in lessons if "PIP_INDEX_URL" not in found.content or found.id in "abc"]
    assert find_candidates(lessons, NOW).clusters == [["a", "b", "c"]]
