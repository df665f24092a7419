"""The REST API's request bodies, each with the limits the route enforces before the bank sees it.

Limits are generous for real use and small enough that one request is bounded work: a recall asks
for at most :data:`MAX_K` lessons, a listing for at most :data:`MAX_LIMIT` from an offset of at most
:data:`MAX_OFFSET`, an import carries at most :data:`MAX_IMPORT` records (and the whole body stays
under the server's byte cap). Tags are checked here with the records' own rule, and ids are as long
as the records allow (:data:`~lessonbank.models.ID_MAX_CHARS`), so what a route accepts the bank
can store and another route can read back. What the bank checks itself (an empty task, an unknown
kind or status) it still checks: those come back as 422 with the bank's own message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from fastapi import Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from lessonbank.models import (
    ID_MAX_CHARS,
    LESSON_MAX_CHARS,
    MAX_CONTEXT_IDS,
    MAX_TAGS,
    Episode,
    JobStatus,
    LessonKind,
    clean_tags,
)
from lessonbank.services.expansion import MAX_LIMIT as MAX_EXPAND_LESSONS

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


# Tags as the records take them (trimmed, lowercased, at most 64 characters each): a tag the bank
# would refuse is the caller's 422 here, never a 500 from deep inside the bank.
Tags = Annotated[list[str], Field(max_length=MAX_TAGS), AfterValidator(clean_tags)]
# Query parameters of the listings.
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
JobStatuses = Annotated[list[JobStatus] | None, Query(max_length=len(get_args(JobStatus)))]


def _name() -> Any:
    return Field(default=None, min_length=1, max_length=NAME_CHARS)


def _actor() -> Any:
    return Field(default="api", min_length=1, max_length=NAME_CHARS, description="Who decided, for the audit")


class Body(BaseModel):
    # An unknown field is a client's typo or a newer client: say so rather than ignore it.
    model_config = ConfigDict(extra="forbid")


class RecordBody(Body):
    episode: Episode
    context_ids: list[str] | None = Field(default=None, max_length=MAX_CONTEXT_IDS)


class ReflectBody(Body):
    reflector: str | None = _name()


class FinishGoalBody(Body):
    title: str | None = Field(default=None, max_length=1_000)
    status: Literal["completed", "failed"] = "completed"
    outputs: list[str] = Field(default_factory=list, max_length=MAX_GOAL_ITEMS)
    errors: list[str] = Field(default_factory=list, max_length=MAX_GOAL_ITEMS)
    agent: str | None = _name()


class AddLessonBody(Body):
    text: str = Field(min_length=1, max_length=LESSON_MAX_CHARS)
    tags: Tags = Field(default_factory=list)
    kind: LessonKind = "lesson"
    task_type: str | None = _name()
    agent: str | None = _name()
    goal_id: str | None = _name()
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    pinned: bool = False
    learned_from: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)


class RecallBody(Body):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=5, ge=1, le=MAX_K)
    kind: str | list[str] | None = None
    tags: Tags = Field(default_factory=list)
    task_type: str | None = _name()
    agent: str | None = _name()
    goal_id: str | None = _name()
    mode: Literal["auto", "lexical", "vector", "hybrid"] | None = None
    hyde: bool | None = None


class ContextBody(Body):
    task: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    goal_id: str | None = _name()
    agent: str | None = _name()
    task_type: str | None = _name()
    budget_tokens: int = Field(default=800, ge=0, le=MAX_BUDGET_TOKENS)
    formats: list[str] | None = Field(default=None, max_length=10)
    kind: str | list[str] | None = None
    tags: Tags = Field(default_factory=list)


class ArchiveBody(Body):
    reason: str | None = Field(default=None, max_length=REASON_CHARS)
    actor: str = _actor()


class ActorBody(Body):
    actor: str = _actor()


class ExpandBody(Body):
    lesson_ids: list[str] | None = Field(default=None, max_length=MAX_EXPAND_LESSONS)
    limit: int | None = Field(default=None, ge=1, le=MAX_EXPAND_LESSONS)
    dry_run: bool = False
    actor: str = _actor()


class EditBody(Body):
    pinned: bool | None = None
    tags: Tags | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    actor: str = _actor()


class ImportBody(Body):
    lessons: list[dict[str, Any]] = Field(max_length=MAX_IMPORT)


class RetryJobsBody(Body):
    job_ids: list[str] | None = Field(default=None, max_length=MAX_LIMIT)


class PurgeJobsBody(Body):
    statuses: list[str] = Field(default_factory=lambda: ["done"], min_length=1, max_length=5)


class FlushBody(Body):
    timeout: float = Field(default=30.0, ge=0.0, le=MAX_FLUSH_S)


class ConsolidateBody(Body):
    dry_run: bool = False
    wait: bool = True


class EndSessionBody(Body):
    agent: str | None = _name()
    session_id: str | None = _name()


class ApproveBody(Body):
    only: list[str] | None = Field(default=None, max_length=MAX_LIMIT)
    edits: dict[str, str] | None = None
    actor: str = _actor()


class RejectBody(Body):
    reason: str | None = Field(default=None, max_length=REASON_CHARS)
    actor: str = _actor()


class DryRunBody(Body):
    dry_run: bool = False


class RetentionBody(Body):
    older_than_days: float | None = Field(default=None, ge=0.0)
    dry_run: bool = False


class Count(BaseModel):
    """How many records an operation touched."""

    count: int


class Done(BaseModel):
    done: bool


class CoreMemory(BaseModel):
    text: str
