"""Paraphrases and contradictions told apart by the consolidation pre-pass, without an LLM: the issue's
examples, and a fixed sample of the labelled pairs in ``tests/data/lesson_pairs.jsonl`` with the tuned
thresholds (the full set and its figures: ``bench/consolidation_pairs.py``)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from lessonbank.lessons import similar_to
from lessonbank.models import Lesson
from lessonbank.services.consolidation import paraphrase
from lessonbank.services.consolidation.paraphrase import Weights, named_apart, opposed, relation, siblings
from lessonbank.services.consolidation.prepass import find_candidates

NOW = datetime(2026, 6, 1, tzinfo=UTC)
PAIRS = Path(__file__).parent / "data" / "lesson_pairs.jsonl"


def lesson(content: str, lesson_id: str) -> Lesson:
    return Lesson(id=lesson_id, content=content, created_at=NOW - timedelta(days=1))


def test_the_pip_mirror_lessons_in_other_words_are_one_cluster() -> None:
    a = lesson("Set PIP_INDEX_URL to the internal mirror before pip install in CI", "a")
    b = lesson("In CI, point PIP_INDEX_URL at the internal mirror before running pip install", "b")
    other = lesson("Set UV_INDEX_URL to the internal mirror in CI.", "c")
    assert find_candidates([a, b], NOW).clusters == [["a", "b"]]
    close = {key: np.ones(4, dtype=np.float32) for key in "abc"}  # an embedder finds all three close
    assert find_candidates([a, b, other], NOW, vectors=close).clusters == [["a", "b"]]


def test_a_reordered_lesson_marked_similar_by_words_is_a_cluster() -> None:
    a = lesson("Before pushing, run the linter", "a")
    b = similar_to(lesson("Run the linter before pushing", "b"), "a", 1.0, "words")
    found = find_candidates([a, b], NOW)
    assert found.clusters == [["a", "b"]]
    assert found.contradictions == []


def test_a_contrast_is_not_a_contradiction() -> None:
    a = lesson("use the Edit tool, not a full file rewrite", "a")
    b = similar_to(
        lesson("use the Edit tool rather than rewriting the full file", "b"),
        "a",
        0.93,
        "vector:minilm",
        key="contradicts",
    )
    found = find_candidates([a, b], NOW)
    assert found.contradictions == []
    assert found.clusters == [["a", "b"]]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Always run the migrations before deploying.", "Never run the migrations before deploying."),
        ("Enable the cache in CI builds.", "Disable the cache in CI builds."),
        ("Always run the linter before pushing.", "Always run the linter after pushing."),
        ("Retry flaky network calls.", "Do not retry flaky network calls."),
    ],
)
def test_opposite_advice_about_one_thing_is_a_contradiction_not_a_cluster(a: str, b: str) -> None:
    assert opposed(a, b)
    found = find_candidates([lesson(a, "a"), lesson(b, "b")], NOW)
    assert found.clusters == []
    assert found.contradictions == [("a", "b")]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "Annotate `*args` with the type of one positional argument.",
            "Annotate `**kwargs` with the type of one keyword argument.",
        ),
        (
            "Use one blank line before a class docstring (D203).",
            "Use one blank line before a class docstring (D211).",
        ),
        ("Missing whitespace around arithmetic operator", "Missing whitespace around bitwise operator"),
        ("Missing docstring in public class", "Missing docstring in public nested class"),
        (
            "Missing return type annotation for special method `{name}`",
            "Missing return type annotation for classmethod `{name}`",
        ),
    ],
)
def test_distinct_lessons_sharing_most_words_are_not_merged(a: str, b: str) -> None:
    found = find_candidates([lesson(a, "a"), lesson(b, "b")], NOW)
    assert found.clusters == []
    assert relation(a, b, Weights.of([a, b])) != "paraphrase"


# The sources the contradiction threshold was checked on. The other linters' documentation pairs added
# later are paraphrases only; their words move the IDF of a borderline contradiction (D203 / D211's first
# sentences: weighted Dice 0.703 → 0.693 against CONTRADICTION 0.7), so they are measured in the bench.
SAMPLED = ("bugbear", "pycodestyle", "pydocstyle", "reflections", "hand", "ruff-alternative", "ruff-siblings")


def sample() -> list[dict[str, str]]:
    """Every hand-written and documented-alternative pair, and every 8th of the others (file order)."""
    records = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    records = [record for record in records if record["source"] in SAMPLED]
    return [
        record
        for n, record in enumerate(records)
        if record["source"] in ("hand", "ruff-alternative") or n % 8 == 0
    ]


def test_on_a_sample_of_the_labelled_pairs_no_distinct_pair_is_merged_and_contradictions_are_found() -> None:
    records = sample()
    texts = sorted({record[side] for record in records for side in ("a", "b")})
    ids = {text: f"l{n:04d}" for n, text in enumerate(texts)}
    found = find_candidates([lesson(text, ids[text]) for text in texts], NOW)
    cluster_of = {member: n for n, cluster in enumerate(found.clusters) for member in cluster}

    def merged(record: dict[str, str]) -> bool:
        a, b = ids[record["a"]], ids[record["b"]]
        return a in cluster_of and cluster_of.get(a) == cluster_of.get(b)

    distinct = [record for record in records if record["label"] == "distinct"]
    contradictions = [record for record in records if record["label"] == "contradiction"]
    assert len(distinct) >= 10 and len(contradictions) >= 8
    assert [record["key"] for record in distinct if merged(record)] == []
    flagged = {frozenset(pair) for pair in found.contradictions}
    missed = [r["key"] for r in contradictions if frozenset((ids[r["a"]], ids[r["b"]])) not in flagged]
    assert len(missed) <= 1, missed
    assert not any(merged(record) for record in contradictions)


def test_close_vectors_do_not_join_one_template_with_a_slot_filled_differently() -> None:
    a = lesson("Async functions should not create subprocesses with blocking methods", "a")
    b = lesson("Async functions should not run processes with blocking methods", "b")
    close = {key: np.ones(4, dtype=np.float32) for key in "ab"}
    assert find_candidates([a, b], NOW, vectors=close, cosine=0.85).clusters == []


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # two words swapped (F502 / F503)
        (
            "`%`-format string expected mapping but got sequence",
            "`%`-format string expected sequence but got mapping",
        ),
        # the negations fall on different words (EXE001 / EXE002)
        ("Shebang is present but file is not executable", "The file is executable but no shebang is present"),
        # a qualifier added in the same word order (C416 / C411-like)
        ("Unnecessary list comprehension (rewrite as a set comprehension)", "Unnecessary list comprehension"),
        # different names in capitals
        (
            "Use of insecure cipher, replace with a known secure cipher such as AES",
            "Use of insecure block cipher mode, replace with a known secure mode such as CBC or CTR",
        ),
        # one word of its own each side, in a text of two sentences
        (
            "Do not call getattr with a constant attribute value. It is not any safer than normal access.",
            "Do not call setattr with a constant attribute value. It is not any safer than normal access.",
        ),
        # one thing against several, in slots of other lengths (ISC001 / ISC002)
        (
            "Implicitly concatenated string literals on one line",
            "Implicitly concatenated string literals over multiple lines",
        ),
    ],
)
def test_siblings_found_by_word_order_negation_scope_qualifiers_and_names(a: str, b: str) -> None:
    assert siblings(a, b)
    weights = Weights.of([a, b, "Pin the versions.", "Close the connections."])
    assert relation(a, b, weights, paraphrase=0.0) is None
    assert find_candidates([lesson(a, "a"), lesson(b, "b")], NOW).clusters == []


def test_naming_more_is_not_naming_different_things() -> None:
    assert not named_apart(
        "The encode_cyclic function only cycles whole groups.",
        "Both encode_cyclic and decode_cyclic skip the last group.",
    )
    assert not named_apart("Using `hasattr(x, '__call__')` is unreliable.", "Using `hasattr` is unreliable.")
    assert named_apart("Annotate `*args` with one type.", "Annotate `**kwargs` with one type.")
    assert named_apart("Use `sys.version[0]` here.", "Use `sys.version[2]` here.")
    # A number is an example in an explanation, the lesson in a one-line rule.
    assert named_apart("Pin numpy to 1.26 for the ARM builds.", "Pin numpy to 2.0 for the ARM builds.")
    assert not named_apart(
        "It fails for lengths that are not a multiple of 3. The last group is skipped.",
        "It fails when the last group has 2 characters. That group is never cycled.",
    )


def test_explanations_of_several_sentences_are_not_opposed_by_one_negation() -> None:
    a = "The implementation is incorrect because it shifts every character. Uppercase letters break it."
    b = "The implementation is incorrect because it does not handle uppercase letters. It shifts them all."
    assert not opposed(a, b)
    assert opposed("Retry flaky network calls.", "Do not retry flaky network calls.")
    # "No X allowed" and "Remove X" both negate: not opposed.
    assert not opposed(
        "No whitespace allowed around the docstring.", "Remove the whitespace around the docstring."
    )


def test_two_rules_of_one_frame_and_one_explanation_are_siblings(monkeypatch: pytest.MonkeyPatch) -> None:
    # ruff's A003 / A004: "Checks for <subject> that use the same names as builtins." in one frame,
    # then one explanation reworded (term Dice 0.54: under RATIONALE, from FRAME_RATIONALE).
    a003 = (
        "Checks for class attributes and methods that use the same names as Python builtins. Reusing a"
        " builtin name for the name of an attribute increases the difficulty of reading and maintaining"
        " the code, and can cause non-obvious errors."
    )
    a004 = (
        "Checks for imports that use the same names as builtins. Reusing a builtin for the name of an"
        " import increases the difficulty of reading the code, and readers may mistake the variable for"
        " the builtin."
    )
    assert siblings(a003, a004)
    assert relation(a003, a004, Weights.of([a003, a004]), paraphrase=0.0) is None
    # Another author's first sentence is not one frame with ruff's: left to the scorer.
    other = (
        "An import named like a builtin shadows it. Reusing a builtin for the name of an import increases"
        " the difficulty of reading the code, and readers may mistake the variable for the builtin."
    )
    assert not siblings(a003, other)
    monkeypatch.setattr(paraphrase, "FRAME_RATIONALE", 1.1)
    assert not siblings(a003, a004)  # the frame rule, not another, tells these two apart


# ruff's RET502 / RET503: two rules, one explanation (the scorer gave such pairs 0.99 on their shared
# rationale). Each is a document: its statement, a blank line, its explanation.
RET502 = (
    "Checks for the presence of a `return` statement with no explicit value, for functions that return"
    " non-`None` values elsewhere.\n\nIncluding a `return` statement with no explicit value can cause"
    " confusion when other `return` statements in the function return non-`None` values. Python"
    " implicitly assumes return `None` if no other return value is present. Adding an explicit"
    " `return None` can make the code more readable by clarifying intent."
)
RET503 = (
    "Checks for missing explicit `return` statements at the end of functions that can return"
    " non-`None` values.\n\nThe lack of an explicit `return` statement at the end of a function that can"
    " return non-`None` values can cause confusion. Python implicitly returns `None` if no other return"
    " value is present. Adding an explicit `return None` can make the code more readable by clarifying"
    " intent."
)


FILLER = (
    "Pin the CI image to a digest so a rebuilt tag cannot change the build.",
    "Run database migrations before the app starts serving traffic.",
    "Close files with a context manager so they are closed on errors too.",
    "Use a lock file so every machine installs the same dependency versions.",
    "Prefer f-strings to percent formatting for readability.",
    "Set a timeout on every outbound HTTP request.",
)


def clusters_of(a: str, b: str) -> list[list[str]]:
    """The pre-pass's clusters of a bank holding ``a``, ``b`` and a few unrelated lessons."""
    bank = [lesson(a, "a"), lesson(b, "b"), *(lesson(text, f"f{n}") for n, text in enumerate(FILLER))]
    return find_candidates(bank, NOW).clusters


def test_documents_with_different_statements_are_siblings_however_alike_their_explanations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert paraphrase.headed_apart(RET502, RET503)
    assert siblings(RET502, RET503)
    assert clusters_of(RET502, RET503) == []
    # One statement, the explanation reworded: one document, and the pre-pass still joins it.
    reworded = RET503.replace("Python implicitly returns", "Python implicitly gives back")
    assert not paraphrase.headed_apart(RET503, reworded)
    assert clusters_of(RET503, reworded) == [["a", "b"]]
    # Without a blank line a first sentence is no statement (one diagnosis may open either way).
    flat_502, flat_503 = RET502.replace("\n\n", " "), RET503.replace("\n\n", " ")
    assert not paraphrase.headed_apart(flat_502, flat_503)
    assert not paraphrase.headed_apart(RET502, flat_503)
    # ruff's SIM201 / SIM202: one statement's words, different operators named (both in each text).
    sim201 = (
        "Checks for negated `==` operators.\n\nNegated `==` operators are less readable than `!=` operators."
    )
    sim202 = (
        "Checks for negated `!=` operators.\n\nNegated `!=` operators are less readable than `==` operators."
    )
    assert not named_apart(sim201, sim202)
    assert paraphrase.headed_apart(sim201, sim202)
    monkeypatch.setattr(paraphrase, "headed_apart", lambda a, b: False)
    assert clusters_of(RET502, RET503) == [["a", "b"]]  # this guard, not another, tells them apart


# Two lessons made of the same situation and a different correction (the remixed reflections of
# bench/consolidation_prepass.py): the words pass had joined them, half of each lesson being shared.
SITUATION = "This leads to incorrect results and infinite values being returned in the failed test cases."
SQUARE = "The function should return n * n instead of just n."
INDENT = "The implementation is incorrect because the function definition is not properly indented."


def test_two_sentence_lessons_sharing_one_sentence_and_differing_in_the_other_are_two_lessons(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one, other = f"{SITUATION} {SQUARE}", f"{SITUATION} {INDENT}"
    weights = Weights.of([one, other, *FILLER])
    assert paraphrase.sentences_apart(one, other, weights)
    assert clusters_of(one, other) == []
    # The same two sentences in the other order, or one of them reworded, are one lesson.
    assert not paraphrase.sentences_apart(one, f"{SQUARE} {SITUATION}", weights)
    assert clusters_of(one, f"{SQUARE} {SITUATION}") == [["a", "b"]]
    reworded = f"{SITUATION} The function should return n * n, not just n."
    assert not paraphrase.sentences_apart(one, reworded, weights)
    # One sentence against two, or three sentences each: not this guard's question.
    assert not paraphrase.sentences_apart(SITUATION, other, weights)
    assert not paraphrase.sentences_apart(f"{one} {INDENT}", f"{other} {SQUARE}", weights)
    monkeypatch.setattr(paraphrase, "sentences_apart", lambda a, b, weights: False)
    assert clusters_of(one, other) == [["a", "b"]]  # this guard, not another, tells them apart


# ruff's S312 / S321 and AIR301 / AIR311: distinct lessons the bank benchmark lost to a merge.
TELNET = "Telnet is considered insecure. Use SSH or some other encrypted protocol."
FTP = (
    "FTP-related functions are being called. FTP is considered insecure. Use SSH/SFTP/SCP or some other"
    " encrypted protocol."
)
REMOVED = "`{deprecated}` is removed in Airflow 3.0"
STILL_WORKS = (
    "`{deprecated}` is removed in Airflow 3.0; It still works in Airflow 3.0 but is expected to be removed"
    " in a future version."
)


def close_clusters(a: str, b: str) -> list[list[str]]:
    """The pre-pass's clusters of ``a`` and ``b`` among a few unrelated lessons, the two's vectors as
    close as vectors get (an embedder would join them if nothing told them apart)."""
    bank = [lesson(a, "a"), lesson(b, "b"), *(lesson(text, f"f{n}") for n, text in enumerate(FILLER))]
    close = {"a": np.ones(4, dtype=np.float32), "b": np.ones(4, dtype=np.float32)}
    return find_candidates(bank, NOW, vectors=close).clusters


def test_one_statement_about_two_subjects_is_two_lessons(monkeypatch: pytest.MonkeyPatch) -> None:
    assert paraphrase.subjects_apart(TELNET, FTP)
    assert siblings(TELNET, FTP)
    assert close_clusters(TELNET, FTP) == []
    # The subject named in both (one text naming more) is one lesson's wording, not two subjects.
    reworded = "Telnet is considered insecure. Prefer SSH, an encrypted protocol."
    assert not paraphrase.subjects_apart(TELNET, reworded)
    # A comma clause is a statement too: bugbear's B010 message against ruff's B043 (the name unquoted
    # in one, so the names do not tell them apart).
    setattr_ = "Do not call setattr with a constant attribute value, it is not any safer than normal property access."
    delattr_ = "Do not call `delattr` with a constant attribute value. It is not any safer than normal property deletion."
    assert not named_apart(setattr_, delattr_)
    assert paraphrase.subjects_apart(setattr_, delattr_)
    monkeypatch.setattr(paraphrase, "subjects_apart", lambda a, b: False)
    assert close_clusters(TELNET, FTP) == [["a", "b"]]  # this guard, not another, tells them apart
    assert close_clusters(setattr_, delattr_) == [["a", "b"]]


def test_a_rule_and_the_rule_with_an_exception_are_two_lessons(monkeypatch: pytest.MonkeyPatch) -> None:
    assert paraphrase.excepted(REMOVED, STILL_WORKS)
    assert close_clusters(REMOVED, STILL_WORKS) == []
    # A clause added that explains, not excepts, is left to the scorer.
    assert not paraphrase.excepted(REMOVED, f"{REMOVED}; code using it fails to import.")
    monkeypatch.setattr(paraphrase, "excepted", lambda a, b: False)
    assert close_clusters(REMOVED, STILL_WORKS) == [["a", "b"]]


def test_punctuation_abbreviations_and_links_name_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # pyflakes's F509 message (its placeholder dropped: "'...'") against ruff's description naming
    # `printf`: an ellipsis, an "e.g." or a link in one text is not a thing the other fails to name.
    message = "'...' %%... has unsupported format character"
    description = "Checks for `printf`-style format strings with unsupported format characters."
    assert not named_apart(message, description)
    assert not named_apart(
        "Use `min(1, 2, 3)`, e.g. for three values.", "Use `min(1, 2, 3)` for three values."
    )
    linked = "See https://docs.python.org/3/library/os.html before calling `os.getenv` with a default."
    assert not named_apart(linked, "Call `os.getenv` with a default.")
    assert named_apart("Annotate `*args` with one type.", "Annotate `**kwargs` with one type.")
    monkeypatch.setattr(paraphrase, "_NOT_A_NAME", re.compile(r"(?!)"))
    paraphrase._named_words.cache_clear()
    assert named_apart(message, description)  # the ellipsis counted as a name kept them apart
    paraphrase._named_words.cache_clear()
