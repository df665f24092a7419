"""Lexical relevance, the same in every store: terms, BM25, field weights, term vectors.

Invariants:

- Lexical relevance is BM25 (``BM25_K1``, ``BM25_B``, Lucene's IDF: :func:`idf`) over one
  document per lesson: its content, tags and ``learned_from`` tokenised and Porter-stemmed
  (:func:`field_terms`) as SQLite's FTS5 ``porter`` tokenizer does, so every backend matches
  the same words; each field's term frequencies are scaled by its weight and the document
  length counts every field (as FTS5's ``bm25()`` with column weights does).
- Recall ranks by every query word. Only the near-duplicate check on each write bounds its
  work (``POSTINGS_BUDGET``, ``choose_terms``): words held by more lessons act as stopwords
  there; when every word is that common, the newest lessons holding the rarest word are taken.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from lessonbank.models import Lesson
from lessonbank.text import stem, words

# The near-duplicate check reads at most about this many postings; words held by more lessons act
# as stopwords there.
POSTINGS_BUDGET = 1500
# ... and matches at most this many of the new lesson's words (rarest first).
MAX_MATCH_TERMS = 12
# Document frequencies at or above this are cached (counting them is what costs; rare words are
# cheap to count and their counts matter exactly).
CACHED_MIN_DF = 64
# BM25 weight of each indexed field: where a lesson was learned counts, but less than what it says.
# SQLite's FTS5 columns are (content, tags, learned_from) in this order. The weight 0.75 and k1 = 0.9
# (with Lucene's IDF) were chosen on half of bench/retrieval.py's cases at 10k lessons, among
# weights 0.5 / 0.75 / 1.0 and (k1, b) of (1.2, 0.75), (0.9, 0.75), (1.2, 0.6); the other half and
# the 100k bank are reported in bench/README.md. Code-only queries gained most (recall@5 0.707 →
# 0.764 on the tuning half), message-and-code queries stayed level.
FIELD_WEIGHTS: dict[str, float] = {"content": 1.0, "tags": 1.0, "learned_from": 0.75}
BM25_K1 = 0.9
BM25_B = 0.75


def field_terms(lesson: Lesson) -> dict[str, list[str]]:
    """The stemmed tokens of each indexed field of a lesson (repeats kept)."""
    return text_field_terms(lesson.content, lesson.tags, lesson.learned_from)


def text_field_terms(content: str, tags: Sequence[str], learned_from: str | None) -> dict[str, list[str]]:
    """The stemmed tokens of each indexed field, from the fields' values."""
    return {
        "content": [stem(w) for w in words(content)],
        "tags": [stem(w) for tag in tags for w in words(tag)],
        "learned_from": [stem(w) for w in words(learned_from or "")],
    }


def tokens(text: str) -> list[str]:
    """``words(text)``, faster on ASCII text (most text): one lowercasing, translation and split. Only
    ASCII: lowercasing some other letters changes where a word ends ("İ" lowercases to "i" and a
    combining dot, which is no word character)."""
    return text.lower().translate(_ASCII_SPACES).split() if text.isascii() else words(text)


# ``words``' pattern on lowercased ASCII is ``[a-z0-9]+``: every other ASCII character made a space
# and the text split there gives the same words (twice as fast as the regex on long text).
_ASCII_SPACES = str.maketrans({code: " " for code in range(128) if not re.fullmatch("[a-z0-9]", chr(code))})


def word_frequencies(
    content: str, tags: Sequence[str], learned_from: str | None, weights: Mapping[str, float] = FIELD_WEIGHTS
) -> tuple[dict[str, float], int]:
    """Each distinct (unstemmed) word's term frequency summed over the indexed fields, each field's
    scaled by its weight (missing: 1.0), in order of first appearance, and the document length in
    tokens: one tokenisation per field, and each distinct word stemmed once by the caller."""
    frequencies: dict[str, float] = {}
    get = frequencies.get
    length = 0
    for name, text in (("content", content), ("tags", " ".join(tags)), ("learned_from", learned_from)):
        if not text:
            continue
        found = tokens(text)
        length += len(found)
        weight = weights.get(name, 1.0)
        for word in found:
            frequencies[word] = get(word, 0.0) + weight
    return frequencies, length


def weighted_terms(lesson: Lesson, weights: Mapping[str, float]) -> tuple[dict[str, float], int]:
    """Each token's term frequency summed over the fields, each field's scaled by its weight
    (missing: 1.0), and the document length in tokens (all fields, unweighted, as FTS5 counts)."""
    aside = weights.get("learned_from", 1.0)
    if weights.get("content", 1.0) == 1.0 and weights.get("tags", 1.0) == 1.0 and _exact_weight(aside):
        return _counted_terms(lesson.content, lesson.tags, lesson.learned_from, aside, _STEMS, _stem_kept)
    by_word, length = word_frequencies(lesson.content, lesson.tags, lesson.learned_from, weights)
    stems: list[Any] = list(map(_STEMS.get, by_word))  # None for a word not kept yet
    if None in stems:
        stems = [_stem_kept(word) for word in by_word]
    frequencies: dict[str, float] = {}
    get = frequencies.get
    for term, tf in zip(stems, by_word.values(), strict=True):
        frequencies[term] = get(term, 0.0) + tf
    return frequencies, length


def _exact_weight(weight: float) -> bool:
    """Whether sums of ``weight`` and whole counts are exact in a double whatever their order: a
    multiple of 1/4, small (a lesson holds at most ``LESSON_MAX_CHARS`` tokens)."""
    return (weight * 4.0).is_integer() and abs(weight) <= 1024.0


def _counted_terms(
    content: str,
    tags: Sequence[str],
    learned_from: str | None,
    aside: float,
    kept: Mapping[str, Any],
    keep: Callable[[str], Any],
) -> tuple[dict[Any, float], int]:
    """Term frequencies (content and tags weighing 1, ``learned_from`` weighing ``aside``) keyed by
    what ``kept`` holds for each word (``keep`` adds a missing one), in order of first appearance, and
    the length: counted in C (``Counter`` over the mapped words) rather than a dict update per word.
    The same floats as adding the weights one word at a time: with an exact weight every partial sum
    is exact, so the order of the additions does not matter."""
    found = tokens(content)
    if tags:
        found += tokens(" ".join(tags))
    counts = Counter(map(kept.get, found))
    if None in counts:  # a word met for the first time
        counts = Counter(map(keep, found))
    frequencies = dict(zip(counts, map(float, counts.values()), strict=True))
    length = len(found)
    if learned_from:
        found = tokens(learned_from)
        length += len(found)
        get = frequencies.get
        for key in map(keep, found):
            frequencies[key] = get(key, 0.0) + aside
    return frequencies, length


# Word → stem and term → hash, as plain dicts read in one ``map`` per lesson (a cached function is a
# call per word). Bounded: a flood of unique words costs time, never memory.
_STEMS: dict[str, str] = {}
_TERM_HASHES: dict[str, int] = {}
_CACHE_MAX = 1 << 18
# The hashes _TERM_HASHES holds, and those two of its terms share (64 bits: none is known). While none
# is shared, terms whose hashes it holds have distinct hashes: a term vector is packed from them as
# they are, with no dict to merge terms of one hash.
_HELD_HASHES: set[int] = set()
_SHARED_HASHES: set[int] = set()


def _stem_kept(word: str) -> str:
    term = _STEMS.get(word)
    if term is None:
        term = stem(word)
        if len(_STEMS) < _CACHE_MAX:
            _STEMS[word] = term
    return term


def _hash_kept(term: str) -> int:
    hashed = _TERM_HASHES.get(term)
    if hashed is None:
        hashed = term_hash(term)
        if len(_TERM_HASHES) < _CACHE_MAX:
            if hashed in _HELD_HASHES:
                _SHARED_HASHES.add(hashed)
            _HELD_HASHES.add(hashed)
            _TERM_HASHES[term] = hashed
    return hashed


def weighted_frequencies(
    fields: Mapping[str, Sequence[str]], weights: Mapping[str, float]
) -> tuple[dict[str, float], int]:
    frequencies: dict[str, float] = {}
    length = 0
    for name, terms in fields.items():
        weight = weights.get(name, 1.0)
        length += len(terms)
        for term in terms:
            frequencies[term] = frequencies.get(term, 0.0) + weight
    return frequencies, length


# ----------------------------------------------------------------- term vectors
#
# A store that keeps term vectors writes one per lesson, in the lesson's own transaction, as a
# row of its vector table under LEXICAL_SPACE; the in-process lexical index
# (lessonbank.retrieval.lexical_index) follows them by the vectors' change sequence and ranks
# with exact BM25. A term vector is little-endian records of 16 bytes: (term hash u64, weighted
# term frequency f32, document length u32). The first record holds hash 0 and frequency 0, so a
# lesson without a word still counts in the namespace's lesson count and mean length. Records of
# frequency 0 name the lesson's scope (kind, agent, task type, goal, each tag: ``scope_hash``), so
# the index can take BM25's figures over exactly the lessons a filtered recall may return.

LEXICAL_SPACE = "lexical:terms-v1"
TERM_RECORD = struct.Struct("<QfI")


@lru_cache(maxsize=1 << 17)
def term_hash(term: str) -> int:
    """A term's 64-bit id (never 0, which marks the length record): the same in every process."""
    value = int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")
    return value or 1


# Word as ``words`` yields it → its stem's hash. Every write tokenises its lesson here, so the
# stemmer (slow) and the hash run once per distinct word; bounded, a flood of unique words
# costs time, never memory.
_WORD_HASHES: dict[str, int] = {}
_WORD_HASHES_MAX = 1 << 18


def _word_hash(word: str) -> int:
    hashed = _WORD_HASHES.get(word)
    if hashed is None:
        hashed = term_hash(stem(word))
        if len(_WORD_HASHES) < _WORD_HASHES_MAX:
            _WORD_HASHES[word] = hashed
    return hashed


SCOPE_FIELDS = ("kind", "agent", "task_type", "goal_id")
# The lesson fields a term vector is made of.
TERM_VECTOR_FIELDS = ("content", "tags", "learned_from", *SCOPE_FIELDS)


def scope_hash(field: str, value: str) -> int:
    """The id of a scope record (``field`` is one of SCOPE_FIELDS or ``tag``); words never hash here."""
    return term_hash(f"\x00{field}\x00{value}")


def term_vector(
    content: str,
    tags: Sequence[str],
    learned_from: str | None,
    scope: Mapping[str, str | None] | None = None,
) -> bytes:
    """A lesson's term vector (see above) from its indexed fields: the terms of
    :func:`text_field_terms`, weighted as :func:`weighted_frequencies` weighs them, then its scope
    (``scope``: values of SCOPE_FIELDS, and the tags)."""
    aside = FIELD_WEIGHTS["learned_from"]
    if FIELD_WEIGHTS["content"] == FIELD_WEIGHTS["tags"] == 1.0 and _exact_weight(aside):
        counted, length = _counted_terms(content, tags, learned_from, aside, _WORD_HASHES, _word_hash)
        return _packed(counted.keys(), counted.values(), length, scope or {}, tags)
    frequencies: dict[int, float] = {}
    get = frequencies.get
    length = 0
    for text, weight in (
        (content, FIELD_WEIGHTS["content"]),
        (" ".join(tags), FIELD_WEIGHTS["tags"]),
        (learned_from, FIELD_WEIGHTS["learned_from"]),
    ):
        if not text:
            continue
        found = tokens(text)
        length += len(found)
        for hashed in map(_word_hash, found):
            frequencies[hashed] = get(hashed, 0.0) + weight
    return _packed(frequencies.keys(), frequencies.values(), length, scope or {}, tags)


@lru_cache(maxsize=1024)
def _records(count: int) -> struct.Struct:
    """``count`` TERM_RECORDs packed in one call (the same bytes as packing each and joining them)."""
    return struct.Struct("<" + "QfI" * count)


def _packed(
    hashes: Collection[int],
    frequencies: Iterable[float],
    length: int,
    scope: Mapping[str, str | None],
    tags: Sequence[str],
) -> bytes:
    """The records of a term vector: length, each term hash's frequency (``hashes`` distinct, with
    ``frequencies`` in the same order), then the scope's."""
    scopes = [scope_hash(name, value) for name, value in scope.items() if value is not None]
    scopes += [scope_hash("tag", tag) for tag in dict.fromkeys(tags)]
    # One flat (hash, frequency, length) list packed in one call; slices fill it without a Python loop.
    terms = len(hashes)
    flat: list[float] = [0, 0.0, length] * (1 + terms + len(scopes))
    end = 3 * terms + 3
    flat[3:end:3] = hashes
    flat[4:end:3] = frequencies
    flat[end::3] = scopes
    flat[end + 1 :: 3] = [0.0] * len(scopes)
    return _records(len(flat) // 3).pack(*flat)


def term_vector_sql(
    content: str | None,
    tags: str | None,
    learned_from: str | None,
    kind: str | None,
    agent: str | None,
    task_type: str | None,
    goal_id: str | None,
) -> bytes:
    """``term_vector`` of a lessons row as SQL holds it (tags as a JSON array): the function
    SQLite's triggers call."""
    scope = {"kind": kind, "agent": agent, "task_type": task_type, "goal_id": goal_id}
    return term_vector(content or "", json.loads(tags) if tags else [], learned_from, scope)


def lesson_term_vector(lesson: Lesson) -> bytes:
    """``term_vector`` of a lesson: what a store that keeps term vectors writes with it."""
    scope = {name: getattr(lesson, name) for name in SCOPE_FIELDS}
    return term_vector(lesson.content, lesson.tags, lesson.learned_from, scope)


def weighted_term_vector(frequencies: Mapping[str, float], length: int, lesson: Lesson) -> bytes:
    """``lesson_term_vector(lesson)`` from what ``weighted_terms(lesson, FIELD_WEIGHTS)`` gave (the same
    terms in the same order): a store that already tokenised the lesson does not tokenise it again."""
    scope = {name: getattr(lesson, name) for name in SCOPE_FIELDS}
    hashes: list[Any] = list(map(_TERM_HASHES.get, frequencies))  # None for a term not kept yet
    if None not in hashes and not _SHARED_HASHES:  # distinct (see _HELD_HASHES)
        return _packed(hashes, frequencies.values(), length, scope, lesson.tags)
    # Terms of one hash are one record, as a dict keyed by the hashes keeps them.
    hashed = dict(zip(map(_hash_kept, frequencies), frequencies.values(), strict=True))
    return _packed(hashed.keys(), hashed.values(), length, scope, lesson.tags)


def term_vector_changed(lesson: Lesson, previous: Lesson | None) -> bool:
    """Whether rewriting ``previous`` as ``lesson`` changes its term vector (unknown: True)."""
    if previous is None:
        return True
    return any(getattr(lesson, name) != getattr(previous, name) for name in TERM_VECTOR_FIELDS)


def bm25_factors(frequencies: Mapping[str, float], length: int, avg_len: float) -> dict[str, float]:
    """Each term's BM25 factor in one document from its (weighted) term frequencies and length;
    indexes store them with the document, so ranking needs no per-document work at query time."""
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * length / (avg_len or length or 1.0))
    return {term: tf * (BM25_K1 + 1.0) / (tf + norm) for term, tf in frequencies.items() if tf > 0}


class FactorTexts(dict[float, str]):
    """The text (``repr``, which round-trips the double) of each term frequency's BM25 factor
    (:func:`bm25_factors`) at one length and mean length, worked out when first asked for: an import
    chunk's lessons share its mean, and ~100 lengths and ~15 frequencies make most of their factors,
    so each is worked out once a chunk instead of once a lesson."""

    def __init__(self, length: int, mean: float) -> None:
        super().__init__()
        self.length, self.mean = length, mean

    def __missing__(self, tf: float) -> str:
        text = self[tf] = repr(bm25_factors({"": tf}, self.length, self.mean)[""])
        return text


class ChunkFactorTexts(dict[tuple[int, float], FactorTexts]):
    """An import chunk's :class:`FactorTexts`, by (length, mean length), made when first asked for."""

    def __missing__(self, key: tuple[int, float]) -> FactorTexts:
        texts = self[key] = FactorTexts(*key)
        return texts


def query_terms(terms: Sequence[str]) -> list[str]:
    """Query words as the index holds them: stemmed, each once."""
    return list(dict.fromkeys(stem(term.lower()) for term in terms if term))


def idf(docs: int, df: int) -> float:
    """BM25's inverse document frequency as Lucene takes it, ln(1 + (N − df + 0.5)/(df + 0.5)): never
    negative, so a word held by most lessons still counts a little (FTS5's ln((N − df + 0.5)/(df + 0.5))
    floors it to nothing, which cost recall on code-only queries, whose words are common;
    bench/retrieval.py)."""
    ratio = (max(docs, df) - df + 0.5) / (df + 0.5)  # docs can lag df for a moment (cached counts)
    return math.log(1.0 + ratio)


def common_idf(docs: int, df: int) -> float:
    """The relevance every candidate gets when all query words are too common to rank by."""
    size = max(1, docs, df)
    return math.log(1.0 + (size - df + 0.5) / (df + 0.5))


def choose_terms(frequencies: dict[str, int]) -> tuple[list[str], tuple[int, str] | None]:
    """Rarest terms first while their postings fit the budget; plus the rarest term overall."""
    ranked = sorted((df, term) for term, df in frequencies.items() if df > 0)
    if not ranked:
        return [], None
    chosen, postings = [], 0
    for df, term in ranked[:MAX_MATCH_TERMS]:
        if postings + df > POSTINGS_BUDGET:
            break
        chosen.append(term)
        postings += df
    return chosen, ranked[0]


def match_terms(
    terms: Sequence[str], frequencies: dict[str, int], *, bounded: bool
) -> tuple[list[str], tuple[int, str] | None]:
    """The terms a search matches and the rarest one held (None when no lesson holds any): recall
    matches every held term, in query order; ``bounded`` (the near-duplicate check) takes
    :func:`choose_terms`."""
    if bounded:
        return choose_terms(frequencies)
    chosen = [term for term in terms if frequencies[term]]
    return chosen, min(((frequencies[term], term) for term in chosen), default=None)
