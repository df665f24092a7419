"""Text helpers: tokens, keywords, similarity, truncation, token estimates, content hashes."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.text import (
    STOPWORDS,
    content_hash,
    estimate_tokens,
    jaccard,
    keywords,
    normalize,
    truncate,
    words,
)

# --- words / keywords ------------------------------------------------------------------------------


def test_words_lowercase_and_split_on_punctuation_and_underscores() -> None:
    assert words("Refactor pkg/engine.Close() snake_case v2!") == [
        "refactor",
        "pkg",
        "engine",
        "close",
        "snake",
        "case",
        "v2",
    ]


def test_words_keep_non_ascii_letters() -> None:
    assert words("Réparer le fichier: 日本語") == ["réparer", "le", "fichier", "日本語"]


def test_keywords_drop_stopwords_and_duplicates_in_order() -> None:
    assert keywords("The Fox and the fox jumped over THE lazy dog and the FOX") == [
        "fox",
        "jumped",
        "over",
        "lazy",
        "dog",
    ]


def test_keywords_of_only_stopwords_is_empty() -> None:
    assert keywords("what is this, and where is it?") == []
    assert {"the", "and", "is", "with"} <= STOPWORDS
    assert "refactor" not in STOPWORDS


# --- jaccard ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([], [], 1.0),
        (["a"], [], 0.0),
        (["a", "b"], ["b", "c"], 1 / 3),
        (["a", "b"], ["b", "a", "a"], 1.0),
        (["x"], ["y"], 0.0),
        (["a", "b", "c", "d"], ["a", "b"], 0.5),
    ],
)
def test_jaccard(a: list[str], b: list[str], expected: float) -> None:
    assert jaccard(a, b) == pytest.approx(expected)


@given(st.lists(st.text(max_size=3)), st.lists(st.text(max_size=3)))
def test_jaccard_is_symmetric_and_bounded(a: list[str], b: list[str]) -> None:
    value = jaccard(a, b)
    assert 0.0 <= value <= 1.0
    assert value == jaccard(b, a)
    assert jaccard(a, a) == 1.0


# --- truncate --------------------------------------------------------------------------------------


def test_short_text_is_unchanged() -> None:
    assert truncate("hello", 5) == "hello"
    assert truncate("hello", 100) == "hello"


@pytest.mark.parametrize("text", ["", None])
def test_empty_or_none_gives_empty(text: str | None) -> None:
    assert truncate(text, 10) == ""


def test_long_text_is_cut_with_an_explicit_marker() -> None:
    text = "word " * 1000
    out = truncate(text, 300)
    assert len(out) <= 300
    assert re.search(r"\[…truncated \d+ chars\]$", out)
    assert out.startswith("word word")
    assert text.startswith(out.split(" […truncated")[0])


@settings(max_examples=200)
@given(st.text(min_size=0, max_size=3000), st.integers(min_value=40, max_value=2000))
def test_truncate_respects_the_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    out = truncate(text, limit)
    assert len(out) <= limit
    if len(text) <= limit:
        assert out == text
    else:
        assert "truncated" in out
        kept = out.rsplit(" […truncated", 1)[0]
        assert text.startswith(kept)


@settings(max_examples=50)
@given(st.text(min_size=30, max_size=200), st.integers(min_value=0, max_value=20))
def test_truncate_respects_small_limits(text: str, limit: int) -> None:
    assert len(truncate(text, limit)) <= limit


def test_truncation_marker_counts_the_removed_characters() -> None:
    text = "a" * 2000
    out = truncate(text, 1500)
    match = re.search(r" \[…truncated (\d+) chars\]$", out)
    assert match is not None
    kept = out[: match.start()]
    assert int(match.group(1)) == len(text) - len(kept)


# --- estimate_tokens -------------------------------------------------------------------------------


def test_estimate_tokens_of_empty_is_zero() -> None:
    assert estimate_tokens("") == 0


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=2000))
def test_estimate_tokens_is_never_below_a_quarter_of_ascii_length(text: str) -> None:
    assert estimate_tokens(text) >= math.ceil(len(text) / 4)


@given(st.text(alphabet=st.characters(min_codepoint=128, codec="utf-8"), min_size=3, max_size=500))
def test_estimate_tokens_grows_for_non_ascii(text: str) -> None:
    assert estimate_tokens(text) > estimate_tokens("a" * len(text))


def test_estimate_tokens_counts_lines() -> None:
    assert estimate_tokens("abc\n" * 10) > estimate_tokens("abc " * 10)


@given(st.text(max_size=300), st.text(max_size=300))
def test_estimate_tokens_is_roughly_additive(a: str, b: str) -> None:
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)
    assert estimate_tokens(a + b) >= max(estimate_tokens(a), estimate_tokens(b))


# --- normalize / content_hash ----------------------------------------------------------------------


def test_normalize_folds_case_and_whitespace() -> None:
    assert normalize("  Use\tEdit\n\nTOOL  ") == "use edit tool"


def test_content_hash_folds_case_and_whitespace() -> None:
    assert content_hash("default", "lesson", "Use  Edit\nTool ") == content_hash(
        "default", "lesson", "use edit tool"
    )


def test_content_hash_separates_namespaces_kinds_and_text() -> None:
    base = content_hash("default", "lesson", "use edit tool")
    assert content_hash("other", "lesson", "use edit tool") != base
    assert content_hash("default", "insight", "use edit tool") != base
    assert content_hash("default", "lesson", "use the edit tool") != base
    assert len(base) == 64 and int(base, 16) >= 0


def test_content_hash_does_not_fold_the_namespace() -> None:
    assert content_hash("Proj", "lesson", "x") != content_hash("proj", "lesson", "x")


@given(
    st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8), max_size=12),
    st.lists(st.sampled_from([" ", "  ", "\n", "\t", " \r\n "]), min_size=13, max_size=13),
    st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_content_hash_is_invariant_under_case_and_spacing(
    tokens: list[str], gaps: list[str], upper: list[bool]
) -> None:
    noisy = gaps[0] + "".join(
        (tok.upper() if up else tok) + gap for tok, gap, up in zip(tokens, gaps[1:], upper, strict=False)
    )
    assert content_hash("n", "lesson", noisy) == content_hash("n", "lesson", " ".join(tokens))
