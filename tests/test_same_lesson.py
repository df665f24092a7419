"""Write-time dedup folds only the same lesson: distinct lessons that share most of their words
(siblings from one template) stay apart, and are marked for the consolidation cycle instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from lessonbank import LessonBank
from lessonbank.text import literals, same_lesson

ARGS = (
    "Checks that function `*args` arguments have type annotations. Type annotations are a good way to "
    "document the types of function arguments. They also help catch bugs, when used alongside a type "
    "checker, by ensuring that the types of any provided arguments match expectation."
)
KWARGS = ARGS.replace("`*args`", "`**kwargs`")
VERSION_0 = (
    "Checks for uses of sys.version[0] to compare the major version of Python. When the major "
    "version reaches 10 this comparison will no longer hold; use sys.version_info instead."
)
VERSION_2 = VERSION_0.replace("sys.version[0]", "sys.version[2]").replace("major", "minor")
AFTER = "Checks for missing whitespace after keywords. Missing whitespace makes the code harder to read."
BEFORE = AFTER.replace("after", "before")
RETRY_3 = "Retry the upload 3 times before failing the job."
RETRY_5 = "Retry the upload 5 times before failing the job."

SAME = [
    ("Run the migrations before the deploy.", "run the migrations before the deploy"),
    ("Run the migrations before the deploy.", "Run migrations before a deploy!"),
    ("Always pin the `requests` version.", "always pin the `requests` version"),
    ("Checks for uses of os.path.getmtime() in tests", "Check for use of os.path.getmtime() in tests."),
    ("Never push to main on Friday", "never push to  main on Friday."),
    ("Keep CI green before merging", "keep ci green before merging"),
    ("Don't rebase 'main' after review", "don't rebase 'main' after the review."),
]
DISTINCT = [
    (ARGS, KWARGS),
    (VERSION_0, VERSION_2),
    (AFTER, BEFORE),
    (RETRY_3, RETRY_5),
    ("Run the migrations before the deploy", "Do not run the migrations before the deploy"),
    ("Use rg instead of grep", "Use grep instead of rg"),
    ("Pin `numpy<2` in CI", "Pin `numpy<3` in CI"),
    ("Call os.path.getmtime() for the change time", "Call os.path.getctime() for the change time"),
    ('Checks for whitespace before ")", "]" or "}".', 'Checks for whitespace before ",", ";" or ":".'),
    ("Quote it as 'x' in shell", "Quote it as 'y' in shell"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_lesson_retyped_is_the_same(a: str, b: str) -> None:
    assert same_lesson(a, b) and same_lesson(b, a)


@pytest.mark.parametrize(("a", "b"), DISTINCT)
def test_siblings_that_differ_in_a_word_a_name_or_a_number_are_not(a: str, b: str) -> None:
    assert not same_lesson(a, b) and not same_lesson(b, a)


def test_literals_are_code_spans_identifiers_and_numbers() -> None:
    found = literals(
        "Use `x == 1` with sys.version[0], *args, os.path.getmtime() and camelCase in 3.12 on CI"
    )
    assert {"x == 1", "sys.version[0]", "*args", "os.path.getmtime()", "camelCase", "3.12"} <= found
    assert "CI" not in found and "Use" not in found


@pytest.mark.parametrize("embedder", [None, "hash"])
def test_sibling_rules_stay_two_live_lessons(tmp_path: Path, embedder: str | None) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", embedder=embedder, worker=False) as bank:
        written = [bank.add_lesson(text) for pair in DISTINCT[:4] for text in pair]
        assert len({lesson.id for lesson in written}) == 8
        assert len(bank.lessons()) == 8
        # The second of each pair shares most of its words with the first: marked for review.
        kwargs = bank.get_lesson(written[1].id)
        assert [mark["id"] for mark in kwargs.metadata["similar_to"]] == [written[0].id]
        assert all(bank.get_lesson(lesson.id).access_count == 0 for lesson in written)


def test_the_same_lesson_retyped_reinforces(tmp_path: Path) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False) as bank:
        first = bank.add_lesson(AFTER)
        again = bank.add_lesson(AFTER.lower().replace("missing whitespace makes", "missing whitespace make"))
        assert again.id == first.id and bank.get_lesson(first.id).access_count == 1
        assert len(bank.lessons()) == 1
