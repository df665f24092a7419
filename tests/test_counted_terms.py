"""Term frequencies counted in one pass (``Counter`` over the mapped words) are the floats, the order
and the term vectors that adding each word's weight one at a time gives, for every field and word shape."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank.models import Lesson
from lessonbank.stores import lexical
from lessonbank.stores.lexical import FIELD_WEIGHTS, term_vector, weighted_terms

_WORDS = [
    "running ",
    "runs ",
    "ran ",
    "Run, ",
    "Caf\u00e9 ",
    "x1 ",
    "\u0130i ",
    "a-b ",
    "RUN. ",
    "`v_w` ",
    "\t",
    "\n",
]
_TEXT = st.lists(st.sampled_from(_WORDS), max_size=12).map("".join)


def _one_at_a_time(monkeypatch: pytest.MonkeyPatch, lesson: Lesson) -> tuple[dict[str, float], int, bytes]:
    """What the per-word loops give (the counted path turned off)."""
    with monkeypatch.context() as patch:
        patch.setattr(lexical, "_exact_weight", lambda weight: False)
        frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
        vector = term_vector(lesson.content, lesson.tags, lesson.learned_from, {"kind": lesson.kind})
    return frequencies, length, vector


@settings(max_examples=300, deadline=None)
@given(_TEXT.filter(str.strip), st.lists(_TEXT.map(lambda t: t[:60]), max_size=3), _TEXT)
def test_counted_terms_are_those_added_one_word_at_a_time(
    content: str, tags: list[str], learned_from: str
) -> None:
    lesson = Lesson(content=content, tags=tags, learned_from=learned_from or None)
    with pytest.MonkeyPatch.context() as monkeypatch:
        expected, expected_length, expected_vector = _one_at_a_time(monkeypatch, lesson)
    frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
    assert list(frequencies.items()) == list(expected.items())  # same floats, same order
    assert all(type(tf) is float for tf in frequencies.values())
    assert length == expected_length
    vector = term_vector(lesson.content, lesson.tags, lesson.learned_from, {"kind": lesson.kind})
    assert vector == expected_vector


def test_a_weight_whose_sums_depend_on_their_order_is_added_one_word_at_a_time() -> None:
    lesson = Lesson(content="run runs", tags=["running"], learned_from="ran runs run")
    weights = {"content": 1.0, "tags": 1.0, "learned_from": 0.1}
    frequencies, length = weighted_terms(lesson, weights)
    by_word, _ = lexical.word_frequencies(lesson.content, lesson.tags, lesson.learned_from, weights)
    assert frequencies == {"run": by_word["run"] + by_word["runs"] + by_word["running"], "ran": 0.1}
    assert length == 6
    assert not lexical._exact_weight(0.1) and lexical._exact_weight(0.75) and lexical._exact_weight(2.0)


def test_words_met_for_the_first_time_are_counted_past_the_cache_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lexical, "_STEMS", {})
    monkeypatch.setattr(lexical, "_CACHE_MAX", 0)
    monkeypatch.setattr(lexical, "_WORD_HASHES", {})
    monkeypatch.setattr(lexical, "_WORD_HASHES_MAX", 0)
    lesson = Lesson(content="running runs quickly", tags=["deploys"], learned_from="runs")
    frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
    assert list(frequencies.items()) == [("run", 2.75), ("quickli", 1.0), ("deploi", 1.0)] and length == 5
    expected = _one_at_a_time(monkeypatch, lesson)[2]
    assert term_vector(lesson.content, lesson.tags, lesson.learned_from, {"kind": lesson.kind}) == expected
    assert lexical._STEMS == {} and lexical._WORD_HASHES == {}


def test_terms_that_share_a_hash_are_one_record_of_the_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, empty in (("_TERM_HASHES", {}), ("_HELD_HASHES", set()), ("_SHARED_HASHES", set())):
        monkeypatch.setattr(lexical, name, empty)
    monkeypatch.setattr(lexical, "term_hash", lambda term: 7 if term in ("run", "deploi") else 8)
    lesson = Lesson(content="running quickly quickly", tags=["deploys"])
    frequencies, length = weighted_terms(lesson, FIELD_WEIGHTS)
    first = lexical.weighted_term_vector(frequencies, length, lesson)  # hashes kept as they are made
    assert 7 in lexical._SHARED_HASHES and len(lexical._SHARED_HASHES) == 1
    again = lexical.weighted_term_vector(frequencies, length, lesson)  # every hash kept already
    # As a dict keyed by hash keeps them: the first term's place, the last one's frequency.
    merged = lexical._packed([7, 8], [1.0, 2.0], length, {"kind": "lesson"}, lesson.tags)
    assert first == again == merged
