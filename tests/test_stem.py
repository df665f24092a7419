"""The Porter stemmer agrees with SQLite's FTS5 ``porter`` tokenizer word for word."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lessonbank.text import stem, words

ROOT = Path(__file__).resolve().parents[1]


def fts5_stems(vocabulary: list[str]) -> dict[str, str]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = 'porter unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')")
    conn.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", enumerate(vocabulary, start=1))
    stems = {vocabulary[doc - 1]: term for term, doc in conn.execute("SELECT term, doc FROM v")}
    conn.close()
    return stems


def mismatches(vocabulary: list[str]) -> list[tuple[str, str, str]]:
    expected = fts5_stems(vocabulary)
    return [(word, stem(word), expected[word]) for word in vocabulary if stem(word) != expected[word]]


def test_stems_match_sqlite_fts5_porter_on_the_project_text() -> None:
    sources = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "src").rglob("*.py")),
    ]
    text = " ".join(p.read_text("utf-8") for p in sources)
    vocabulary = sorted({w for w in words(text) if w.isascii() and w.isalpha()})
    assert len(vocabulary) > 1000
    assert mismatches(vocabulary) == []


def test_a_suffix_that_is_the_whole_word_is_read_as_fts5_reads_it() -> None:
    vocabulary = [
        "as",
        "es",
        "is",
        "s",
        "us",
        "ies",
        "sses",
        "eed",
        "eeds",
        "ied",
        "ing",
        "ings",
        "yes",
        "feed",
    ]
    assert mismatches(vocabulary) == []
    assert stem("sses") == "sse" and stem("ies") == "ie" and stem("eeds") == "e"


def test_short_and_non_ascii_words_are_kept() -> None:
    assert stem("go") == "go" and stem("über") == "über" and stem("h2o") == "h2o"
