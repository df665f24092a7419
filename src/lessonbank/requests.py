"""Each bank operation's arguments as one pydantic model: the request that travels from a surface to
the bank. Pure data, no I/O, no web framework.

A request model's fields are the bank method's parameters, by the same names: the ids a REST path
names (``lesson_id``…), then what a GET or DELETE sends as query parameters and any other method as
its JSON body. The REST API validates a request with its model (the body a route reads IS the model,
less the path's ids; see :mod:`lessonbank.server.rest`), the remote clients build one per call
(:mod:`lessonbank.remote`), and the table of operations (:mod:`lessonbank.operations`) names each
operation's model. A model's type argument is what the operation returns (``Request[list[Hit]]``).

Limits are generous for real use and small enough that one request is bounded work: a recall asks for
at most :data:`MAX_K` lessons, a listing for at most :data:`MAX_LIMIT` from an offset of at most
:data:`MAX_OFFSET`, an import carries at most :data:`MAX_IMPORT` records. Tags are checked with the
records' own rule, and ids are as long as the records allow (:data:`~lessonbank.models.ID_MAX_CHARS`),
so what a route accepts the bank can store and another route can read back. Where the bank reads one
string as a list of one (tags, formats, job ids, statuses), so does the model; where the bank refuses
one string (a goal's outputs, a proposal's ``only``), so does the model. What the bank checks itself
(an empty task, an unknown kind) it still checks, with its own message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, Self, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from lessonbank.models import (
    ID_MAX_CHARS,
    LESSON_MAX_CHARS,
    MAX_CONTEXT_IDS,
    MAX_TAGS,
    AuditEntry,
    ContextBlock,
    Decision,
    Episode,
    Hit,
    Job,
    JobStatus,
    Lesson,
    LessonKind,
    clean_tags,
)
from lessonbank.proposals import DreamRun, Proposal

if TYPE_CHECKING:
    from lessonbank.services.expansion import ExpansionReport  # noqa: F401 (named below as a string)

R = TypeVar("R")

MAX_K = 100  # lessons per recall or replay: a prompt never holds more
MAX_LIMIT = 1_000  # rows per listing page
# Far past any bank's rows, and inside every store's integer (SQLite and PostgreSQL take 64 bits).
MAX_OFFSET = 1_000_000_000
MAX_IMPORT = 10_000  # records per import request; larger banks go through `lessonbank import`
MAX_QUERY_CHARS = 20_000  # a task or query: far above a prompt's task, far below the body cap
MAX_BUDGET_TOKENS = 100_000
MAX_FLUSH_S = 60.0  # a request that waits for the worker holds a server thread no longer than this
NAME_CHARS = ID_MAX_CHARS  # ids (the records' own limit), agents, goal ids, task types, actors, reflectors
REASON_CHARS = 2_000
MAX_GOAL_ITEMS = 100  # outputs or errors of one goal
MAX_MANY = 100  # values of one repeated query parameter
MAX_EXPAND_LESSONS = 10_000  # lessons one expansion takes (services.expansion.MAX_LIMIT, pinned by a test)

# The bank's own vocabularies, as the requests spell them (tests/test_operations.py pins each to its home).
LessonSort = Literal["created", "score", "access", "confidence", "utility"]
Tier = Literal["active", "fading", "dormant", "archive"]
ExportFormat = Literal["json", "jsonl", "markdown", "skills", "agents-md"]
GoalState = Literal["completed", "failed"]


def _listed(value: Any) -> Any:
    """One string where the bank takes a sequence of strings: a list of one, as the bank reads it."""
    return [value] if isinstance(value, str) else value


# Tags as the records take them (trimmed, lowercased, at most 64 characters each): a tag the bank
# would refuse is the caller's 422, never a 500 from deep inside the bank.
Tags = Annotated[list[str], BeforeValidator(_listed), Field(max_length=MAX_TAGS), AfterValidator(clean_tags)]
Strings = Annotated[list[str], BeforeValidator(_listed)]
Id = Annotated[str, Field(min_length=1, max_length=NAME_CHARS)]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT)]
Many = Annotated[list[str] | None, BeforeValidator(_listed), Field(max_length=MAX_MANY)]


def _name() -> Any:
    return Field(default=None, min_length=1, max_length=NAME_CHARS)


def _actor() -> Any:
    return Field(default="api", min_length=1, max_length=NAME_CHARS, description="Who decided, for the audit")


class Request(BaseModel, Generic[R]):
    """An operation's arguments; ``R`` is what the operation returns."""

    # An unknown field is a client's typo or a newer client: say so rather than ignore it.
    model_config = ConfigDict(extra="forbid")

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> Self:
        """The request a facade method's ``arguments`` (its ``locals()``) make: each field read by its
        name, since the method's parameters are the model's fields (``tests/test_operations.py`` pins
        that). Not validated here: the bank checks its arguments itself, with its own messages."""
        return cls.model_construct(**{name: arguments[name] for name in cls.model_fields})


# ---------------------------------------------------------------------- episodes and reflection


class RecordRequest(Request[Episode]):
    episode: Episode
    context_ids: list[str] | None = Field(default=None, max_length=MAX_CONTEXT_IDS)


class ReflectRequest(Request[Decision]):
    episode_id: Id
    reflector: str | None = _name()


class DecisionsRequest(Request[list[dict[str, Any]]]):
    agent: str | None = _name()
    limit: Limit = 50


class ShowRequest(Request[dict[str, Any]]):
    record_id: Id


class SearchReflectionsRequest(Request[list[dict[str, Any]]]):
    failure_category: Many = None
    min_confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    keywords: Strings = Field(default_factory=list, max_length=MAX_MANY)
    limit: Limit = 10


# ---------------------------------------------------------------------- lessons


class AddLessonRequest(Request[Lesson]):
    text: str = Field(min_length=1, max_length=LESSON_MAX_CHARS)
    tags: Tags = Field(default_factory=list)
    kind: LessonKind = "lesson"
    task_type: str | None = _name()
    agent: str | None = _name()
    goal_id: str | None = _name()
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    pinned: bool = False
    learned_from: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)


class LessonsRequest(Request[list[Lesson]]):
    kind: Many = None
    tags: Strings = Field(default_factory=list, max_length=MAX_MANY)
    status: Strings = Field(default_factory=lambda: ["active"], max_length=10)
    limit: Limit = 100
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort: LessonSort = "created"
    tier: Tier | None = None


class GetLessonRequest(Request[Lesson]):
    lesson_id: Id


class ForgetRequest(Request[None]):
    lesson_id: Id
    actor: str = _actor()


class ArchiveRequest(Request[Lesson]):
    lesson_id: Id
    reason: str | None = Field(default=None, max_length=REASON_CHARS)
    actor: str = _actor()


class EditLessonRequest(Request[Lesson]):
    lesson_id: Id
    pinned: bool | None = None
    tags: Tags | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    actor: str = _actor()


class RestoreRequest(Request[Lesson]):
    lesson_id: Id
    actor: str = _actor()


class RecallRequest(Request[list[Hit]]):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=5, ge=1, le=MAX_K)
    kind: str | list[str] | None = None
    tags: Tags = Field(default_factory=list)
    task_type: str | None = _name()
    agent: str | None = _name()
    goal_id: str | None = _name()
    mode: Literal["auto", "lexical", "vector", "hybrid"] | None = None
    hyde: bool | None = None


class ContextRequest(Request[ContextBlock]):
    task: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    goal_id: str | None = _name()
    agent: str | None = _name()
    task_type: str | None = _name()
    budget_tokens: int = Field(default=800, ge=0, le=MAX_BUDGET_TOKENS)
    formats: Strings | None = Field(default=None, max_length=10)
    kind: str | list[str] | None = None
    tags: Tags = Field(default_factory=list)


class AuditRequest(Request[list[AuditEntry]]):
    lesson_id: str | None = _name()
    limit: Limit = 100


class ImportRequest(Request[dict[str, int]]):
    lessons: list[dict[str, Any]] = Field(max_length=MAX_IMPORT)


class ExportRequest(Request[str]):
    format: ExportFormat = "json"
    live_only: bool = False


class ExpandRequest(Request["ExpansionReport"]):
    lesson_ids: list[str] | None = Field(default=None, max_length=MAX_EXPAND_LESSONS)
    limit: int | None = Field(default=None, ge=1, le=MAX_EXPAND_LESSONS)
    dry_run: bool = False
    actor: str = _actor()


class RescreenRequest(Request[dict[str, int]]):
    dry_run: bool = False


class EmbedMissingRequest(Request[int]):
    pass


class RetentionRequest(Request[dict[str, int]]):
    older_than_days: float | None = Field(default=None, ge=0.0)
    dry_run: bool = False


# ---------------------------------------------------------------------- goals, rules, replay


class FinishGoalRequest(Request[Episode]):
    goal_id: Id
    title: str | None = Field(default=None, max_length=1_000)
    status: GoalState = "completed"
    outputs: list[str] = Field(default_factory=list, max_length=MAX_GOAL_ITEMS)
    errors: list[str] = Field(default_factory=list, max_length=MAX_GOAL_ITEMS)
    agent: str | None = _name()


class InsightsRequest(Request[list[Lesson]]):
    goal_id: str | None = _name()


class RulesRequest(Request[list[Lesson]]):
    agent: str | None = _name()
    stream: Literal["tactical", "strategic"] | None = None


class ConfirmRuleRequest(Request[Lesson]):
    rule_id: Id


class ReplayRequest(Request[list[Lesson]]):
    task: str | None = Field(default=None, min_length=1, max_length=MAX_QUERY_CHARS)
    task_type: str | None = _name()
    k: int = Field(default=3, ge=1, le=MAX_K)


# ---------------------------------------------------------------------- jobs and state


class JobsRequest(Request[list[Job]]):
    status: list[JobStatus] | None = Field(default=None, max_length=len(get_args(JobStatus)))
    limit: Limit = 100


class RetryJobsRequest(Request[int]):
    job_ids: Strings | None = Field(default=None, max_length=MAX_LIMIT)


class PurgeJobsRequest(Request[int]):
    statuses: Strings = Field(default_factory=lambda: ["done"], min_length=1, max_length=5)


class PendingRequest(Request[dict[str, int]]):
    pass


class StatsRequest(Request[dict[str, Any]]):
    pass


class AnalyticsRequest(Request[dict[str, Any]]):
    pass


class FlushRequest(Request[bool]):
    timeout: float = Field(default=30.0, ge=0.0, le=MAX_FLUSH_S)


# ---------------------------------------------------------------------- consolidation


class ConsolidateRequest(Request[Proposal | None]):
    dry_run: bool = False
    wait: bool = True


class EndSessionRequest(Request[Job | None]):
    agent: str | None = _name()
    session_id: str | None = _name()


class ProposalsRequest(Request[list[Proposal]]):
    status: Many = None
    limit: Limit = 50


class ProposalRequest(Request[Proposal]):
    proposal_id: Id


class ProposalMarkdownRequest(Request[str]):
    proposal_id: Id


class ApproveRequest(Request[Proposal]):
    proposal_id: Id
    only: list[str] | None = Field(default=None, max_length=MAX_LIMIT)
    edits: dict[str, str] | None = None
    actor: str = _actor()


class RejectRequest(Request[Proposal]):
    proposal_id: Id
    reason: str | None = Field(default=None, max_length=REASON_CHARS)
    actor: str = _actor()


class RevertRequest(Request[Proposal]):
    proposal_id: Id
    actor: str = _actor()


class DreamsRequest(Request[list[DreamRun]]):
    limit: Limit = 50


class CoreMemoryRequest(Request[str]):
    pass


# ---------------------------------------------------------------------- integrations


class ClaudeHookRequest(Request[dict[str, Any]]):
    """A Claude Code hook payload, as its ``http`` hook posts it: the fields lessonbank reads; any
    other field is accepted (each event sends its own, and Claude Code adds fields over time)."""

    model_config = ConfigDict(extra="allow")

    hook_event_name: str = Field(min_length=1, max_length=100)
    session_id: Id
    transcript_path: str | None = Field(default=None, max_length=4_096)
    cwd: str | None = Field(default=None, max_length=4_096)
    source: str | None = Field(default=None, max_length=100)
    prompt: str | None = None
    tool_name: str | None = Field(default=None, max_length=NAME_CHARS)
    tool_input: Any = None
    tool_response: Any = None
    error: Any = None
    is_interrupt: bool | None = None
    last_assistant_message: str | None = None


def result_of(model: type[Request[Any]]) -> Any:
    """What the operation of request ``model`` returns: its type argument (a string for a type that
    lives above this module, resolved by the surface that reads it)."""
    for cls in model.__mro__:
        args = getattr(cls, "__pydantic_generic_metadata__", {}).get("args", ())
        if getattr(cls, "__pydantic_generic_metadata__", {}).get("origin") is not None and args:
            return args[0]
    raise TypeError(f"{model.__name__} names no result type")
