"""Secret redaction, applied before any LLM call and before anything is stored.

Episodes come from agents that read logs, configs and stack traces; a key that reaches a
lesson would be replayed into every future prompt. Patterns are deliberately broad: a
redacted non-secret costs a little context, a leaked secret costs a rotation.
"""

from __future__ import annotations

import itertools
import logging
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from lessonbank.lowered_words import lowered_words
from lessonbank.models import TAG_MAX_CHARS
from lessonbank.redact_fields import TEXT_FIELDS as _TABLES

if TYPE_CHECKING:
    from pydantic import BaseModel

    from lessonbank.models import AuditEntry, Episode, Lesson, Reflection

Data = TypeVar("Data", bound="Lesson | dict[str, Any]")
Model = TypeVar("Model", bound="BaseModel")

# (kind, regex, fragments): a pattern runs only when the lowercased text holds one of its fragments,
# which keeps redaction off the profile for the common case: most text holds no secret. A pattern
# with a group named ``s`` replaces that group only (the name, scheme or user before it stays).
_PATTERNS: list[tuple[str, re.Pattern[str], tuple[str, ...]]] = [
    (
        "private-key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
        ("private key",),
    ),
    # lessonbank's own API keys (server/auth.py): lbk_<12 hex id>_<token_urlsafe(16)>, id and all.
    (
        "lessonbank-key",
        re.compile(r"(?<![A-Za-z0-9])lbk_[0-9a-fA-F]{12}_[A-Za-z0-9_-]{16,}"),
        ("lbk_",),
    ),
    ("bearer", re.compile(r"(?i)\b(?:bearer|token)\s+(?P<s>[A-Za-z0-9\-._~+/]{16,}=*)"), ("bearer", "token")),
    (
        "auth-header",
        re.compile(
            r"(?i)\b(?:(?:proxy-)?authorization|x-api-key|api-key)\s*:\s*(?:(?:basic|bearer|token|digest)\s+)?"
            r"(?P<s>(?!(?i:\[REDACTED))[^\s\"',;]{8,})"
        ),
        ("authorization", "api-key"),
    ),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9\-_]{16,}"), ("sk-ant-",)),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9\-_]{20,}"), ("sk-",)),
    ("stripe-key", re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"), ("k_live_", "k_test_")),
    ("stripe-webhook-secret", re.compile(r"\bwhsec_[A-Za-z0-9+/=]{24,}"), ("whsec_",)),
    ("aws-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ("akia", "asia")),
    (
        "github-token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    (
        "gitlab-token",
        re.compile(r"\bgl(?:pat|ptt|dt|rt)-[A-Za-z0-9\-_]{20,}"),
        ("glpat-", "glptt-", "gldt-", "glrt-"),
    ),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), ("xox",)),
    (
        "webhook-url",
        re.compile(
            r"(?i)\bhttps://(?:hooks\.slack\.com/(?:services|workflows|triggers)/|"
            r"(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/)(?P<s>[A-Za-z0-9/_-]{8,})"
        ),
        ("hooks.slack", "/api/webhooks/"),
    ),
    # Three prefixes in mixed case match in any case: a tag is lowercased before it is stored.
    ("google-key", re.compile(r"\b(?i:AIza)[0-9A-Za-z\-_]{35}(?![0-9A-Za-z\-_])"), ("aiza",)),
    (
        "google-oauth",
        re.compile(r"\b(?:GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[A-Za-z0-9_-]{20,})"),
        ("gocspx-", "ya29."),
    ),
    ("jwt", re.compile(r"\b(?i:eyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), ("eyj",)),
    ("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"), ("sg.",)),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), ("npm_",)),
    ("pypi-token", re.compile(r"\bpypi-(?i:AgE)[A-Za-z0-9_-]{20,}"), ("pypi-age",)),
    ("twilio-key", re.compile(r"\bSK[0-9a-fA-F]{32}\b"), ("sk",)),
    ("mailgun-key", re.compile(r"\bkey-[0-9a-z]{32}\b"), ("key-",)),
    ("mailchimp-key", re.compile(r"\b[0-9a-f]{32}-us\d{1,2}\b"), ("-us",)),
    ("shopify-token", re.compile(r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"), ("shp",)),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), ("hf_",)),
    ("telegram-token", re.compile(r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b"), (":aa",)),
    (
        "discord-token",
        re.compile(r"\b[MNO][A-Za-z\d_-]{23,27}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,38}\b"),
        (".",),
    ),
    (
        "square-token",
        re.compile(r"\b(?:EAAA[A-Za-z0-9_-]{60}|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43})\b"),
        ("eaaa", "sq0"),
    ),
    ("digitalocean-token", re.compile(r"\bdo[opr]_v1_[a-f0-9]{64}\b"), ("_v1_",)),
    ("databricks-token", re.compile(r"\bdapi[a-f0-9]{32}(?:-\d)?\b"), ("dapi",)),
    ("vault-token", re.compile(r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}"), ("hvs.", "hvb.", "hvr.")),
    ("newrelic-key", re.compile(r"\bNRAK-[A-Z0-9]{27}\b"), ("nrak-",)),
    ("postman-key", re.compile(r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"), ("pmak-",)),
    ("grafana-token", re.compile(r"\bgl(?:sa|c)_[A-Za-z0-9_+/=]{32,}"), ("glsa_", "glc_")),
    ("linear-key", re.compile(r"\blin_api_[A-Za-z0-9]{40}\b"), ("lin_api_",)),
    ("age-key", re.compile(r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b"), ("age-secret-key-",)),
    ("sentry-dsn", re.compile(r"(?<=://)[0-9a-f]{32}(?=@)"), ("://",)),
    # user:password@host, the password may hold "/" or "@": it ends at the "@" a host follows.
    (
        "url-credentials",
        re.compile(r"(?<=://)[^/\s:@]*:(?P<s>\S+?)@(?=[A-Za-z0-9.\-\[\]]+(?::\d+)?(?:[/?#\s\"'<>),;]|$))"),
        ("://",),
    ),
    ("secret", re.compile(r"[?&]sig=(?P<s>[^&\s\"']{16,})"), ("sig=",)),
    (
        "secret",
        re.compile(
            r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb)\b[^\n|;&]*?\s-p(?P<s>[^\s\-]\S*)"
        ),
        ("mysql", "mariadb"),
    ),
    (
        "secret",
        re.compile(r"\b(?:curl|wget|http)\b[^\n|;&]*?\s(?:-u|--user)\s*[\"']?[^\s:\"']+:(?P<s>[^\s\"'@]+)"),
        ("curl", "wget", "http"),
    ),
    ("secret", re.compile(r"(?i)\bmachine\s+\S+(?:\s+login\s+\S+)?\s+password\s+(?P<s>\S+)"), ("machine",)),
    (
        "secret",
        re.compile(r"(?i)(?<!-)\b(?:identified\s+by|password)\s+(?P<s>'[^'\n]*')"),
        ("identified", "password"),
    ),
]

# A bare AWS secret access key (40 characters of base64) is recognised next to its key id.
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_AWS_SECRET = re.compile(
    r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)

# `password=hunter2`, `"api_key": "abc"`, `SECRET_TOKEN: xyz`, `--password x`: the name stays, the value goes.
# A name is secret when it holds one of these words or when its words name a secret (is_secret_key).
_NAME_HINT = re.compile(r"(?i)password|passwd|pwd|secret|api[_-]?key|access[_-]?key|token|client[_-]?secret")
_ASSIGNMENT = re.compile(
    r"(?<![\w\-.$])(?P<name>[A-Za-z_][\w-]*)(?P<sep>[\"']?\s*[:=]\s*)(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"']+)"
)
_FLAG = re.compile(
    r"(?<![\w-])--(?P<name>[A-Za-z][\w-]*)(?P<sep>=|\s+)(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s\-\"'][^\s\"']*)"
)
_ASSIGNMENT_FRAGMENTS = (
    "pass",
    "pwd",
    "secret",
    "key",
    "token",
    "auth",
    "credential",
    "cookie",
    "dsn",
    "sig",
)
# Values that are not secrets but say where one is: code, variables, templates, placeholders; and
# markers, in any case (a tag is lowercased once redacted: redacting it again must change nothing).
_NOT_A_VALUE = re.compile(
    r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*[(\[]|[$%<{]|\*+$|(?i:\[REDACTED)|(?i:none|null|true|false|undefined|bearer|basic|token|digest)$"
)


def _secret_name(name: str) -> bool:
    words = [word for word in _KEY_SEPARATORS.split(_CAMEL.sub("_", name).lower()) if word]
    if not words or words[-1] in _ABOUT_THE_SECRET:
        return False
    return bool(_NAME_HINT.search(name)) or is_secret_key(name)


def _assigned(match: re.Match[str]) -> str:
    value = match["s"]
    bare = value[1:-1] if value[:1] in "\"'" and len(value) >= 2 else value
    if not bare or _NOT_A_VALUE.match(bare):
        return match[0]
    if not _secret_name(match["name"]):
        # `Error: API_KEY=x`, `env: DB_PASSWORD=x`: the label's match took the assignment as its
        # value, so the regex never sees it on its own; look again inside the value (a shorter text,
        # so this ends).
        inner = _ASSIGNMENT.sub(_assigned, value) if "=" in value or ":" in value else value
        return match[0][: match.start("s") - match.start()] + inner
    quote = value[0] if bare is not value else ""
    return match[0][: match.start("s") - match.start()] + f"{quote}{SECRET_MARKER}{quote}"


def _replace(kind: str, pattern: re.Pattern[str], text: str) -> str:
    marker = f"[REDACTED:{kind}]"
    if "s" not in pattern.groupindex:
        return pattern.sub(marker, text)

    def one(match: re.Match[str]) -> str:
        start, end = match.start("s") - match.start(), match.end("s") - match.start()
        whole = match[0]
        value = whole[start:end]
        quote = value[0] if kind == "secret" and value[:1] in "\"'" else ""
        if value[:9].upper() == "[REDACTED" or (kind == "secret" and _NOT_A_VALUE.match(value.strip("\"'"))):
            return whole
        return whole[:start] + f"{quote}{marker}{quote}" + whole[end:]

    return pattern.sub(one, text)


# A pattern whose fragment is in most text (a discord token's ".", a twilio key's "sk" as in "task"):
# it runs only where this shorter pattern, which every text it matches holds, is found first (a scan
# from a literal instead of a match tried at every word start).
_GATES: dict[str, re.Pattern[str]] = {
    "discord-token": re.compile(r"\.[A-Za-z\d_-]{6}\."),
    "twilio-key": re.compile(r"SK[0-9a-fA-F]{32}"),
}

# A fragment without whitespace is in a text exactly when it is in one of the text's words (split at
# whitespace). Words repeat from text to text: the patterns a word's fragments call for are worked out
# once and kept, with two marks (an AWS key id's prefix, an assignment's fragment), so a text costs a
# split and a lookup per word, not a search of the whole text per fragment. Fragments with whitespace
# are searched for in the text. Bounded: a flood of unique words costs time, never memory.
_AWS_MARK, _ASSIGNMENT_MARK = -1, -2
_NEEDS = [(_AWS_MARK, ("akia", "asia")), (_ASSIGNMENT_MARK, _ASSIGNMENT_FRAGMENTS)]
_NEEDS += [(index, fragments) for index, (_kind, _pattern, fragments) in enumerate(_PATTERNS)]
_SPACED = [(f, index) for index, fragments in _NEEDS for f in fragments if any(c.isspace() for c in f)]
_WORD_HITS: dict[str, frozenset[int]] = {}
_WORD_HITS_MAX = 1 << 17
# One object per distinct set of hits: most words hit nothing, and a set of equal but distinct
# frozensets compares each new one to the one it holds (found by identity, it does not).
_SAME_HITS: dict[frozenset[int], frozenset[int]] = {}


def _hits(lowered: str) -> set[int]:
    """The indexes of the patterns whose fragments ``lowered`` holds, and the marks it holds."""
    words = lowered_words(lowered)
    found: set[frozenset[int] | None] = set(map(_WORD_HITS.get, words))
    if None in found:
        found.discard(None)
        for word in set(words).difference(_WORD_HITS):
            hits = frozenset(index for index, needs in _NEEDS if any(f in word for f in needs))
            found.add(hits)
            if len(_WORD_HITS) < _WORD_HITS_MAX:
                _WORD_HITS[word] = _SAME_HITS.setdefault(hits, hits)
    spaced = {index for fragment, index in _SPACED if fragment in lowered}
    return spaced.union(*found)  # type: ignore[arg-type]


# Texts this short (tags, task types, agent names) repeat across records: each is redacted once per
# process. The patterns are fixed at import, so a cached answer stays right.
_SHORT_TEXT = 64


def redact(text: str) -> str:
    """Replace secrets in ``text`` with ``[REDACTED:<kind>]`` markers."""
    if not text:
        return text
    if len(text) <= _SHORT_TEXT:
        return _redact_short(text)
    return _redact(text)


@lru_cache(maxsize=8192)
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    lowered = text.lower()
    hits = _hits(lowered)
    if _AWS_MARK in hits and _AWS_KEY_ID.search(text):
        text = _AWS_SECRET.sub("[REDACTED:aws-secret]", text)
    for index in sorted(hits):  # in the table's order: an earlier pattern's marker shields its text
        if index < 0:
            continue
        kind, pattern, _fragments = _PATTERNS[index]
        gate = _GATES.get(kind)
        if gate is None or gate.search(text):
            text = _replace(kind, pattern, text)
    if "--" in text:
        text = _FLAG.sub(_assigned, text)
    # An assignment needs its ":" or "=" (looked for in the text as it is now: a marker holds a ":").
    if ("=" in text or ":" in text) and _ASSIGNMENT_MARK in hits:
        text = _ASSIGNMENT.sub(_assigned, text)
    return text


def redact_url(url: str) -> str:
    """``url`` fit for a message or a log: its password masked whatever it looks like (the patterns
    above want a host after the ``@``; a URL the caller gave may be anything), the rest redacted."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL after all (a bad port, a stray bracket): the patterns still run
        return redact(url)
    if password:
        user, _, host = parts.netloc.rpartition("@")
        name = user.split(":", 1)[0]
        parts = parts._replace(netloc=f"{name}:[REDACTED:url-credentials]@{host}")
        url = urlunsplit(parts)
    return redact(url)


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
    """Redact every string inside a JSON-like value (dicts, lists, nested), dict keys included, and
    every value whose dict key names a secret (see :func:`is_secret_key`).

    The one helper for any structured text a caller or a model hands in (metadata, a proposal's
    data). A key is text like any other (``{"ghp_…": "x"}``); two keys that redact to the same
    marker become one, the later value kept: a lost duplicate costs less than a kept secret."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                out[key] = redact_value(item)
                continue
            # Decided on the redacted key, so a second pass decides the same (idempotent): a key that
            # held a secret reads as one (``[REDACTED:github-token]``) and its value goes too.
            key = redact(key)
            out[key] = _masked(item) if is_secret_key(key) else redact_value(item)
        return out
    return value


# ------------------------------------------------------------------ records: one place per kind

# Every field of a record or call that holds caller or model text (the tables: redact_fields).
LESSON_TEXT_FIELDS = _TABLES["lesson"]
EPISODE_TEXT_FIELDS = _TABLES["episode"]
REFLECTION_TEXT_FIELDS = _TABLES["reflection"]
CHECK_TEXT_FIELDS = _TABLES["episode.verification"]
AUDIT_TEXT_FIELDS = _TABLES["audit"]
ARCHIVE_TEXT_FIELDS = _TABLES["archive"]
MIRROR_TEXT_FIELDS = _TABLES["mirror"]
MCP_ARCHIVE_TEXT_FIELDS = _TABLES["mcp.archive_lesson"]
TEXT_FIELDS = _TABLES


def _redacted_tag(tag: str) -> str:
    """One tag redacted. A record lowercases its tags when it is made, which hides the formats that
    need capitals (``AKIA…``, ``eyJ…``, ``SG.…``): a tag is tried again in capitals (``.upper()``
    keeps every position) and, if that finds a secret, kept that way; the record lowercases it
    again. Cut back to the tag limit: a marker can be longer than the secret it replaced, and a
    record read back must pass its own validation (or a stored episode could never be reflected on)."""
    cleaned = redact(tag)
    if cleaned == tag and tag.islower():
        shouting = tag.upper()
        found = redact(shouting)
        if found != shouting:
            cleaned = found
    return cleaned[:TAG_MAX_CHARS]


def _redacted_tags(tags: list[Any]) -> list[Any]:
    return [_redacted_tag(tag) if isinstance(tag, str) else tag for tag in tags]


def _redacted_fields(values: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The fields among ``fields`` whose redacted value differs, with that value."""
    changed = {}
    for name in fields:
        value = values.get(name)
        if value is None:
            continue
        cleaned = _redacted_tags(value) if name == "tags" and isinstance(value, list) else redact_value(value)
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


def _redacted_record(record: Model, fields: tuple[str, ...]) -> Model:
    changed = _redacted_fields({name: getattr(record, name) for name in fields}, fields)
    return record.model_copy(update=changed) if changed else record


def redact_reflection(reflection: Reflection) -> Reflection:
    """A reflection with the model's reply, what was parsed from it and the skip reason redacted."""
    return _redacted_record(reflection, REFLECTION_TEXT_FIELDS)


def redact_audit(entry: AuditEntry) -> AuditEntry:
    """An audit row with its actor, summary and the lesson before and after redacted."""
    return _redacted_record(entry, AUDIT_TEXT_FIELDS)


# ------------------------------------------------------------------ log lines

# Every logger lessonbank logs to (tests/test_redact_errors.py checks the source uses no other).
# A logger's filters see only the records made at that logger, so each one gets the filter.
LOGGERS = (
    "lessonbank",
    "lessonbank.jobs",
    "lessonbank.llm",
    "lessonbank.retrieval",
    "lessonbank.stores",
    "lessonbank.consolidation",
    "lessonbank.feedback",
    "lessonbank.expansion",
    "lessonbank.mirror",
    "lessonbank.server",
    "lessonbank.server.mcp",
    "lessonbank.hooks",
    "lessonbank.skills",
    "lessonbank.agents_md",
)


class SecretFilter(logging.Filter):
    """Redacts a log record's message, arguments, traceback and stack before any handler sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the handler's to report, as it would be without us
            return True
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(_FORMATTER.formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FORMATTER = logging.Formatter()
_FILTER = SecretFilter()


def mask_logs() -> None:
    """Put the secret filter on every lessonbank logger (idempotent; done when this module loads)."""
    names = set(LOGGERS) | {
        name for name in logging.Logger.manager.loggerDict if name.startswith("lessonbank.")
    }
    for name in sorted(names):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


mask_logs()
