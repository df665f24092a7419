"""The records lessonbank works with: pure data, validated by pydantic, no I/O.

An :class:`Episode` is what an agent reports; a :class:`Reflection` is what a reflector made of
it; a :class:`Lesson` is the retrievable unit; a :class:`Job` is durable background work;
:class:`Hit` and :class:`ContextBlock` are what recall and context hand back.

Limits are enforced here so every entry point (library, CLI, import) refuses the same bad
input with the same message: an episode over 1 MiB is refused naming its largest field, a
string holding invalid UTF-8 (lone surrogates, as a shell passes undecodable bytes) is refused
naming the field.
"""

from __future__ import annotations

import json
import os
import time
import unicodedata
from datetime import UTC, datetime
from typing import Any, Literal, get_args

import pydantic.main
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

EPISODE_MAX_BYTES = 1024 * 1024
LESSON_MAX_CHARS = 10_000
TAG_MAX_CHARS = 64
LEARNED_FROM_MAX_CHARS = 1_000
MAX_TAGS = 32
MAX_CONTEXT_IDS = 1_000  # far above any context block; keeps one record() within bounded work
# An id a caller may choose (an episode's, a goal's, a loop's, an imported lesson's): the REST routes
# that read a record by id take ids this long, so nothing is stored that cannot be read back.
ID_MAX_CHARS = 200
NAMESPACE_MAX_CHARS = 200
# Text a model or a tool wrote is cut, never refused (the writer cannot be asked again), to these
# lengths with a visible marker (see ``truncated``). A reflection's reply: 32,000 chars is ~8,000
# tokens, the largest output budget of any cycle; each parsed field gets the same cap.
MODEL_TEXT_MAX_CHARS = 32_000
SKIP_REASON_MAX_CHARS = 1_000  # a skip reason is one line from the model
JOB_TEXT_MAX_CHARS = 2_000  # a job's last_error and detail: a short operator-facing line

Status = Literal["success", "failure", "partial"]
Importance = Literal["low", "normal", "high"]
Signal = Literal["hallucination", "low_quality"]
LessonKind = Literal["insight", "lesson", "principle", "procedure"]
LessonSource = Literal["llm", "manual", "consolidation", "import"]
LessonStatus = Literal["active", "pending", "archived", "quarantined"]
LESSON_KINDS: tuple[str, ...] = get_args(LessonKind)
LESSON_STATUSES: tuple[str, ...] = get_args(LessonStatus)
ReflectionStatus = Literal["ok", "skipped", "failed"]
JobStatus = Literal["queued", "waiting", "leased", "done", "dead"]
JobKind = Literal["reflect", "consolidate", "feedback"]
TriggerName = Literal[
    "terminal",
    "failure",
    "error",
    "hallucination",
    "low_quality",
    "high_importance",
    "long_duration",
    "failure_streak",
    "manual",
]

# Each record builds its validator on its first validation, not at import: a process that opens a bank
# and recalls validates none of them (it rebuilds stored lessons without validation), and building
# every record's schema was ~a third of importing this module. Only where pydantic builds a deferred
# model under its lock (2.14): before, two threads validating a record for the first time at once
# could each rebuild it, one validating with the parent's schema meanwhile.
DEFER_BUILD = hasattr(pydantic.main, "_rebuild_lock")

_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


# Every pair of digits, by the 10 bits it stands for: an id's 26 digits are 13 look-ups.
_DIGIT_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]
_PAIR_SHIFTS = range(120, -1, -10)


def new_id(prefix: str) -> str:
    """A sortable unique id: ``prefix_`` + 48-bit millisecond time + 80 random bits, base32."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    # The 26 digits of the 130-bit value, most significant first, two at a time (base64's base32 is
    # pure Python before 3.13: a loop over 5-byte groups, twice as slow).
    return f"{prefix}_{''.join([_DIGIT_PAIRS[(value >> shift) & 1023] for shift in _PAIR_SHIFTS])}"


def utcnow() -> datetime:
    return datetime.now(UTC)


def from_timestamp(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def truncated(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` chars, else its head and ``…[truncated N chars]``, ``limit``
    chars in all (so cutting again changes nothing: a record read back validates unchanged)."""
    if len(text) <= limit:
        return text
    marker = f"…[truncated {len(text) - limit} chars]"
    keep = max(0, limit - len(marker) - 2)  # the marker's count grows by at most two digits
    return text[:keep] + f"…[truncated {len(text) - keep} chars]"


def namespace_problem(namespace: object) -> str | None:
    """Why ``namespace`` cannot name a namespace, or None when it can.

    The one rule for every entry point (settings, so ``LessonBank(namespace=…)``, the CLI's
    ``--namespace`` and ``LESSONBANK_NAMESPACE``; the servers' paths and tool arguments). Control and
    format characters are refused rather than dropped: stored text loses NUL characters (see
    ``_check_text``), so ``a\0b`` would be checked as one namespace and written as another (``ab``),
    and an invisible character makes two namespaces that read the same."""
    if not isinstance(namespace, str) or not namespace.strip():
        return "is empty; pass a name such as 'default' or 'team-a'"
    if len(namespace) > NAMESPACE_MAX_CHARS:
        return f"is {len(namespace)} characters; the limit is {NAMESPACE_MAX_CHARS}"
    for position, char in enumerate(namespace):
        if unicodedata.category(char) in ("Cc", "Cf", "Cs"):
            return (
                f"holds the control character {char!r} at position {position}; "
                "use letters, digits and punctuation such as 'team-a'"
            )
    return None


def _truncated_strings(value: Any, limit: int) -> Any:
    """``value`` with every string in it (nested in dicts and lists) cut to ``limit`` chars."""
    if isinstance(value, str):
        return truncated(value, limit)
    if isinstance(value, dict):
        return {key: _truncated_strings(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [_truncated_strings(item, limit) for item in value]
    return value


def _check_text(value: Any, field: str) -> Any:
    """Refuse strings that cannot be stored as UTF-8, naming the field; drop NUL characters (text
    never needs them, and PostgreSQL's text and JSONB cannot hold them, so a lesson or an episode
    reads the same back from every store)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{field} is not valid UTF-8 (undecodable byte at position {exc.start}); "
                "send text encoded as UTF-8"
            ) from None
        return value.replace("\x00", "") if "\x00" in value else value
    if isinstance(value, dict):
        return {_check_text(key, field): _check_text(item, f"{field}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [_check_text(item, f"{field}[{index}]") for index, item in enumerate(value)]
    return value


def clean_tags(tags: list[str]) -> list[str]:
    """Lowercase, trim, drop empties and duplicates, keep order; refuse oversized tags (ValueError)."""
    seen: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise ValueError(f"tags must be strings, got {type(tag).__name__}")
        cleaned = " ".join(tag.strip().lower().split())
        if not cleaned:
            continue
        if len(cleaned) > TAG_MAX_CHARS:
            raise ValueError(f"tag {cleaned[:20]!r}… is {len(cleaned)} chars; the limit is {TAG_MAX_CHARS}")
        seen.setdefault(cleaned, None)
    if len(seen) > MAX_TAGS:
        raise ValueError(f"{len(seen)} tags given; the limit is {MAX_TAGS}")
    return list(seen)


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False, defer_build=DEFER_BUILD)

    @model_validator(mode="before")
    @classmethod
    def _utf8(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: _check_text(value, str(key)) for key, value in data.items()}
        return data


class VerificationResult(Record):
    """One check the agent's work went through (a test run, a type check, a human review)."""

    tool: str
    status: Literal["passed", "failed", "error", "skipped"] = "failed"
    exit_code: int | None = None
    stderr: str | None = None
    errors: list[dict[str, Any]] = Field(default_factory=list)


class Episode(Record):
    """One attempt at a task, as the agent reports it.

    ``attempt`` is what the agent tried and ``output`` what came out; with ``error`` they are
    what a reflector sees. ``status`` defaults to failure when an error is given, else success.
    """

    id: str = Field(default_factory=lambda: new_id("ep"), min_length=1, max_length=ID_MAX_CHARS)
    task: str
    task_type: str | None = None
    agent: str | None = None
    goal_id: str | None = Field(default=None, max_length=ID_MAX_CHARS)
    goal_title: str | None = None
    loop_id: str | None = Field(default=None, max_length=ID_MAX_CHARS)
    iteration: int | None = Field(default=None, ge=0)
    status: Status = "success"
    error: str | None = None
    attempt: str | None = None
    output: str | None = None
    actions: list[str | dict[str, Any]] = Field(default_factory=list)
    verification: list[VerificationResult] = Field(default_factory=list)
    reward: float | None = Field(default=None, ge=0.0, le=1.0)
    duration_s: float | None = Field(default=None, ge=0.0)
    importance: Importance = "normal"
    signals: list[Signal] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    namespace: str | None = None
    context_ids: list[str] = Field(default_factory=list, max_length=MAX_CONTEXT_IDS)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)

    @field_validator("task")
    @classmethod
    def _task_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("task is empty; describe what the agent was asked to do")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        return clean_tags(value)

    @model_validator(mode="before")
    @classmethod
    def _size_limit(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        sizes = {key: _json_size(value) for key, value in data.items()}
        total = sum(sizes.values())
        if total > EPISODE_MAX_BYTES:
            largest = max(sizes, key=lambda key: sizes[key])
            raise ValueError(
                f"episode is {total / 1e6:.1f} MB, over the {EPISODE_MAX_BYTES // 1024} KiB limit; "
                f"field {largest!r} alone is {sizes[largest] / 1e6:.1f} MB: summarise it before recording"
            )
        return data

    @model_validator(mode="before")
    @classmethod
    def _infer_status(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("status") is None:
            data = {**data, "status": "failure" if data.get("error") else "success"}
        return data


def _json_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    # What json.dumps would write, without calling it: most of an episode's fields are these.
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if type(value) is int:
        return len(repr(value))
    if type(value) in (list, dict) and not value:
        return 2
    if isinstance(value, BaseModel):
        return len(value.model_dump_json())
    try:
        return len(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return 0


class Decision(Record):
    """What the policy decided for an episode: reflect (with which trigger and reflector) or skip, and why."""

    reflect: bool
    trigger: str | None = None
    reflector: str | None = None
    reason: str
    job_id: str | None = None


class Lesson(Record):
    """The retrievable unit of learned knowledge.

    For ``kind="lesson"`` the structured fields come from seed 004: ``situation`` (when it
    applies), ``mistake`` and ``correction``; ``content`` is the text that is indexed, hashed
    and rendered. ``content_hash`` identifies a lesson within its namespace and kind.
    """

    id: str = Field(default_factory=lambda: new_id("les"), min_length=1, max_length=ID_MAX_CHARS)
    namespace: str = "default"
    kind: LessonKind = "lesson"
    content: str
    situation: str | None = None
    mistake: str | None = None
    correction: str | None = None
    # Provenance: the task text of the episode the lesson was learned on. Indexed with the content
    # (weighted lower), so a new task that reads like the old one finds the lesson.
    learned_from: str | None = None
    trigger: str | None = None
    tags: list[str] = Field(default_factory=list)
    task_type: str | None = None
    agent: str | None = None
    goal_id: str | None = None
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    source: LessonSource = "llm"
    episode_id: str | None = None
    reflection_id: str | None = None
    status: LessonStatus = "active"
    access_count: int = Field(default=0, ge=0)
    last_accessed: datetime | None = None
    helpful: int = Field(default=0, ge=0)
    harmful: int = Field(default=0, ge=0)
    pinned: bool = False
    expires_at: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    content_hash: str = ""
    # Structured extras of the kinds beyond seed 004: a goal's title (insight), a rule's stream and
    # confirmations (principle), a procedure's result and steps. JSON-serialisable values only.
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("content is empty; a lesson needs text")
        if len(value) > LESSON_MAX_CHARS:
            raise ValueError(
                f"content is {len(value)} chars; the limit is {LESSON_MAX_CHARS}: a lesson should be short"
            )
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        return clean_tags(value)

    @field_validator("learned_from")
    @classmethod
    def _learned_from(cls, value: str | None) -> str | None:
        """Trimmed; blank is None; a long task is cut to its first 1,000 chars (provenance, not payload)."""
        if value is None:
            return None
        return value.strip()[:LEARNED_FROM_MAX_CHARS].rstrip() or None


AuditAction = Literal[
    "archive",
    "restore",
    "approve",
    "delete",
    "edit",
    "quarantine",
    "merge",
    "supersede",
    "extract",
    "revert",
    "connect",
    "admit",
]
AUDIT_ACTIONS: tuple[str, ...] = get_args(AuditAction)


class AuditEntry(Record):
    """One change to a lesson, as the audit log keeps it (seed 002: timestamp, action, item, actor,
    approval, summary). ``before``/``after`` are the lesson as stored before and after (None: it did
    not exist, or no longer does). ``actor`` is who changed it: ``api``, ``cli``, a person, or a cycle
    (``reflection:<cycle id>``); ``proposal_id`` the consolidation proposal it applies, if any."""

    id: str = Field(default_factory=lambda: new_id("aud"))
    namespace: str = "default"
    at: datetime = Field(default_factory=utcnow)
    actor: str
    action: AuditAction
    lesson_id: str | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    proposal_id: str | None = None
    summary: str = ""

    def of(self, before: Lesson | None, after: Lesson | None) -> AuditEntry:
        """This entry recording the change from ``before`` to ``after`` (the lessons as stored)."""
        lesson = after or before
        return self.model_copy(
            update={
                "lesson_id": self.lesson_id or (lesson.id if lesson is not None else None),
                "before": None if before is None else before.model_dump(mode="json"),
                "after": None if after is None else after.model_dump(mode="json"),
            }
        )


class Reflection(Record):
    """What one reflector made of one episode: parsed output and lessons, or a skip with its reason."""

    id: str = Field(default_factory=lambda: new_id("ref"))
    namespace: str = "default"
    episode_id: str
    job_id: str | None = None
    reflector: str
    trigger: str | None = None
    status: ReflectionStatus
    skip_reason: str | None = None
    raw_output: str = ""
    parsed: dict[str, Any] = Field(default_factory=dict)
    lesson_ids: list[str] = Field(default_factory=list)
    model: str | None = None
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    created_at: datetime = Field(default_factory=utcnow)

    @field_validator("raw_output")
    @classmethod
    def _raw_output(cls, value: str) -> str:
        return truncated(value, MODEL_TEXT_MAX_CHARS)

    @field_validator("skip_reason")
    @classmethod
    def _skip_reason(cls, value: str | None) -> str | None:
        return None if value is None else truncated(value, SKIP_REASON_MAX_CHARS)

    @field_validator("parsed")
    @classmethod
    def _parsed(cls, value: dict[str, Any]) -> dict[str, Any]:
        capped: dict[str, Any] = _truncated_strings(value, MODEL_TEXT_MAX_CHARS)
        return capped


class Job(Record):
    """Durable background work. ``waiting`` jobs need something (an LLM) before they can run."""

    id: str = Field(default_factory=lambda: new_id("job"))
    namespace: str = "default"
    # reflect: one episode; consolidate: one namespace's cycle; feedback: a task helped, into provenance
    kind: JobKind = "reflect"
    episode_id: str | None = None
    dedupe_key: str
    status: JobStatus = "queued"
    attempts: int = 0
    max_attempts: int = 5
    run_after: datetime = Field(default_factory=utcnow)
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    last_error: str | None = None
    detail: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None

    @field_validator("last_error", "detail")
    @classmethod
    def _short_text(cls, value: str | None) -> str | None:
        return None if value is None else truncated(value, JOB_TEXT_MAX_CHARS)


class Hit(BaseModel):
    """One recalled lesson with its blended score and the parts it was made of."""

    model_config = ConfigDict(defer_build=DEFER_BUILD)

    lesson: Lesson
    score: float
    lexical: float = 0.0  # BM25 relevance (0 when the lesson came from the vector search alone)
    vector: float = 0.0  # cosine with the query (0 without an embedder)
    temporal: float = 0.0  # the prior: use, recency, confidence and importance
    utility: float = 0.5  # share of helpful outcomes when the lesson was injected (0.5: no evidence)


class ContextBlock(BaseModel):
    """Text to put in a prompt, the lessons it holds, and its size in tokens (never over the budget)."""

    model_config = ConfigDict(defer_build=DEFER_BUILD)

    text: str
    lesson_ids: list[str] = Field(default_factory=list)
    tokens: int = 0
    budget_tokens: int = 0
    formats: list[str] = Field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        """The injected lesson ids (same as ``lesson_ids``): pass them to ``record(..., context_ids=)``."""
        return self.lesson_ids

    def __str__(self) -> str:
        return self.text
