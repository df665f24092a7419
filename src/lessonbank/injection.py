"""Lesson text that reads as instructions to the model, not as a note from past experience.

A lesson is injected into the prompts of later tasks, so text that tries to steer the model
(role headers, "ignore previous instructions", "you are now…", requests to reveal keys, tokens,
environment variables or the system prompt, commands that fetch and run code or open a shell)
is kept for a person to approve ("quarantined") instead of recalled. The writing service applies
:func:`lesson_injection_reason` to every lesson it writes, whatever its source.

The text is read after NFKC folding (full-width letters), with zero-width characters removed and
whitespace folded, so trivial disguises read the same.

Lessons are often technical prose, so documentation must read as documentation: what tells an attack
apart is an imperative addressed to the model. Verbs that override, conceal or reveal count only at
the start of a clause or after "you must", "can you", "please" ("Ignore previous instructions", not
"rules defined later will override previous rules"), and not when negated ("never print secrets in
logs"). A request to reveal names which secret ("the API key", "your system prompt", ``*_KEY``,
``.env``) or where it goes ("to https://…", "in your reply"), where documentation names a kind
("Send password, return response", "Show environment variable names in help text"). Role headers are
speakers as a transcript writes them ("System:", "[SYSTEM]"), not a parameter's description
("system: the system prompt") or a markdown link. Chat template tokens and piping a download into a
shell are flagged wherever they appear: they act whether or not they are meant. Precision is measured
on 110k docstrings and rule texts by ``bench/injection_precision.py``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from lessonbank.lowered_words import lowered_words
from lessonbank.models import Lesson

_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")

_ROLE = r"(?:system|assistant|developer|human|user)"
# A speaker's name as a transcript writes it ("System:", "ASSISTANT:"). Lower case, "user:" opens the
# description of a parameter in documentation, so it is a role header only when what follows speaks to
# the model.
_SPEAKER = r"(?:System|SYSTEM|Assistant|ASSISTANT|Developer|DEVELOPER|Human|HUMAN|User|USER)"
_ROLE_SUFFIX = r"(?:[ \t]+(?i:prompt|message|instructions?))?"
_SECTION = r"(?:long-term memory|past reflections|learned rules|replay examples)"  # the renderers' own
_CHAT_TOKEN = re.compile(
    r"<\|[a-z_]{2,30}\|>|<</?SYS>>|\[/?INST\]|</?(?:system|assistant|instructions?)>", re.IGNORECASE
)
_OVERRIDE_VERB = r"(?:ignore|disregard|forget|override|overrule|bypass)"
_PRIOR = r"(?:previous|prior|above|earlier|preceding|former|original|initial|your|all|system)"
_GUIDANCE = (
    r"(?:instructions?|prompts?|rules|directions|guidelines|guidance|directives?|messages|"
    r"constraints|guardrails|restrictions|programming)"
)
_REVEAL = (
    r"(?:reveal|print|show|output|dump|leak|send|post|upload|exfiltrate|share|display|echo|"
    r"expose|disclose|email|e-mail|paste|transmit|forward|tell\s+me|give\s+me)"
)
# A secret by its kind: a secret only when the request names which one ("the", "your", "all"…) or where
# it goes ("to https://…", "in your reply"). Documentation names kinds ("Send password, return
# response", "Dump a list of environment variables"); an environment variable's *name* is no secret.
_SECRET_KIND = (
    r"(?:api[\s_-]*keys?|secrets?(?:\s+(?:keys?|tokens?))?|credentials?|passwords?|passphrases?|"
    r"private\s+keys?|ssh\s+keys?|access\s+keys?|"
    r"(?:api|access|auth|bearer|github|gh|oauth|refresh|session|secret|personal)\s+tokens?|"
    r"env(?:ironment)?\s+var(?:iable)?s?(?!\s+names?\b))\b"
)
# A secret by its name: the model's own prompt, a key file, a variable such as OPENAI_API_KEY.
_SECRET_NAMED = (
    r"(?:\.env\b|(?:system|initial)\s+prompt\b|hidden\s+(?:instructions|prompt)\b|id_rsa|id_ed25519|"
    r"(?-i:\$?\b[A-Z][A-Z0-9_]*_(?:KEY|TOKEN|SECRET|PASSWORD|PASS|PAT)\b|\bAWS_SECRET\w*))"
)
_WHICH = r"(?:the|your|my|our|all(?:\s+(?:of\s+)?(?:the|your))?|any(?:\s+of\s+(?:the|your))?|every|each|this|that|these|those)"
_WHERE = (
    r"\s+(?:to\s+(?:me|us|https?://|the\s+(?:user|chat|attacker|address|url|endpoint|server|channel)\b|"
    r"[\w.+-]+@|[\w-]+\.[a-z]{2,}/)|in\s+(?:your|the)\s+(?:answer|reply|response|output|report|message|chat)\b|"
    r"with\s+me\b|verbatim\b)"
)
_NEGATION = re.compile(
    r"\b(?:never|not|don't|dont|do\s+not|avoid|without|no|stop|must\s+not|mustn't|shouldn't|"
    r"should\s+not|refuse\s+to|instead\s+of)\s+(?:\w+\s+){0,2}$",
    re.IGNORECASE,
)
# Where an imperative addressed to the model stands: at the start of a clause (after a sentence's end,
# a colon, a comma, a line break, a bullet, "and"/"then"), or after "you must", "can you", "please",
# with fillers such as "now", "also", "just" in between. Documentation states what code does ("rules
# defined later will always override previous rules", "how to send that API key to the client"); an
# attack tells the reader what to do.
_ADDRESSED = re.compile(
    r"(?:\A|[.!?;:,(\n]|\b(?:and|then|or|but|so)|"
    r"\byou\s+(?:must|should|shall|will|need\s+to|have\s+to|are\s+to)|"
    r"\b(?:can|could|would|will)\s+you|\bi\s+(?:want|need)\s+you\s+to|\bplease)"
    r"[\s\"'*_#>•\d.)\]-]*"
    r"(?:(?:please|now|also|then|just|simply|first|always|immediately|kindly|and|so|instead|next|"
    r"finally|quietly|secretly|silently)[\s,]+)*$",
    re.IGNORECASE,
)
_WINDOW = 80  # characters before a verb searched for the start of its clause

# (reason, pattern, addressed): an addressed pattern counts only where an imperative addressed to the
# model stands (see _ADDRESSED) and is not negated.
_PATTERNS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    ("chat template token", _CHAT_TOKEN, False),
    (
        "role header",
        re.compile(
            r"(?:^|\n)[ \t>]*(?:"
            # "## System" on a line of its own; "[SYSTEM]" but not a link such as "[system prompt](url)"
            rf"#{{1,6}}[ \t]*(?i:{_ROLE}){_ROLE_SUFFIX}[ \t]*:?[ \t]*(?:\n|$)|"
            rf"\[[ \t]*(?i:{_ROLE}){_ROLE_SUFFIX}[ \t]*\](?!\()|"
            rf"(?:#{{1,6}}[ \t]*)?{_SPEAKER}{_ROLE_SUFFIX}[ \t]*:|"
            rf"(?i:{_ROLE}{_ROLE_SUFFIX}[ \t]*:[ \t]*(?:you|ignore|disregard|forget|obey|from\s+now\s+on)\b))"
        ),
        False,
    ),
    (
        "instruction header",
        re.compile(
            r"(?:^|\n)[ \t>]*(?i:"
            r"#{1,6}[ \t]*(?:new[ \t]+)?(?:system[ \t]+)?(?:instructions?|rules|prompt)[ \t]*:?[ \t]*(?:\n|$)|"
            rf"#{{1,6}}[ \t]*{_SECTION}\b|"
            rf"\[[ \t]*(?:(?:new[ \t]+)?(?:instructions?|rules|prompt)|{_SECTION})[ \t]*\](?!\())"
        ),
        False,
    ),
    (
        "override of instructions",
        re.compile(
            rf"\b{_OVERRIDE_VERB}\b(?:\s+\w+){{0,3}}?\s+{_PRIOR}(?:\s+\w+){{0,2}}?\s+{_GUIDANCE}\b",
            re.IGNORECASE,
        ),
        True,
    ),
    (
        "override of the prompt",
        re.compile(
            rf"\b{_OVERRIDE_VERB}\s+(?:all\s+|everything\s+|what\s+(?:is|was)\s+)?"
            r"(?:the\s+)?(?:above(?:\s+this\s+line)?|before|said\s+before|you\s+were\s+told)\b"
            # The text above as a whole, not an adjective ("ignore the above warning for this test").
            r"(?=\s*(?:$|[.,;:!?)\n]|and\b|then\b|or\b))",
            re.IGNORECASE,
        ),
        True,
    ),
    (
        "new identity",
        re.compile(
            r"\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|shall|should)\b|"
            r"\bpretend\s+(?:you\s+are|you're|that\s+you)\b|\bact\s+as\s+(?:an?\s+)?(?:unrestricted|"
            r"jailbroken|unfiltered|different|new)\b|\bjailbr[eo]a?k|"
            # Developer mode as a jailbreak, not the IDE's or Windows' ("install in developer mode").
            r"\bdeveloper\s+mode\s+(?:is\s+)?(?:enabled|activated|on)\b|\byou\s+are\s+in\s+developer\s+mode\b|"
            r"\bnew\s+(?:system\s+)?(?:instructions?|prompt|persona|role)\s*:|"
            r"\byour\s+new\s+(?:task|instructions?|role|goal)\s+is\b",
            re.IGNORECASE,
        ),
        False,
    ),
    (
        # Told to the reader, not said of code ("attributes pretend to be properties").
        "request to play a role",
        re.compile(
            r"\bpretend\s+to\s+be\s+(?:an?|the|my|your)\b|"
            r"\b(?:enable|activate|enter|switch\s+to|turn\s+on)\s+(?:the\s+)?developer\s+mode\b",
            re.IGNORECASE,
        ),
        True,
    ),
    (
        "message to the model",
        re.compile(
            # A heading that addresses the model ("Note to the AI: …"), not a mention of guidance
            # written for models ("there are also instructions for AI agents to use").
            r"\b(?:note|message|attention|instructions?)\s+(?:to|for)\s+(?:the\s+|all\s+|any\s+)?"
            r"(?:ai|assistant|llm|language\s+model|chatbot|model)s?\s*[:,!\u2013\u2014-]|"
            r"\bwhen\s+you\s+read\s+this\b",
            re.IGNORECASE,
        ),
        False,
    ),
    (
        "concealment from the user",
        re.compile(
            r"\b(?:secretly|silently|covertly)\s+(?:send|upload|post|run|execute|exfiltrate|copy|forward)\b|"
            r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this|it)\s+to|notify|alert)\s+"
            r"(?:the\s+)?(?:user|human|operator)\b",
            re.IGNORECASE,
        ),
        True,
    ),
    ("exfiltration", re.compile(r"\bexfiltrate\b", re.IGNORECASE), True),
    (
        "remote code execution",
        re.compile(
            r"\b(?:curl|wget|fetch|iwr|invoke-webrequest)\b[^\n|;]{0,200}\|\s*(?:sudo\s+)?"
            r"(?:ba|z|k|da)?sh\b|\b(?:ba)?sh\s+-c\s+[\"']?\$\((?:curl|wget)|/dev/tcp/|\bnc\s+(?:-\w+\s+)*-e\b|"
            r"\bbase64\s+(?:-d|--decode)\b[^\n]{0,80}\|\s*(?:ba)?sh\b|\bpowershell\b[^\n]{0,40}-enc|"
            r"\biex\s*\(|\brm\s+-rf\s+(?:/|~)(?:\s|$)",
            re.IGNORECASE,
        ),
        False,
    ),
    (
        "environment dump",
        re.compile(
            r"\bprintenv\b|\benv\s*\|\s*(?:curl|nc|wget)|print\s*\(\s*os\.environ\s*\)|"
            r"\bcat\s+[^\n]{0,40}(?:\.ssh/|\.env\b|\.aws/credentials|\.netrc)|"
            r"\bcurl\b[^\n]{0,120}(?:-d|--data\S*)\s+@(?:-|\S*\.env)",
            re.IGNORECASE,
        ),
        False,
    ),
    (
        "request to reveal secrets",
        re.compile(
            rf"\b{_REVEAL}\b(?:\s+(?:me|us))?\s+(?:"
            rf"{_WHICH}\s+(?:[\w'.-]+\s+){{0,3}}?(?:{_SECRET_KIND}|{_SECRET_NAMED})|"
            rf"(?:[\w'.-]+\s+){{0,2}}?{_SECRET_NAMED}|"
            rf"{_SECRET_KIND}{_WHERE})",
            re.IGNORECASE,
        ),
        True,
    ),
)

# Literal text (lowercase) a pattern cannot match without: a text holding none of them skips the
# pattern. Derived branch by branch from the patterns above (every branch holds one of them); the
# screen runs on every lesson written, and most lessons hold none of most patterns' words.
_OVERRIDE_VERBS = ("ignore", "disregard", "forget", "override", "overrule", "bypass")
_NEEDS: dict[str, tuple[str, ...]] = {
    "chat template token": ("<", "["),
    "role header": ("system", "assistant", "developer", "human", "user"),
    "instruction header": ("#", "["),
    "override of instructions": _OVERRIDE_VERBS,
    "override of the prompt": _OVERRIDE_VERBS,
    "new identity": ("now", "pretend", "act", "developer", "jailbr", "new"),
    "request to play a role": ("pretend", "developer"),
    "message to the model": ("note", "message", "attention", "instruction", "read"),
    "concealment from the user": (
        "secretly",
        "silently",
        "covertly",
        "tell",
        "inform",
        "mention",
        "notify",
        "alert",
    ),
    "exfiltration": ("exfiltrat",),
    "remote code execution": ("|", "$(", "/dev/tcp/", "-e", "iex", "-rf"),
    "environment dump": ("printenv", "|", "os.environ", ".ssh/", ".env", ".aws/", ".netrc", "@"),
    "request to reveal secrets": (
        "api",
        "secret",
        "credential",
        "password",
        "passphrase",
        "private",
        "ssh",
        "access",
        "token",
        "env",
        "prompt",
        "instructions",
        "id_rsa",
        "id_ed25519",
        "_key",
        "_pass",
        "_pat",
    ),
}


# Phrases (lowercase, words one space apart) a pattern whose _NEEDS are common words ("now" is in
# "know", "act" in "exact") cannot match without, looked for in the text with its whitespace folded;
# every branch of the pattern holds one of them. Looking is a few substring searches; the pattern
# itself is tried at every word start.
_PHRASES: dict[str, tuple[str, ...]] = {
    "new identity": (
        "you are now",
        "from now on",
        "pretend",
        "act as",
        "jailbr",
        "developer mode",
        "new system",
        "new instruction",
        "new prompt",
        "new persona",
        "new role",
        "your new",
    ),
}


def _folded(lowered: str) -> str:
    """``lowered`` as _PHRASES are looked for in it: whitespace runs one space, and the two i's that
    IGNORECASE matches as "i" ("ı", and "İ", which lowercases to "i" and a combining dot) made "i"."""
    return " ".join(lowered.split()).replace("\u0131", "i").replace("i\u0307", "i")


def _may_match(reason: str, lowered: str) -> bool:
    needs = _NEEDS.get(reason)
    return needs is None or any(fragment in lowered for fragment in needs)


# No fragment holds whitespace, so a fragment is in a text exactly when it is in one of the text's
# whitespace-separated words. Words repeat from text to text: what each one may match is worked out
# once (by _may_match on the word alone) and kept, so a text costs one split and a lookup per
# distinct word instead of a substring search of the whole text per fragment. Bounded: a flood of
# unique words costs time, never memory.
assert not any(char.isspace() for needs in _NEEDS.values() for fragment in needs for char in fragment)
_WORD_REASONS: dict[str, frozenset[str]] = {}
_WORD_REASONS_MAX = 1 << 17
# One object per distinct set of reasons: a set of equal but distinct frozensets compares each new one
# to the one it holds (found by identity, it does not), and most words share a few sets.
_SAME_REASONS: dict[frozenset[str], frozenset[str]] = {}


def _word_reasons(word: str) -> frozenset[str]:
    reasons = frozenset(reason for reason in _NEEDS if _may_match(reason, word))
    if len(_WORD_REASONS) < _WORD_REASONS_MAX:
        _WORD_REASONS[word] = reasons = _SAME_REASONS.setdefault(reasons, reasons)
    return reasons


def _possible(lowered: str) -> frozenset[str]:
    """The reasons :func:`_may_match` lets through for ``lowered`` (those without _NEEDS included)."""
    words = lowered_words(lowered)
    found: set[frozenset[str] | None] = set(map(_WORD_REASONS.get, words))
    if None in found:
        found.discard(None)
        found.update(_word_reasons(word) for word in set(words) if word not in _WORD_REASONS)
    return _UNGATED.union(*found)  # type: ignore[arg-type]


_UNGATED = frozenset(reason for reason, _pattern, _addressed in _PATTERNS if reason not in _NEEDS)


def normalized(text: str) -> str:
    """``text`` as read for screening: NFKC, invisible characters removed, line breaks kept."""
    if text.isascii():
        # NFKC leaves ASCII as it is and every invisible character is not ASCII; printable ASCII holds
        # no line break and no whitespace but " ", so without a run of spaces or one at either end
        # there is nothing to fold (most text).
        if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
            return text
    else:
        text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


@dataclass(frozen=True)
class Finding:
    """Why a text reads as instructions to the model, and the words that made it read so."""

    reason: str
    matched: str


def _addressed(text: str, start: int) -> bool:
    """Whether the verb at ``start`` is an imperative addressed to the reader, and not negated."""
    if not _ADDRESSED.search(text, max(0, start - _WINDOW), start):
        return False
    return not _NEGATION.search(text, max(0, start - _WINDOW), start)


def screen(text: str) -> Finding | None:
    """The first instruction-like passage of ``text``, or None when it reads as a lesson."""
    if not text:
        return None
    text = normalized(text)
    lowered = text.lower()
    folded: str | None = None  # ``lowered`` with every run of whitespace one space, made when needed
    possible = _possible(lowered)
    for reason, pattern, addressed in _PATTERNS:
        if reason not in possible:
            continue
        phrases = _PHRASES.get(reason)
        if phrases is not None:
            if folded is None:
                # One line of ASCII from normalized() is folded already.
                folded = lowered if lowered.isascii() and "\n" not in lowered else _folded(lowered)
            if not any(phrase in folded for phrase in phrases):
                continue
        if not addressed:
            if match := pattern.search(text):
                return Finding(reason, match.group(0))
            continue
        for match in pattern.finditer(text):
            if _addressed(text, match.start()):
                return Finding(reason, match.group(0))
    return None


def injection_reason(text: str) -> str | None:
    """Why ``text`` reads as instructions to the model, or None when it reads as a lesson."""
    finding = screen(text)
    return finding.reason if finding else None


def lesson_texts(lesson: Lesson) -> list[str]:
    """Every text of ``lesson`` that a context block renders."""
    metadata = [lesson.metadata.get(key) for key in ("goal_title", "result")]
    fields = [lesson.content, lesson.situation, lesson.mistake, lesson.correction, lesson.trigger, *metadata]
    return [field for field in fields if isinstance(field, str) and field]


def lesson_injection_reason(lesson: Lesson) -> str | None:
    """Why ``lesson`` reads as instructions to the model (the first text that does), or None."""
    for text in lesson_texts(lesson):
        reason = injection_reason(text)
        if reason is not None:
            return reason
    return None
