"""The server stores' Porter stemmer agrees with SQLite's FTS5 ``porter`` tokenizer word for word."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lessonbank.stores.stem import stem
from lessonbank.text import words

ROOT = Path(__file__).resolve().parents[1]


def test_stems_match_sqlite_fts5_porter_on_the_project_text() -> None:
    text = " ".join(p.read_text("utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "src").rglob("*.py"))])
    vocabulary = sorted({w for w in words(text) if w.isascii() and w.isalpha()})
    assert len(vocabulary) > 1000
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = 'porter unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'row')")
    mismatches = []
    for word in vocabulary:
        conn.execute("DELETE FROM t")
        conn.execute("INSERT INTO t (x) VALUES (?)", (word,))
        (expected,) = conn.execute("SELECT term FROM v").fetchone()
        if stem(word) != expected:
            mismatches.append((word, stem(word), expected))
    assert mismatches == []


def test_short_and_non_ascii_words_are_kept() -> None:
    assert stem("go") == "go" and stem("über") == "über" and stem("h2o") == "h2o"
