"""Small text helpers shared by the write path, recall and prompts.

Kept dependency-free and deterministic: the same text always gives the same tokens, hash
and truncation, so deduplication and job keys are stable across processes and versions.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable

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


def normalize(text: str) -> str:
    """Case- and whitespace-folded text: what counts as "the same content"."""
    return " ".join(text.lower().split())


def content_hash(namespace: str, kind: str, text: str) -> str:
    return hashlib.sha256(f"{namespace}\x1f{kind}\x1f{normalize(text)}".encode()).hexdigest()


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
