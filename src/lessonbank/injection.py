"""Lesson text that reads as instructions to the model, not as a note from past experience.

A lesson is injected into the prompts of later tasks, so text that tries to steer the model
(role headers, "ignore previous instructions", "you are now…", requests to reveal keys, tokens,
environment variables or the system prompt, commands that fetch and run code or open a shell)
is kept for a person to approve ("quarantined") instead of recalled. The writing service applies
:func:`lesson_injection_reason` to every lesson it writes, whatever its source.

The text is read after NFKC folding (full-width letters), with zero-width characters removed and
whitespace folded, so trivial disguises read the same. Ordinary engineering lessons ("run pytest
before pushing", "never print secrets in logs", "ignore flaky test X when Y") are not flagged: a
request to reveal is one when it is not negated, and a "token" or "key" is a secret only when it
is named as one (API key, access token, ``*_KEY``, ``*_TOKEN``…).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from lessonbank.models import Lesson

_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")

_ROLE = r"(?:system|assistant|developer|human|user)"
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
_SECRET = (
    r"(?:api[\s_-]*keys?|secret(?:\s+(?:keys?|tokens?))?s?|credentials?|passwords?|passphrases?|"
    r"private\s+keys?|ssh\s+keys?|access\s+keys?|"
    r"(?:api|access|auth|bearer|github|gh|oauth|refresh|session|secret|personal)\s+tokens?|"
    r"env(?:ironment)?\s+var(?:iable)?s?|\.env\b|system\s+prompt|initial\s+prompt|"
    r"hidden\s+(?:instructions|prompt)|id_rsa|id_ed25519|"
    r"\b[A-Z][A-Z0-9_]*_(?:KEY|TOKEN|SECRET|PASSWORD|PASS|PAT)\b|\bAWS_SECRET\w*)"
)
_NEGATION = re.compile(
    r"\b(?:never|not|don't|dont|do\s+not|avoid|without|no|stop|must\s+not|mustn't|shouldn't|"
    r"should\s+not|refuse\s+to|instead\s+of)\s+(?:\w+\s+){0,2}$",
    re.IGNORECASE,
)

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("chat template token", _CHAT_TOKEN),
    (
        "role header",
        re.compile(
            rf"(?:^|\n)[ \t>]*(?:#{{1,6}}[ \t]*|\[[ \t]*)?{_ROLE}(?:[ \t]+(?:prompt|message|instructions?))?"
            r"[ \t]*(?::|\]|$)",
            re.IGNORECASE | re.MULTILINE,
        ),
    ),
    (
        "instruction header",
        re.compile(
            r"(?:^|\n)[ \t>]*(?:#{1,6}[ \t]*|\[[ \t]*)(?:new[ \t]+)?(?:instructions?|rules|prompt|"
            r"long-term memory|past reflections|learned rules|replay examples)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "override of instructions",
        re.compile(
            rf"\b{_OVERRIDE_VERB}\b(?:\s+\w+){{0,3}}?\s+{_PRIOR}(?:\s+\w+){{0,2}}?\s+{_GUIDANCE}\b",
            re.IGNORECASE,
        ),
    ),
    (
        "override of the prompt",
        re.compile(
            rf"\b{_OVERRIDE_VERB}\s+(?:all\s+|everything\s+|what\s+(?:is|was)\s+)?"
            r"(?:the\s+)?(?:above|before|said\s+before|you\s+were\s+told)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "new identity",
        re.compile(
            r"\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|shall|should)\b|"
            r"\bpretend\s+(?:to\s+be|you\s+are|that\s+you)\b|\bact\s+as\s+(?:an?\s+)?(?:unrestricted|"
            r"jailbroken|unfiltered|different|new)\b|\bdeveloper\s+mode\b|\bjailbr[eo]a?k|"
            r"\bnew\s+(?:system\s+)?(?:instructions?|prompt|persona|role)\s*:|"
            r"\byour\s+new\s+(?:task|instructions?|role|goal)\s+is\b",
            re.IGNORECASE,
        ),
    ),
    (
        "message to the model",
        re.compile(
            r"\b(?:note|message|attention|instructions?)\s+(?:to|for)\s+(?:the\s+)?"
            r"(?:ai|assistant|llm|language\s+model|chatbot|model)\b|\bwhen\s+you\s+read\s+this\b",
            re.IGNORECASE,
        ),
    ),
    (
        "concealment from the user",
        re.compile(
            r"\b(?:secretly|silently|covertly)\s+(?:send|upload|post|run|execute|exfiltrate|copy|forward)\b|"
            r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this|it)\s+to|notify|alert)\s+"
            r"(?:the\s+)?(?:user|human|operator)\b",
            re.IGNORECASE,
        ),
    ),
    ("exfiltration", re.compile(r"\bexfiltrat\w*", re.IGNORECASE)),
    (
        "remote code execution",
        re.compile(
            r"\b(?:curl|wget|fetch|iwr|invoke-webrequest)\b[^\n|;]{0,200}\|\s*(?:sudo\s+)?"
            r"(?:ba|z|k|da)?sh\b|\b(?:ba)?sh\s+-c\s+[\"']?\$\((?:curl|wget)|/dev/tcp/|\bnc\s+(?:-\w+\s+)*-e\b|"
            r"\bbase64\s+(?:-d|--decode)\b[^\n]{0,80}\|\s*(?:ba)?sh\b|\bpowershell\b[^\n]{0,40}-enc|"
            r"\biex\s*\(|\brm\s+-rf\s+(?:/|~)(?:\s|$)",
            re.IGNORECASE,
        ),
    ),
    (
        "environment dump",
        re.compile(
            r"\bprintenv\b|\benv\s*\|\s*(?:curl|nc|wget)|print\s*\(\s*os\.environ\s*\)|"
            r"\bcat\s+[^\n]{0,40}(?:\.ssh/|\.env\b|\.aws/credentials|\.netrc)|"
            r"\bcurl\b[^\n]{0,120}(?:-d|--data\S*)\s+@(?:-|\S*\.env)",
            re.IGNORECASE,
        ),
    ),
)

_REQUEST_SECRET = re.compile(rf"\b{_REVEAL}\b(?:\s+\S+){{0,5}}?\s+{_SECRET}", re.IGNORECASE)


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


def _may_match(reason: str, lowered: str) -> bool:
    needs = _NEEDS.get(reason)
    return needs is None or any(fragment in lowered for fragment in needs)


def normalized(text: str) -> str:
    """``text`` as read for screening: NFKC, invisible characters removed, line breaks kept."""
    text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


@dataclass(frozen=True)
class Finding:
    """Why a text reads as instructions to the model, and the words that made it read so."""

    reason: str
    matched: str


def screen(text: str) -> Finding | None:
    """The first instruction-like passage of ``text``, or None when it reads as a lesson."""
    if not text:
        return None
    text = normalized(text)
    lowered = text.lower()
    for reason, pattern in _PATTERNS:
        if _may_match(reason, lowered) and (match := pattern.search(text)):
            return Finding(reason, match.group(0))
    if not _may_match("request to reveal secrets", lowered):
        return None
    for match in _REQUEST_SECRET.finditer(text):
        if not _NEGATION.search(text[: match.start()]):
            return Finding("request to reveal secrets", match.group(0))
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
