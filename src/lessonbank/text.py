"""Small text helpers shared by the write path, recall and prompts.

Deterministic: the same text always gives the same tokens, stems, hash and truncation, so
deduplication, job keys and lexical indexes are stable across processes and versions.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache

import snowballstemmer  # type: ignore[import-untyped]

TokenCounter = Callable[[str], int]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Words too common to tell two lessons or two tasks apart.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def words(text: str) -> list[str]:
    """Lowercased word tokens (letters and digits; punctuation and underscores split words)."""
    return [w.lower() for w in _WORD.findall(text)]


def keywords(text: str) -> list[str]:
    """Distinct non-stopword tokens, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in words(text):
        if word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


# Imperative negations only: "no", "stop", "without" and "instead of" also occur in plain
# paraphrases ("stop at the first failure", "run without a cache").
_NEGATION = re.compile(
    r"\b(not|never|don't|dont|doesn't|avoid|avoids|avoiding|shouldn't|mustn't|can't|cannot)\b",
    re.IGNORECASE,
)
# Code spans, and short quoted text (the quotes around ")" or ":" in "whitespace before ')'").
_CODE_SPAN = re.compile(r"`([^`\n]+)`|\"([^\"\n]{1,40})\"|(?<!\w)'([^'\n]{1,40})'(?!\w)")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# A word that names something in code: holds "_", ".", "()", "[", a leading "*", a digit, or a
# capital after a small letter (sys.version, *args, os.path.getmtime(), camelCase, utf8); an
# all-capitals word is an acronym ("CI" and "ci" are one word).
_IDENTIFIER = re.compile(r"\*{0,2}[A-Za-z_][\w.]*(?:\(\)|\[[^\]\s]*\])?")
_CODE_LIKE = re.compile(r"[_.(\[*\d]|[a-z][A-Z]")


def negations(text: str) -> int:
    """How many negation cues a text holds ("do not", "never", "avoid", ...)."""
    return len(_NEGATION.findall(text))


def literals(text: str) -> frozenset[str]:
    """What must match exactly for two texts to be one lesson: code spans and short quoted text,
    identifiers, numbers."""
    found = {span for groups in _CODE_SPAN.findall(text) for span in groups if span}
    found.update(_NUMBER.findall(text))
    found.update(w.rstrip(".") for w in _IDENTIFIER.findall(text) if _CODE_LIKE.search(w.rstrip(".")))
    return frozenset(found)


def same_lesson(a: str, b: str) -> bool:
    """Whether two texts say the same thing word for word, give or take case, spacing, punctuation,
    stopwords and inflection: the same content words (stemmed) in the same order, the same negation
    cues, and the same code spans, identifiers and numbers. "Check whitespace *after* keywords" and
    "... *before* keywords", or ``sys.version[0]`` and ``sys.version[2]``, are two lessons."""
    return (
        _content_stems(a) == _content_stems(b)
        and sorted(m.lower() for m in _NEGATION.findall(a)) == sorted(m.lower() for m in _NEGATION.findall(b))
        and literals(a) == literals(b)
    )


def _content_stems(text: str) -> list[str]:
    return list(dict.fromkeys(stem(w) for w in words(text) if w not in STOPWORDS))


def normalize(text: str) -> str:
    """Case- and whitespace-folded text: what counts as "the same content"."""
    return " ".join(text.lower().split())


def content_hash(namespace: str, kind: str, text: str, *, scope: str | None = None) -> str:
    """The identity of a lesson's content: namespace, kind and normalized text, plus ``scope`` when
    given (a goal for insights), so the same text in two scopes is two lessons."""
    scoped = "" if scope is None else f"{scope}\x1f"
    return hashlib.sha256(f"{namespace}\x1f{kind}\x1f{scoped}{normalize(text)}".encode()).hexdigest()


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Token-set Jaccard similarity in [0, 1]; two empty sets are identical."""
    set_a, set_b = set(a), set(b)
    if not set_a and not set_b:
        return 1.0
    return len(set_a & set_b) / len(set_a | set_b)


def truncate(text: str | None, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters, ending with a marker saying how many were cut.

    When ``limit`` is too small to hold the marker, the text is cut bare.
    """
    if not text:
        return ""
    if len(text) <= limit:
        return text
    keep = limit
    for _ in range(4):  # the marker's length depends on the count it reports; this settles in two rounds
        marker = f" […truncated {len(text) - keep} chars]"
        if limit - len(marker) == keep:
            break
        keep = limit - len(marker)
    if keep <= 0:
        return text[: max(0, limit)]
    return text[:keep] + marker


def estimate_tokens(text: str) -> int:
    """A conservative token count: never below what common BPE tokenizers produce.

    BPE vocabularies average ~4 characters per token on English and fewer on code or
    non-Latin text; counting one token per 3 UTF-8 bytes, plus one per line, over-counts
    on purpose so a budget computed with it is never exceeded by the real tokenizer.
    """
    if not text:
        return 0
    return math.ceil(len(text.encode("utf-8")) / 3) + text.count("\n")


# Porter's step-1 suffixes that SQLite's FTS5 ``porter`` tokenizer does not match as a whole word,
# each with what FTS5 leaves of such a word instead (see ``stem``).
_BARE_STEP1_SUFFIXES = {"sses": "sse", "ies": "ie", "eed": "e"}
_porter = snowballstemmer.stemmer("porter")
_porter_lock = threading.Lock()  # a snowball stemmer keeps its cursor on the instance


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Porter stem of a lowercase word, as SQLite's FTS5 ``porter`` tokenizer computes it.

    Stores that index words themselves (Redis, PostgreSQL) stem with this, so their recall
    matches what the SQLite store matches ("files" finds "file", "deploying" finds "deploys").
    Words shorter than 3 letters or holding anything but ASCII letters are kept as they are.

    The stemming is snowball's ``porter`` (the algorithm of Porter's 1980 paper) with FTS5's one
    reading of it: a suffix only matches when at least one letter precedes it, where the paper
    also matches a suffix that is the whole word. Every rule after step 1 needs a vowel or a
    measure above 0 before its suffix, which no letters cannot have, so only step 1 differs: a bare
    "sses" or "ies" loses just its "s", and a bare "eed" (after step 1a) is read as "e" + "ed".
    """
    if len(word) < 3 or not (word.isascii() and word.isalpha()):
        return word
    step1a = word[:-1] if word.endswith("s") and not word.endswith("ss") else word
    for bare in (word, step1a):
        if bare in _BARE_STEP1_SUFFIXES:
            return _BARE_STEP1_SUFFIXES[bare]
    with _porter_lock:
        return str(_porter.stemWord(word))
