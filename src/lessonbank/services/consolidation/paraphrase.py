"""What two lessons of one scope are to each other, from their words alone: the same advice in other
words (a paraphrase), opposite advice about the same thing (a contradiction), or two lessons.

Pure and deterministic; no LLM, no store. Used by the consolidation pre-pass (:mod:`.prepass`).

- **Terms**: each text's content words, stemmed (the stems the lexical index keeps), with a few
  synonyms folded ("execute" → "run", "prior to" → "before") and the cues of polarity and contrast
  left out ("not", "never", "avoid", "rather than", "instead of"). Weighted by their inverse document
  frequency among the lessons compared (:class:`Weights`): a word every lesson uses tells little.
- **Likeness**: the weighted Dice overlap of two texts' terms (order ignored: "Before pushing, run the
  linter" and "Run the linter before pushing" are 1.0).
- **Opposition**, the only evidence of a contradiction, between two one-sentence texts (at most
  :data:`OPPOSITION_WORDS` words): one negates and the other does not ("remove X" negates; a contrast
  such as "use X, not Y" or "X rather than Y" does not), or each holds one side of an opposite pair
  the other lacks (always / never, use / avoid, before / after, enable / disable, …). In a paragraph a
  "not" is about some clause: two explanations of one problem differ in them at random.
- **Siblings are not paraphrases** (:func:`siblings`): texts naming different things
  (:func:`named_apart`: ``*args`` / ``**kwargs``, D203 / D211, AES / CBC); one word of its own on each
  side or one word added, everything else shared; and, between one-sentence texts (or their short
  first sentences, what a rule checks), opposite places, two words swapped, negations on different
  words, a qualifier added in one word order (:data:`QUALIFIER`), one template with a slot filled
  differently (:data:`SLOT`, :data:`TEMPLATE`), or one rationale after different subjects
  (:data:`RATIONALE`; or short first sentences of one frame, each with a subject of its own, then one
  explanation: :data:`FRAME_RATIONALE`); and two documents of paragraphs whose opening statements
  differ in their terms (:func:`headed_apart`: "Checks for *third-party* imports ..." / "Checks for
  *standard library* imports ...", one rationale after). They are two lessons, however close their vectors.
  So are two lessons of two sentences that share one and differ in the other (:func:`sentences_apart`,
  asked by :func:`relation` with the bank's term weights): one situation, two corrections; one short
  statement of one template about two subjects, neither named in the other text (:func:`subjects_apart`:
  "*Telnet* is considered insecure ..." / "*FTP* is considered insecure ..."); and a rule against the
  same rule with a clause that makes an exception (:func:`excepted`: "removed in 3.0" / "removed in
  3.0; it still works ... but").

:func:`relation` applies these guards: opposed (and about one subject, :data:`CONTRADICTION`) is a
contradiction candidate; siblings or naming different things is two lessons; otherwise a paraphrase
when the likeness is at least ``paraphrase`` (:data:`PARAPHRASE` by default; the pre-pass passes 0 and
lets its pair scorer, :mod:`.scorer`, decide). Figures: ``bench/consolidation_pairs.py``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Literal

from lessonbank.services.consolidation.framing import reports, unframed
from lessonbank.text import STOPWORDS, literals, negations, same_lesson, stem, words

TEMPLATE = 0.7  # word-sequence likeness at or above which two texts each with a term of its own are siblings
SLOT = 2  # terms of its own each side may have for two texts of one template to be siblings
FIRST_WORDS = 15  # a first sentence this short says what the text is about: siblings are asked of it
RATIONALE = 0.75  # term Dice: subjects below it, the rest at or above it, are two rules of one rationale
# Term Dice of what follows two short first sentences of one frame (word-sequence likeness from QUALIFIER),
# each naming a subject of its own, from which the two are rules of one rationale. Chosen on the tuning
# half (bench/consolidation_pairs.py): no labelled paraphrase of it is vetoed.
FRAME_RATIONALE = 0.45
QUALIFIER = 0.5  # word-sequence likeness from which a text adding one or two words is a sibling
PARAPHRASE = 0.8  # weighted Dice of terms at or above which two unopposed texts are one lesson
OPPOSITION_WORDS = 30  # longer texts are not opposed by a negation or an opposite word alone
CONTRADICTION = 0.7  # weighted Dice at or above which two opposed texts are about the same thing
# Weighted term Dice under which a sentence has no counterpart in the other text (:func:`sentences_apart`,
# texts of SENTENCES sentences). Chosen on the tuning half and the remixed reflections of
# bench/consolidation_prepass.py: 0.5 / 0.6 keep recall 0.301 / 0.295 and leave 169 / 103 clusters of 10k
# remixed lessons joining other problems (755 without the guard). A shared sentence asked only to be
# alike (Dice 0.8) also vetoed rewordings: recall 0.289.
OWN_SENTENCE = 0.5
SENTENCES = 2

Relation = Literal["paraphrase", "contradiction"]

# Contrasts that name the alternative, not a negation of the advice: "use Edit, not a rewrite".
_CONTRAST = re.compile(
    r"(?:,|;|—|-|\band)\s*(?:but\s+)?not\b|\brather than\b|\binstead of\b|\bnot\s+just\b", re.I
)
_NEGATION = re.compile(
    r"\b(not|never|don't|dont|doesn't|avoid|avoids|avoiding|shouldn't|mustn't|can't|cannot|no)\b"
    r"|\bdo\s+not\b",
    re.I,
)
_REMOVAL = re.compile(r"\b(remove|removing|delete|deleting|drop|dropping|strip|stripping)\b", re.I)
# Opposite pairs (stems). Each side is a set of stems meaning the same.
_OPPOSITES: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(stem(w) for w in a.split()), frozenset(stem(w) for w in b.split()))
    for a, b in (
        ("always", "never"),
        ("use using prefer", "avoid"),
        ("before prior", "after"),
        ("enable enabled", "disable disabled"),
        ("allow allowed permit", "forbid forbidden disallow disallowed"),
        ("add", "remove"),
        ("include", "exclude"),
        ("increase raise", "decrease lower"),
        ("first", "second last"),
        ("required require", "allowed"),
        ("above", "below"),
        ("open", "close"),
        ("start", "stop"),
        ("true", "false"),
        ("single", "double"),
        ("one", "multiple several"),
        ("preceded", "followed"),
    )
)
# Opposite places ("whitespace *before* / *after* keywords") and counts ("string literals on *one* line" /
# "over *multiple* lines") oppose two texts only when both prescribe ("the summary should start at the
# *first* / *second* line"); otherwise they are two lessons.
_POSITIONAL = frozenset(
    pair
    for pair in _OPPOSITES
    if pair[0] & {stem(w) for w in ("before", "first", "above", "preceded", "one")}
)
_MODAL = re.compile(r"\b(should|must|always|never|only|required)\b", re.I)
_OPPOSITE_STEMS = frozenset(term for pair in _OPPOSITES for side in pair for term in side)
_SYNONYMS = {
    stem(a): stem(b)
    for a, b in (
        ("execute", "run"),
        ("executing", "run"),
        ("prior", "before"),
        ("employ", "use"),
        ("utilize", "use"),
        ("prefer", "use"),
        ("repo", "repository"),
        ("finishes", "end"),
        ("finish", "end"),
        ("ends", "end"),
        ("rewriting", "rewrite"),
        ("whole", "full"),
        ("entire", "full"),
        ("modify", "change"),
        ("alter", "change"),
        ("verify", "check"),
        ("ensure", "check"),
    )
}
# Words that carry polarity, contrast or emphasis, not the subject: left out of the terms.
_CUES = frozenset(
    stem(w)
    for w in (
        [
            "not",
            "never",
            "avoid",
            "always",
            "rather",
            "than",
            "instead",
            "dont",
            "don",
            "doesn",
            "no",
            "should",
            "must",
        ]
    )
)


@lru_cache(maxsize=65536)
def terms(text: str) -> frozenset[str]:
    """The text's content stems, synonyms folded, cues of polarity and contrast left out; its opening
    frame ("Checks for", "Used when": :func:`.framing.unframed`) is not read."""
    found = set()
    for word in words(unframed(text)):
        if word in STOPWORDS:
            continue
        term = stem(word)
        term = _SYNONYMS.get(term, term)
        if term not in _CUES:
            found.add(term)
    return frozenset(found)


@lru_cache(maxsize=65536)
def negated(text: str) -> bool:
    """Whether the text negates its advice ("do not", "never", "avoid", "remove", "no"), contrasts
    aside: "No whitespace allowed around the docstring" and "Remove the whitespace around the
    docstring" both do."""
    return bool(_NEGATION.search(_CONTRAST.sub(" ", text)) or _REMOVAL.search(text))


@lru_cache(maxsize=65536)
def _stems(text: str) -> frozenset[str]:
    return frozenset(stem(word) for word in words(text))


def opposed(a: str, b: str) -> bool:
    """Evidence that two one-sentence texts give opposite advice: one negates and the other does
    not, or each holds one side of an opposite pair that the other lacks. Texts of several sentences
    (or more than :data:`OPPOSITION_WORDS` words) are never opposed by these cues: in a paragraph a
    "not" or a "before" is about some clause, and two explanations of one problem differ in them
    at random (a third of the labelled paraphrases of several sentences had one negation more)."""
    if not (_one_sentence(a) and _one_sentence(b)):
        return False
    if negated(a) != negated(b) and not (reports(a) or reports(b)):
        return True  # a report's negation describes the problem it finds (:func:`.framing.reports`)
    stems_a, stems_b = _stems(a), _stems(b)
    prescribed = bool(_MODAL.search(a) and _MODAL.search(b))
    return any(
        _split(stems_a, stems_b, one, other) and (prescribed or (one, other) not in _POSITIONAL)
        for one, other in _OPPOSITES
    )


# A word in capitals names a thing (AES / CBC, FTP, XML); so does one in the other text's lower case.
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,7}s?\b")
_UNWRITTEN = re.compile(r"[\s_`'\"]+")  # what differs between two writings of one name
_BARE_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SENTENCE = re.compile(r"[.!?](?:\s+|$)")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
PARAGRAPH = re.compile(r"\n[ \t]*\n")  # a blank line: a text of this is a document of paragraphs


@lru_cache(maxsize=65536)
def one_sentence(text: str) -> bool:
    """At most :data:`OPPOSITION_WORDS` words and one sentence: a text :func:`opposed` can hold."""
    return len(words(text)) <= OPPOSITION_WORDS and len(_SENTENCE.findall(text.strip())) <= 1


_one_sentence = one_sentence


def _split(
    stems_a: frozenset[str], stems_b: frozenset[str], one: frozenset[str], other: frozenset[str]
) -> bool:
    return bool(
        (stems_a & one and stems_b & other and not stems_a & other and not stems_b & one)
        or (stems_a & other and stems_b & one and not stems_a & one and not stems_b & other)
    )


def named_apart(a: str, b: str) -> bool:
    """Whether the two texts name different things: each names a code span, identifier or number that
    matches none the other names (``*args`` / ``**kwargs``, D203 / D211, ``sys.version[0]`` / ``[2]``).
    Two names match when the words of one are all words of the other (``hasattr`` / ``hasattr(x,
    '__call__')``, ``__init__`` / ``init``): one text naming more than the other is not naming
    different things. A bare number counts only between two one-sentence texts ("Pin numpy to 1.26"
    / "to 2.0"): in an explanation of several sentences it is an example ("a multiple of 3"), and two
    explanations of one problem pick different ones."""
    numbers = _one_sentence(a) and _one_sentence(b)
    named_a, named_b = _named_words(a, numbers), _named_words(b, numbers)
    return _unmatched(named_a, named_b, b) and _unmatched(named_b, named_a, a)


def _unmatched(one: tuple[_Name, ...], other: tuple[_Name, ...], text: str) -> bool:
    """Whether ``one`` holds a name matching none of ``other`` nor the words of ``text``. Names of the
    same words match only when they are written alike: ``{a} != {b}`` is not ``{a} == {b}``."""
    plain = _word_set(text)
    return bool(other) and any(
        not ((x[0] <= plain and not x[1]) or any(_match(x, y) for y in other)) for x in one
    )


def _match(x: _Name, y: _Name) -> bool:
    if x[1] or y[1]:  # an expression: written alike (``os`` is not ``os.chmod``)
        return x[1] == y[1]
    return x[0] == y[0]  # a word: the same word however marked (``__init__`` / ``init``)


@lru_cache(maxsize=65536)
def _word_set(text: str) -> frozenset[str]:
    return frozenset(words(text))


_Name = tuple[frozenset[str], str]  # a name's words, and how it is written when more than a word


# What a text's literals hold that names nothing: an ellipsis or a lone "#" or ",", abbreviations ("e.g."),
# links. Operators (`==`, `!=`, `*`) are names.
_NOT_A_NAME = re.compile(
    r"^(?:\.{2,}|…|#|,)$|^(?:e\.?g|i\.?e|etc)\.?$|://|\.(?:org|com|net|io|html?)\b", re.I
)


@lru_cache(maxsize=65536)
def _named_words(text: str, numbers: bool) -> tuple[_Name, ...]:
    named = [
        name
        for name in sorted(literals(text))
        if (numbers or not _BARE_NUMBER.fullmatch(name)) and not _NOT_A_NAME.search(name)
    ]
    named += _ACRONYM.findall(text)
    found = []
    for name in named:
        written = _UNWRITTEN.sub("", name).lower()
        found.append((frozenset(words(name)) or frozenset([name]), "" if written.isalnum() else written))
    return tuple(found)


def siblings(a: str, b: str) -> bool:
    """Two lessons of one template: they name different things (:func:`named_apart`); or each has
    exactly one term the other lacks, or one has one term more, everything else shared ("*getattr*"
    / "*setattr* with a constant attribute value", "public *nested* class"); or, both one sentence,
    they hold opposite places ("whitespace *before* / *after* keywords"), swap two words ("expected
    *mapping* but got *sequence*" / the reverse), negate different things, one adds a qualifier of one
    or two words to the other in one word order ("Unnecessary list comprehension *(rewrite as a set
    comprehension)*", :data:`QUALIFIER`; "Run the *full* test *suite* before you commit" / "Always run
    the tests before committing" rewords, 0.43),
    or they fill one template's slot differently (:data:`SLOT`, :data:`TEMPLATE`). In an explanation
    of several sentences the first two hold, and the others are asked of the first sentences (what
    an explanation is about): a word more or less further on is wording, not the lesson."""
    if named_apart(a, b) or headed_apart(a, b) or subjects_apart(a, b) or excepted(a, b):
        return True
    terms_a, terms_b = terms(a), terms(b)
    only_a, only_b = len(terms_a - terms_b), len(terms_b - terms_a)
    shared = len(terms_a & terms_b)
    if shared >= 2 and sorted((only_a, only_b)) in ([0, 1], [1, 1]):
        return True
    if _one_sentence(a) and _one_sentence(b):
        return _one_template(a, b)
    first_a, first_b = _first_sentence(a), _first_sentence(b)
    if first_a == a or first_b == b or same_text(first_a, first_b):
        return False
    # "Checks that async functions do not *create subprocesses* / *run processes* ...": short first
    # sentences (what a rule checks) are asked everything; long ones (a diagnosis) one word each
    # side or two swapped ("Useless *comparisons* / *expressions* have no effect ...").
    if len(lower_words(first_a)) <= FIRST_WORDS and len(lower_words(first_b)) <= FIRST_WORDS:
        return _one_template(first_a, first_b) or _shared_rationale(a, b, first_a, first_b)
    terms_a, terms_b = terms(first_a), terms(first_b)
    only = sorted((len(terms_a - terms_b), len(terms_b - terms_a)))
    return (len(terms_a & terms_b) >= 2 and only == [1, 1]) or swapped(first_a, first_b)


def subjects_apart(a: str, b: str) -> bool:
    """Two texts, one of several sentences, holding one short sentence each of one template whose
    subject differs, and neither subject found anywhere in the other text: "*Telnet* is considered
    insecure. Use SSH ..." / "*FTP*-related functions are being called. *FTP* is considered insecure.
    Use SSH/SFTP/SCP ...". One statement about two things is two lessons, however much the advice
    around it is shared; two tellings of one lesson name its subject in both."""
    if _one_sentence(a) and _one_sentence(b):
        return False  # asked by the one-sentence rules of :func:`siblings`
    terms_a, terms_b = terms(a), terms(b)
    for x in _clauses(a):
        for y in _clauses(b):
            own_x, own_y = terms(x) - terms(y), terms(y) - terms(x)
            if len(own_x) != 1 or len(own_y) != 1 or len(terms(x) & terms(y)) < 2:
                continue
            if len(lower_words(x)) > FIRST_WORDS or len(lower_words(y)) > FIRST_WORDS:
                continue
            if own_x & terms_b or own_y & terms_a:
                continue
            if template_likeness(x, y) >= TEMPLATE:
                return True
    return False


_CLAUSE_SPLIT = re.compile(r"(?<=[.!?;])\s+")
_CLAUSE_COMMA_SPLIT = re.compile(r"(?<=[.!?;,])\s+")


@lru_cache(maxsize=65536)
def _clauses(text: str) -> tuple[str, ...]:
    """The text's sentences and comma clauses that hold a content term ("Do not call setattr with a
    constant attribute value, it is not any safer ..." opens with a statement of its own)."""
    parts = [part.strip(" ,;") for part in _CLAUSE_COMMA_SPLIT.split(text.strip())]
    return tuple(part for part in parts if terms(part))


_EXCEPTION = re.compile(r"\b(but|however|still|unless|except)\b", re.I)


def excepted(a: str, b: str) -> bool:
    """One text is every clause of the other plus a clause that makes an exception ("`X` is removed in
    Airflow 3.0" / "`X` is removed in Airflow 3.0; *it still works* in Airflow 3.0 *but* is expected to
    be removed in a future version"): a rule and the rule with its exception are two lessons, and
    merging them loses the exception."""
    short, long = sorted((a, b), key=len)
    parts_short = [part for part in _CLAUSE_SPLIT.split(short.strip()) if terms(part)]
    parts_long = [part for part in _CLAUSE_SPLIT.split(long.strip()) if terms(part)]
    if not parts_short or len(parts_long) <= len(parts_short):
        return False
    kept = {terms(part) for part in parts_short}
    if not kept <= {terms(part) for part in parts_long}:
        return False
    return any(_EXCEPTION.search(part) for part in parts_long if terms(part) not in kept)


def headed_apart(a: str, b: str) -> bool:
    """Two documents of several paragraphs whose opening sentences (each one's statement: "Checks for
    *third-party* imports ..." / "Checks for *standard library* imports ...") differ in their terms
    or name different things ("negated *`==`* operators" / "negated *`!=`* operators", each
    explanation naming both): two rules explained alike, however much of the explanation they share. A lesson written as a
    document states what it is about first; the shared rationale that follows is not a shared rule
    (on 950 ruff rule documents the scorer joined 66 into 29 clusters by it)."""
    heading_a, heading_b = _heading(a), _heading(b)
    if not heading_a or not heading_b or same_text(heading_a, heading_b):
        return False
    return terms(heading_a) != terms(heading_b) or named_apart(heading_a, heading_b)


@lru_cache(maxsize=65536)
def _heading(text: str) -> str:
    """The opening sentence of a text of several paragraphs, else "" (a one-paragraph lesson has none:
    its first sentence may be any part of one diagnosis)."""
    parts = PARAGRAPH.split(text.strip(), maxsplit=1)
    return _first_sentence(parts[0]) if len(parts) > 1 else ""


def sentences_apart(a: str, b: str, weights: Weights) -> bool:
    """Two texts of two sentences that share one (the same terms: the same sentence, retyped or
    reordered) while each has one the other has nothing like (under :data:`OWN_SENTENCE` of weighted
    terms with every sentence of the other): "The function fails for empty lists. *Check the length
    first.*" / "The function fails for empty lists. *Return 0 for them.*" are two lessons about one
    situation. A lesson of two sentences is a situation and what to do: half of it copied is half a
    lesson, and two tellings of one lesson reword both halves. The terms are weighted
    (:class:`Weights`): words every lesson opens with ("The implementation is incorrect because ...")
    make two sentences alike without making them one."""
    parts_a, parts_b = _sentences(a), _sentences(b)
    if len(parts_a) != SENTENCES or len(parts_b) != SENTENCES:
        return False
    if not any(terms(x) == terms(y) for x in parts_a for y in parts_b):
        return False
    own_a = min(max(_sentence_likeness(x, y, weights) for y in parts_b) for x in parts_a)
    own_b = min(max(_sentence_likeness(y, x, weights) for x in parts_a) for y in parts_b)
    return own_a < OWN_SENTENCE and own_b < OWN_SENTENCE


def _sentence_likeness(x: str, y: str, weights: Weights) -> float:
    return 1.0 if same_text(x, y) else weights.likeness(x, y)


@lru_cache(maxsize=65536)
def _sentences(text: str) -> tuple[str, ...]:
    """The text's sentences that hold a content term (an example's "e.g." splits nothing of weight)."""
    parts = [part.strip() for part in _SENTENCE_SPLIT.split(text.strip())]
    return tuple(part for part in parts if terms(part))


def _one_template(a: str, b: str) -> bool:
    """The rules of :func:`siblings` for two one-sentence texts."""
    terms_a, terms_b = terms(a), terms(b)
    only_a, only_b = len(terms_a - terms_b), len(terms_b - terms_a)
    shared = len(terms_a & terms_b)
    if shared >= 2 and sorted((only_a, only_b)) in ([0, 1], [1, 1]):
        return True
    if any(_split(_stems(a), _stems(b), *pair) for pair in _POSITIONAL) or swapped(a, b):
        return True
    if negated(a) and negated(b) and _negated_terms(a) != _negated_terms(b) and terms_a == terms_b:
        return True  # "shebang present but file *not* executable" / "file executable but *no* shebang"
    if min(only_a, only_b) == 0 and 0 < max(only_a, only_b) <= SLOT and shared >= 2:
        return template_likeness(a, b) >= QUALIFIER
    slot = min(only_a, only_b) > 0 and max(only_a, only_b) <= SLOT
    return slot and template_likeness(a, b) >= TEMPLATE


def _shared_rationale(a: str, b: str, first_a: str, first_b: str) -> bool:
    """Two rules that check different things for one reason: what each checks (its short first
    sentence) differs, what follows is nearly the same ("Checks for *over-indented section
    underlines*. This rule enforces a consistent style ..." / "Checks for *section headers not
    followed by underlines*. This rule enforces a consistent style ..."); or the two first sentences
    are one frame (:data:`QUALIFIER`) each with a subject of its own and what follows shares
    :data:`FRAME_RATIONALE` of its terms ("Checks for *abstract classes without abstract methods*." /
    "Checks for *empty methods in abstract base classes* ...", then one explanation of abstract base
    classes). Two documentations of one check by two authors word their first sentences apart."""
    rest = _dice(terms(a[len(first_a) :]), terms(b[len(first_b) :]))
    subject_a, subject_b = terms(first_a), terms(first_b)
    if _dice(subject_a, subject_b) < RATIONALE and rest >= RATIONALE:
        return True
    own = subject_a - subject_b and subject_b - subject_a
    return bool(own) and rest >= FRAME_RATIONALE and template_likeness(first_a, first_b) >= QUALIFIER


def _dice(a: frozenset[str], b: frozenset[str]) -> float:
    return 2.0 * len(a & b) / (len(a) + len(b)) if a or b else 1.0


@lru_cache(maxsize=65536)
def _first_sentence(text: str) -> str:
    found = _SENTENCE.search(text.strip())
    return text.strip()[: found.start() + 1] if found and found.end() < len(text.strip()) else text.strip()


@lru_cache(maxsize=65536)
def _negated_terms(text: str) -> frozenset[str]:
    """The first content term after each negation cue: what the text says is not so."""
    found = set()
    for match in _NEGATION.finditer(_CONTRAST.sub(" ", text)):
        following = _sequence(text[match.end() :])
        if following:
            found.add(_SYNONYMS.get(following[0], following[0]))
    return frozenset(found)


def swapped(a: str, b: str) -> bool:
    """The same content words in the same places but two of them swapped."""
    seq_a, seq_b = _sequence(a), _sequence(b)
    if len(seq_a) != len(seq_b) or seq_a == seq_b:
        return False
    differ = [i for i, (x, y) in enumerate(zip(seq_a, seq_b, strict=True)) if x != y]
    return len(differ) == 2 and seq_a[differ[0]] == seq_b[differ[1]] and seq_a[differ[1]] == seq_b[differ[0]]


@lru_cache(maxsize=65536)
def _sequence(text: str) -> tuple[str, ...]:
    return tuple(stem(word) for word in words(text) if word not in STOPWORDS)


@lru_cache(maxsize=65536)
def template_likeness(a: str, b: str) -> float:
    """How much of the two texts is one sequence of words in one order (difflib's ratio, in [0, 1]):
    "Missing return type annotation for *special method* / *classmethod* ``{name}``" is 0.8; a
    paraphrase reorders ("Before pushing, run the linter" / "Run the linter before pushing": 0.6) or
    rewords, and keeps its terms."""
    return SequenceMatcher(None, lower_words(a), lower_words(b), autojunk=False).ratio()


@lru_cache(maxsize=65536)
def lower_words(text: str) -> tuple[str, ...]:
    """The words :func:`template_likeness` aligns (computed once per text)."""
    return tuple(words(text.lower()))


@lru_cache(maxsize=65536)
def _signature(text: str) -> tuple[tuple[str, ...], frozenset[str], int]:
    return (
        tuple(dict.fromkeys(stem(w) for w in words(text) if w not in STOPWORDS)),
        literals(text),
        negations(text),
    )


def same_text(a: str, b: str) -> bool:
    """:func:`~lessonbank.text.same_lesson`, asked only when the two texts' content stems, literals and
    negation counts (each computed once per text) are equal: a pre-pass asks it of thousands of pairs."""
    return a == b or (_signature(a) == _signature(b) and same_lesson(a, b))


@dataclass
class Weights:
    """Inverse document frequencies of terms among the lessons compared (smoothed, so a term of
    one lesson in two weighs more than one in every lesson, and none weighs 0)."""

    frequency: Counter[str] = field(default_factory=Counter)
    documents: int = 0
    words: int = 0
    _vectors: dict[str, tuple[dict[str, float], float]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, texts: Iterable[str]) -> Weights:
        weights = cls()
        for text in texts:
            found = terms(text)
            weights.frequency.update(found)
            weights.documents += 1
            weights.words += len(found)
        return weights

    def average_length(self) -> float:
        """The lessons' average count of distinct terms (BM25's length normalization)."""
        return self.words / self.documents if self.documents else 0.0

    def weight(self, term: str) -> float:
        return math.log(1.0 + (self.documents + 1) / (self.frequency.get(term, 0) + 1))

    def vector(self, text: str) -> tuple[dict[str, float], float]:
        """The text's terms with their weights, and their sum (kept: the pre-pass asks again)."""
        found = self._vectors.get(text)
        if found is None:
            weighted = {term: self.weight(term) for term in terms(text)}
            found = self._vectors[text] = (weighted, sum(weighted.values()))
        return found

    def likeness(self, a: str, b: str, *, drop: frozenset[str] = frozenset()) -> float:
        """Weighted Dice overlap of the two texts' terms (less ``drop``), in [0, 1]."""
        if not drop:
            (weights_a, total_a), (weights_b, total_b) = self.vector(a), self.vector(b)
            shared = sum(weights_a[t] for t in weights_a.keys() & weights_b.keys())
            return 2.0 * shared / (total_a + total_b) if total_a + total_b else 0.0
        terms_a, terms_b = terms(a) - drop, terms(b) - drop
        total = sum(self.weight(t) for t in terms_a) + sum(self.weight(t) for t in terms_b)
        if not total:
            return 0.0
        return 2.0 * sum(self.weight(t) for t in terms_a & terms_b) / total


def relation(
    a: str,
    b: str,
    weights: Weights,
    *,
    cosine: float | None = None,
    min_cosine: float = 1.1,
    paraphrase: float | None = None,
    contradiction: float | None = None,
) -> Relation | None:
    """What ``b`` is to ``a`` (see the module docstring); None for two lessons. ``cosine`` is the
    pair's vector similarity when an embedder is configured, counted from ``min_cosine`` on."""
    if named_apart(a, b):
        return None
    likeness = weights.likeness(a, b)
    paraphrase = PARAPHRASE if paraphrase is None else paraphrase
    contradiction = CONTRADICTION if contradiction is None else contradiction
    if opposed(a, b):  # about the same thing once the opposite words are left out
        same_subject = weights.likeness(a, b, drop=_OPPOSITE_STEMS)
        return "contradiction" if same_subject >= contradiction else None
    if siblings(a, b) or sentences_apart(a, b, weights):
        return None
    close = cosine is not None and cosine >= min_cosine
    return "paraphrase" if likeness >= paraphrase or close else None
