"""What the MCP tools return (:mod:`.mcp_tools`): pydantic models whose JSON schemas are the tools'
output schemas. Pure data, no I/O. Lists carry :class:`LessonSummary` (compact, for a prompt);
``show_lesson`` the whole :class:`~lessonbank.models.Lesson`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from lessonbank.models import Lesson, LessonKind
from lessonbank.proposals import Proposal


def lesson_uri(namespace: str, lesson_id: str) -> str:
    return f"lesson://{namespace}/{lesson_id}"


class LessonSummary(BaseModel):
    """A lesson as a list shows it; ``show_lesson`` or the ``uri`` resource has the whole record."""

    id: str
    uri: str
    kind: LessonKind
    content: str
    tags: list[str]
    task_type: str | None
    agent: str | None
    status: str
    importance: float
    confidence: float
    pinned: bool
    helpful: int
    harmful: int

    @classmethod
    def of(cls, lesson: Lesson) -> LessonSummary:
        return cls(uri=lesson_uri(lesson.namespace, lesson.id), **lesson.model_dump(include=_SUMMARY))


_SUMMARY = set(LessonSummary.model_fields) - {"uri"}


class RecalledLesson(LessonSummary):
    score: float


class RecallResult(BaseModel):
    namespace: str
    hits: list[RecalledLesson]


class ContextResult(BaseModel):
    namespace: str
    text: str = Field(description="The block to put in the prompt ('' when nothing applies)")
    lesson_ids: list[str] = Field(description="Pass these as context_ids to record_episode")
    tokens: int
    budget_tokens: int
    formats: list[str]


class RecordedEpisode(BaseModel):
    namespace: str
    episode_id: str
    reflect: bool = Field(description="Whether a reflection was queued (it runs in the background)")
    trigger: str | None
    reflector: str | None
    reason: str


class AddedLesson(BaseModel):
    namespace: str
    lesson: LessonSummary


class LessonShown(BaseModel):
    namespace: str
    uri: str
    utility: float = Field(description="Share of helpful outcomes when injected (0.5: no evidence yet)")
    lesson: Lesson


class LessonList(BaseModel):
    namespace: str
    lessons: list[LessonSummary]


class ReflectionList(BaseModel):
    namespace: str
    reflections: list[dict[str, Any]] = Field(description="AIWG reflection-memory records, newest first")


class OperationSummary(BaseModel):
    id: str
    kind: str
    lesson_ids: list[str]
    reason: str
    status: str
    text: str | None = Field(description="The lesson it would write, or its evolution-log entry")


class ProposalSummary(BaseModel):
    id: str
    status: str
    trigger: str
    created_at: str
    summary: str
    operations: list[OperationSummary]

    @classmethod
    def of(cls, proposal: Proposal) -> ProposalSummary:
        return cls(
            id=proposal.id,
            status=proposal.status,
            trigger=proposal.trigger,
            created_at=proposal.created_at.isoformat(),
            summary=proposal.summary,
            operations=[
                OperationSummary(
                    id=op.id,
                    kind=op.kind,
                    lesson_ids=op.lesson_ids,
                    reason=op.reason,
                    status=op.status,
                    text=op.lesson.content if op.lesson is not None else op.text,
                )
                for op in proposal.operations
            ],
        )


class ProposalList(BaseModel):
    namespace: str
    proposals: list[ProposalSummary]


class ConsolidationResult(BaseModel):
    namespace: str
    queued: bool = Field(description="True when the cycle was left to a worker (wait=false)")
    proposal: ProposalSummary | None
    message: str


class StagedProposal(BaseModel):
    namespace: str
    proposal: ProposalSummary
    message: str
