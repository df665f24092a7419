"""Secret redaction, applied before any LLM call and before anything is stored.

Episodes come from agents that read logs, configs and stack traces; a key that reaches a
lesson would be replayed into every future prompt. Patterns are deliberately broad: a
redacted non-secret costs a little context, a leaked secret costs a rotation.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from lessonbank.models import Episode, Lesson, Reflection

Data = TypeVar("Data", bound="Lesson | dict[str, Any]")

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private-key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("bearer", re.compile(r"(?i)\b(bearer|token)\s+[A-Za-z0-9\-._~+/]{16,}=*")),
    (
        "auth-header",
        re.compile(
            r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key)\s*:\s*((?:basic|bearer|token|digest)\s+)?"
            r"(?!\[REDACTED)[^\s\"',;]{8,}"
        ),
    ),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9\-_]{16,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9\-_]{20,}")),
    ("aws-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google-key", re.compile(r"\bAIza[0-9A-Za-z\-_]{35}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("url-credentials", re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")),
]

# `password=hunter2`, `"api_key": "abc"`, `SECRET_TOKEN: xyz`: keep the name, drop the value.
_ASSIGNMENT = re.compile(
    r"(?i)(\b[\w-]*(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?key|token"
    r"|client[_-]?secret)[\w-]*\b[\"']?\s*[:=]\s*)(?!\[REDACTED)(\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"']+)"
)


# Every pattern above needs one of these fragments (lowercased); text without any is returned
# untouched, which keeps redaction off the profile for the common case: most text holds no secret.
_FRAGMENTS = (
    "private key",
    "bearer",
    "token",
    "authorization",
    "api-key",
    "api_key",
    "apikey",
    "sk-",
    "akia",
    "asia",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "aiza",
    "eyj",
    "://",
    "password",
    "passwd",
    "pwd",
    "secret",
    "access_key",
    "access-key",
    "accesskey",
    "auth",
)


def _may_hold_secret(text: str) -> bool:
    lowered = text.lower()
    return any(fragment in lowered for fragment in _FRAGMENTS)


def redact(text: str) -> str:
    """Replace secrets in ``text`` with ``[REDACTED:<kind>]`` markers."""
    if not text or not _may_hold_secret(text):
        return text
    for kind, pattern in _PATTERNS:
        marker = f"[REDACTED:{kind}]"
        if kind == "bearer":  # keep the scheme, drop the credential
            text = pattern.sub(lambda m, marker=marker: f"{m.group(1)} {marker}", text)  # type: ignore[misc]
        elif kind == "auth-header":  # keep the header name and scheme, drop the credential
            text = pattern.sub(lambda m, marker=marker: f"{m.group(1)}: {m.group(2) or ''}{marker}", text)  # type: ignore[misc]
        else:
            text = pattern.sub(marker, text)
    return _ASSIGNMENT.sub(lambda m: f"{m.group(1)}[REDACTED:secret]", text)


# A dict key that names a secret: its value goes whatever it looks like. Keys are split into words
# (``dbPassword``, ``DB-PASSWORD``, ``db_password`` → db, password); a key is secret when one word is
# in _SECRET_WORDS or two neighbours form one of _SECRET_PAIRS, unless its last word says the value
# is about the secret rather than the secret itself (``token_count``, ``password_policy``).
_SECRET_WORDS = frozenset(
    [
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "pass",
        "secret",
        "secrets",
        "token",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "cookie",
        "dsn",
        "apikey",
        "accesskey",
        "privatekey",
        "secretkey",
    ]
)
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("access", "key"),
        ("private", "key"),
        ("secret", "key"),
        ("signing", "key"),
        ("encryption", "key"),
        ("master", "key"),
        ("session", "key"),
        ("account", "key"),
        ("shared", "key"),
        ("connection", "string"),
    }
)
_ABOUT_THE_SECRET = frozenset(
    [
        "count",
        "counts",
        "type",
        "types",
        "kind",
        "method",
        "methods",
        "policy",
        "policies",
        "len",
        "length",
        "limit",
        "limits",
        "budget",
        "id",
        "ids",
        "name",
        "names",
        "field",
        "fields",
        "required",
        "enabled",
        "expiry",
        "expires",
        "ttl",
        "hint",
        "min",
        "max",
        "usage",
        "estimate",
        "file",
        "path",
        "env",
    ]
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_SEPARATORS = re.compile(r"[^a-z0-9]+")
SECRET_MARKER = "[REDACTED:secret]"


def is_secret_key(key: str) -> bool:
    """Whether a dict key names a secret (case-insensitive, ``_`` / ``-`` / camelCase variants)."""
    words = [word for word in _KEY_SEPARATORS.split(_CAMEL.sub("_", key).lower()) if word]
    if not words or words[-1] in _ABOUT_THE_SECRET:
        return False
    return any(word in _SECRET_WORDS for word in words) or any(
        pair in _SECRET_PAIRS for pair in itertools.pairwise(words)
    )


def _masked(value: Any) -> Any:
    """Everything under a secret key: strings and numbers masked, structure kept, empties left."""
    if isinstance(value, bool) or value is None or value == "":
        return value
    if isinstance(value, (str, int, float)):
        return SECRET_MARKER
    if isinstance(value, list):
        return [_masked(item) for item in value]
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    return value


def redact_value(value: Any) -> Any:
    """Redact every string inside a JSON-like value (dicts, lists, nested), and every value whose
    dict key names a secret (see :func:`is_secret_key`)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        return {
            key: _masked(item) if isinstance(key, str) and is_secret_key(key) else redact_value(item)
            for key, item in value.items()
        }
    return value


# ------------------------------------------------------------------ records: one place per kind

# Every field of a record that holds text a person or a model wrote. Ids, namespaces, statuses and
# numbers are not text and stay as they are.
LESSON_TEXT_FIELDS = (
    "content",
    "situation",
    "mistake",
    "correction",
    "learned_from",
    "tags",
    "task_type",
    "agent",
    "metadata",
)
EPISODE_TEXT_FIELDS = (
    "task",
    "task_type",
    "agent",
    "goal_title",
    "error",
    "attempt",
    "output",
    "actions",
    "tags",
    "metadata",
)
REFLECTION_TEXT_FIELDS = ("raw_output", "parsed", "skip_reason")
CHECK_TEXT_FIELDS = ("tool", "stderr", "errors")


def _redacted_fields(values: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The fields among ``fields`` whose redacted value differs, with that value."""
    changed = {}
    for name in fields:
        value = values.get(name)
        if value is None:
            continue
        cleaned = redact_value(value)
        if cleaned != value:
            changed[name] = cleaned
    return changed


def redact_lesson(lesson: Data) -> Data:
    """A lesson (or the dict a lesson is about to be made of) with every text field redacted.

    Pass the dict when there is one: tags are lowercased when a lesson is made, and some secret
    formats are case-sensitive."""
    if isinstance(lesson, dict):
        return {**lesson, **_redacted_fields(lesson, LESSON_TEXT_FIELDS)}  # type: ignore[return-value]
    changed = _redacted_fields(
        {name: getattr(lesson, name) for name in LESSON_TEXT_FIELDS}, LESSON_TEXT_FIELDS
    )
    return lesson.model_copy(update=changed) if changed else lesson


def redact_episode(episode: Episode) -> Episode:
    """An episode with every text field redacted, its verification results included.

    Redaction only replaces text inside strings, so the copy stays valid: no second validation."""
    values = {name: getattr(episode, name) for name in EPISODE_TEXT_FIELDS}
    changed = _redacted_fields(values, EPISODE_TEXT_FIELDS)
    if episode.verification:
        checks = []
        for check in episode.verification:
            fields = {name: getattr(check, name) for name in CHECK_TEXT_FIELDS}
            update = _redacted_fields(fields, CHECK_TEXT_FIELDS)
            checks.append(check.model_copy(update=update) if update else check)
        if any(new is not old for new, old in zip(checks, episode.verification, strict=True)):
            changed["verification"] = checks
    return episode.model_copy(update=changed) if changed else episode


def redact_reflection(reflection: Reflection) -> Reflection:
    """A reflection with the model's reply, what was parsed from it and the skip reason redacted."""
    values = {name: getattr(reflection, name) for name in REFLECTION_TEXT_FIELDS}
    changed = _redacted_fields(values, REFLECTION_TEXT_FIELDS)
    return reflection.model_copy(update=changed) if changed else reflection
