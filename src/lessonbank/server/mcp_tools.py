"""lessonbank's MCP tools and resources, shared by both transports: stdio (``lessonbank mcp``, the
local user, no key) and Streamable HTTP (``/mcp`` in ``lessonbank serve``, one API key per request).

Every tool is ``verb_noun``, has a title, an output schema (structured content, with the same JSON as
text for older clients) and annotations; its name, title, annotations and the role it needs are its
operation's, from the table in :mod:`lessonbank.operations` (read-only tools: ``read``). Every tool takes an optional
``namespace`` (default: the server's). Nothing an agent calls here deletes or archives anything:
``archive_lesson`` stages a pending proposal a person approves
(``lessonbank approve``, the dashboard), and ``consolidate`` only ever proposes.

Resources: ``lesson://{namespace}/{lesson_id}`` (one lesson as JSON) and ``lessons://{namespace}``
(the namespace's active lessons), under the same access rules as the tools.

A library error reaches the client as a tool error ``<code>: <message>`` (the REST API's stable
codes); anything unexpected is logged here, redacted, and the client reads only "internal error".
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import ToolAnnotations
from pydantic import Field, ValidationError

from lessonbank.bank import LessonBank
from lessonbank.errors import LessonbankError, NotFoundError
from lessonbank.models import Importance, LessonKind, Signal, Status, VerificationResult
from lessonbank.operations import BY_MCP_TOOL, OPERATIONS, mcp_hints
from lessonbank.operations import Operation as BankOperation
from lessonbank.proposals import Operation, Proposal
from lessonbank.redact import redact
from lessonbank.retrieval.scoring import utility
from lessonbank.server.auth import Principal
from lessonbank.server.banks import Banks
from lessonbank.server.errors import code_of
from lessonbank.server.mcp_models import (
    AddedLesson,
    ConsolidationResult,
    ContextResult,
    LessonList,
    LessonShown,
    LessonSummary,
    ProposalList,
    ProposalSummary,
    RecalledLesson,
    RecallResult,
    RecordedEpisode,
    ReflectionList,
    StagedProposal,
    lesson_uri,
)

log = logging.getLogger("lessonbank.server.mcp")

INSTRUCTIONS = (
    "lessonbank: lessons this agent learned from past tasks. Before a task, call get_context with the "
    "task and put its text in your prompt. After the task, call record_episode with the outcome and "
    "the context's lesson_ids, so lessons that helped gain weight and a failure is reflected on. "
    "add_lesson stores something you already know; archive_lesson only proposes an archive to a person."
)
LISTING_LIMIT = 500  # lessons in the lessons://{namespace} resource: a listing, not an export

Namespace = Annotated[
    str | None, Field(description="The namespace to work in (default: the server's namespace)")
]
F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------------------------- access


@dataclass(frozen=True)
class Access:
    """Which bank a call may use: ``principal_of`` says who sent the call's HTTP request (None over
    stdio), and that principal must hold ``role`` on the namespace."""

    banks: Banks
    default_namespace: str
    principal_of: Callable[[Any], Principal | None]

    def bank(self, ctx: Context, namespace: str | None, tool: str) -> tuple[LessonBank, Principal]:
        """The bank for MCP ``tool`` (or a resource's operation) on ``namespace``, once the caller
        holds the role the table in :mod:`lessonbank.operations` gives it."""
        chosen = self.default_namespace if namespace is None else namespace
        who = self.principal_of(ctx.request_context.request)
        if who is None:  # the HTTP endpoint checks keys before any call: this is a bug, so fail closed
            raise ToolError("unauthorized: no valid API key came with this request")
        operation = BY_MCP_TOOL[tool] if tool in BY_MCP_TOOL else OPERATIONS[tool]
        role = operation.role
        if not who.may(chosen, role):
            raise ToolError(f"forbidden: key {who.name!r} may not {role} namespace {chosen!r}")
        return self.banks.get(chosen), who


# ---------------------------------------------------------------------------------------------- helpers


def _guarded(fn: F) -> F:
    """``fn`` with the library's errors as tool errors the model can read and act on."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except LessonbankError as exc:
            raise ToolError(f"{code_of(exc)[0]}: {exc}") from None
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
            )
            raise ToolError(f"invalid_input: {problems}") from None
        except Exception:
            log.exception("MCP tool %s failed", fn.__name__)
            raise ToolError("internal: internal error; the server's log has the details") from None

    return call  # type: ignore[return-value]


def _add(server: MCPServer, fn: Callable[..., Any], operation: BankOperation) -> None:
    """Register ``fn`` as ``operation``'s tool: its name, title and annotations from the table (read-only
    when the operation needs only the read role); its docstring is the description the model reads."""
    assert fn.__name__ == operation.mcp, f"tool {fn.__name__} is not {operation.name}'s ({operation.mcp})"
    title = operation.mcp_title or operation.summary
    server.add_tool(
        _guarded(fn),
        name=fn.__name__,
        title=title,
        description=inspect.getdoc(fn),
        annotations=ToolAnnotations(title=title, **mcp_hints(operation)),
        structured_output=True,
    )


def _decision(bank: LessonBank, episode_id: str) -> RecordedEpisode:
    _, decision = bank.store.get_episode(episode_id, namespace=bank.namespace)
    return RecordedEpisode(
        namespace=bank.namespace,
        episode_id=episode_id,
        reflect=bool(decision and decision.reflect),
        trigger=decision.trigger if decision else None,
        reflector=decision.reflector if decision else None,
        reason=decision.reason if decision else "",
    )


def _pending_archive(bank: LessonBank, lesson_id: str) -> Proposal | None:
    for proposal in bank.proposals(status="pending", limit=200):
        for op in proposal.operations:
            if op.kind == "archive" and op.lesson_ids == [lesson_id] and op.status == "proposed":
                return proposal
    return None


# ---------------------------------------------------------------------------------------------- server


def build_server(access: Access) -> MCPServer:
    """The MCP server over ``access``'s banks (see the module docstring)."""
    # WARNING: the SDK sets up logging when the root logger has none; lessonbank logs its own way.
    server: MCPServer = MCPServer(
        "lessonbank", title="lessonbank", version="0.1.0", instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def recall_lessons(
        query: Annotated[str, Field(min_length=1, max_length=10_000, description="What you are about to do")],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50)] = 5,
        kind: list[LessonKind] | None = None,
        tags: list[str] | None = None,
        task_type: str | None = None,
        agent: str | None = None,
        goal_id: str | None = None,
        mode: Literal["auto", "lexical", "vector", "hybrid"] | None = None,
        namespace: Namespace = None,
    ) -> RecallResult:
        """The k stored lessons most relevant to a query, best first, with their scores. Reads only;
        use get_context for a ready prompt block within a token budget."""
        bank, _ = access.bank(ctx, namespace, "recall_lessons")
        hits = bank.recall(
            query,
            k=k,
            kind=kind,
            tags=tags or (),
            task_type=task_type,
            agent=agent,
            goal_id=goal_id,
            mode=mode,
        )
        return RecallResult(
            namespace=bank.namespace,
            hits=[
                RecalledLesson(score=hit.score, **LessonSummary.of(hit.lesson).model_dump()) for hit in hits
            ],
        )

    def get_context(
        ctx: Context,
        task: Annotated[str | None, Field(max_length=10_000, description="The task about to start")] = None,
        goal_id: str | None = None,
        agent: str | None = None,
        task_type: str | None = None,
        budget_tokens: Annotated[int, Field(ge=1, le=32_000)] = 800,
        formats: list[
            Literal["long_term_memory", "past_reflections", "learned_rules", "replay", "core_memory"]
        ]
        | None = None,
        namespace: Namespace = None,
    ) -> ContextResult:
        """A block of learned lessons to put in your prompt before a task, never over budget_tokens.
        Sections: long_term_memory (lessons), past_reflections (goal_id's insights), learned_rules
        (agent's rules), replay (examples of task_type), core_memory. Changes no lesson's text (it
        counts the injection as a use); pass the block's lesson_ids as record_episode's context_ids."""
        bank, _ = access.bank(ctx, namespace, "get_context")
        block = bank.context(
            task,
            goal_id=goal_id,
            agent=agent,
            task_type=task_type,
            budget_tokens=budget_tokens,
            formats=formats,
        )
        return ContextResult(namespace=bank.namespace, **block.model_dump())

    def record_episode(
        task: Annotated[str, Field(min_length=1, description="What the agent was asked to do")],
        ctx: Context,
        status: Status = "success",
        error: str | None = None,
        output: Annotated[str | None, Field(description="A summary of what the agent produced")] = None,
        task_type: str | None = None,
        agent: str | None = None,
        goal_id: str | None = None,
        loop_id: str | None = None,
        iteration: Annotated[int | None, Field(ge=0)] = None,
        reward: Annotated[float | None, Field(ge=0.0, le=1.0)] = None,
        duration_s: Annotated[float | None, Field(ge=0.0)] = None,
        importance: Importance = "normal",
        signals: list[Signal] | None = None,
        tags: list[str] | None = None,
        actions: list[str] | None = None,
        verification: list[VerificationResult] | None = None,
        context_ids: Annotated[
            list[str] | None, Field(description="The lesson_ids of the get_context block used for this task")
        ] = None,
        namespace: Namespace = None,
    ) -> RecordedEpisode:
        """Report one attempt at a task. Returns at once: if the policy decides the episode is worth
        reflecting on (a failure, an error, an important task), a reflection is queued and its lessons
        arrive later. context_ids credit (success) or debit (failure) the lessons that were injected."""
        bank, _ = access.bank(ctx, namespace, "record_episode")
        fields: dict[str, Any] = {
            "task": task,
            "status": status,
            "error": error,
            "output": output,
            "task_type": task_type,
            "agent": agent,
            "goal_id": goal_id,
            "loop_id": loop_id,
            "iteration": iteration,
            "reward": reward,
            "duration_s": duration_s,
            "importance": importance,
            "signals": signals or [],
            "tags": tags or [],
            "actions": actions or [],
            "verification": verification or [],
        }
        episode = bank.record(fields, context_ids=context_ids)
        return _decision(bank, episode.id)

    def finish_goal(
        goal_id: Annotated[str, Field(min_length=1)],
        ctx: Context,
        status: Literal["completed", "failed"] = "completed",
        title: str | None = None,
        outputs: list[str] | None = None,
        errors: list[str] | None = None,
        agent: str | None = None,
        namespace: Namespace = None,
    ) -> RecordedEpisode:
        """Report that a goal reached its end (completed or failed), with its tasks' outputs and
        errors; an insight about the goal is reflected in the background and comes back in
        get_context's past_reflections for that goal_id."""
        bank, _ = access.bank(ctx, namespace, "finish_goal")
        episode = bank.finish_goal(
            goal_id, title=title, status=status, outputs=outputs or (), errors=errors or (), agent=agent
        )
        return _decision(bank, episode.id)

    def add_lesson(
        text: Annotated[
            str, Field(min_length=1, max_length=4_000, description="The lesson, one or two sentences")
        ],
        ctx: Context,
        tags: list[str] | None = None,
        kind: LessonKind = "lesson",
        task_type: str | None = None,
        agent: str | None = None,
        goal_id: str | None = None,
        importance: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
        learned_from: Annotated[str | None, Field(description="The task it was learned on")] = None,
        namespace: Namespace = None,
    ) -> AddedLesson:
        """Store a lesson you already know, without an LLM. The same text again reinforces the stored
        lesson instead of adding a copy. A lesson that reads like an instruction to the model, or that
        comes from an untrusted agent, is quarantined until a person approves it."""
        bank, _ = access.bank(ctx, namespace, "add_lesson")
        lesson = bank.add_lesson(
            text,
            tags=tags or (),
            kind=kind,
            task_type=task_type,
            agent=agent,
            goal_id=goal_id,
            importance=importance,
            learned_from=learned_from,
        )
        return AddedLesson(namespace=bank.namespace, lesson=LessonSummary.of(lesson))

    def show_lesson(
        lesson_id: Annotated[str, Field(min_length=1)], ctx: Context, namespace: Namespace = None
    ) -> LessonShown:
        """One stored lesson, whole: text, provenance, counters, status, supersession."""
        bank, _ = access.bank(ctx, namespace, "show_lesson")
        lesson = bank.get_lesson(lesson_id)
        return LessonShown(
            namespace=bank.namespace,
            uri=lesson_uri(bank.namespace, lesson.id),
            utility=round(utility(lesson.helpful, lesson.harmful), 4),
            lesson=lesson,
        )

    def list_rules(
        ctx: Context,
        agent: str | None = None,
        stream: Literal["tactical", "strategic"] | None = None,
        namespace: Namespace = None,
    ) -> LessonList:
        """The learned rules (IF condition THEN action), strategic first; of one agent, or of all."""
        bank, _ = access.bank(ctx, namespace, "list_rules")
        rules = bank.rules(agent=agent, stream=stream)
        return LessonList(namespace=bank.namespace, lessons=[LessonSummary.of(r) for r in rules])

    def search_reflections(
        ctx: Context,
        failure_category: list[str] | None = None,
        min_confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0,
        keywords: list[str] | None = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        namespace: Namespace = None,
    ) -> ReflectionList:
        """Past Reflexion-loop reflections by failure category, confidence and keywords, newest first:
        what went wrong before on similar tasks, its root cause and what was learned."""
        bank, _ = access.bank(ctx, namespace, "search_reflections")
        found = bank.search_reflections(
            failure_category=failure_category,
            min_confidence=min_confidence,
            keywords=keywords or (),
            limit=limit,
        )
        return ReflectionList(
            namespace=bank.namespace, reflections=json.loads(json.dumps(found, default=str))
        )

    def list_proposals(
        ctx: Context,
        status: Literal["pending", "applied", "partially_applied", "rejected", "reverted", "failed"]
        | None = "pending",
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        namespace: Namespace = None,
    ) -> ProposalList:
        """Consolidation proposals (pending ones by default): what a cycle or an agent proposed to
        change, each operation with its reason. A person approves or rejects them."""
        bank, _ = access.bank(ctx, namespace, "list_proposals")
        found = bank.proposals(status=status, limit=limit)
        return ProposalList(namespace=bank.namespace, proposals=[ProposalSummary.of(p) for p in found])

    def consolidate(ctx: Context, wait: bool = False, namespace: Namespace = None) -> ConsolidationResult:
        """Start a consolidation cycle over the namespace (survey, merge, archive, patterns, core
        memory). It only proposes: the result is a pending proposal a person approves, never applied
        here. wait=false (the default) leaves the cycle to a worker; list_proposals shows its proposal."""
        bank, _ = access.bank(ctx, namespace, "consolidate")
        proposal = bank.consolidate(wait=wait)
        if not wait:
            message = "cycle queued; its proposal appears in list_proposals once a worker has run it"
        elif proposal is None:
            message = "nothing to propose"
        else:
            message = f"proposal {proposal.id} is pending until a person approves or rejects it"
        return ConsolidationResult(
            namespace=bank.namespace,
            queued=not wait,
            proposal=ProposalSummary.of(proposal) if proposal is not None else None,
            message=message,
        )

    def archive_lesson(
        lesson_id: Annotated[str, Field(min_length=1)],
        reason: Annotated[str, Field(min_length=1, max_length=1_000, description="Why it is wrong or stale")],
        ctx: Context,
        agent: str | None = None,
        namespace: Namespace = None,
    ) -> StagedProposal:
        """Ask to forget a lesson that is wrong or out of date. Nothing is archived or deleted now: this
        stages a pending proposal (one ARCHIVE operation with your reason) that a person approves or
        rejects; until then the lesson stays in use. Asking again returns the same pending proposal."""
        bank, who = access.bank(ctx, namespace, "archive_lesson")
        # The agent's words are kept in the proposal it stages: redacted (redact.MCP_ARCHIVE_TEXT_FIELDS).
        reason, agent = redact(reason), redact(agent) if agent is not None else None
        lesson = bank.get_lesson(lesson_id)
        if lesson.status == "archived":
            raise ToolError(f"invalid_input: lesson {lesson.id} is already archived")
        proposal = _pending_archive(bank, lesson.id)
        if proposal is None:
            requester = agent or who.name
            proposal = Proposal(
                namespace=bank.namespace,
                cycle_id=f"mcp:{who.name}",
                operations=[Operation(kind="archive", lesson_ids=[lesson.id], reason=reason)],
                summary=f"archive of {lesson.id} asked by {requester} over MCP: {reason}"[:1_000],
                based_on={lesson.id: lesson.updated_at},
                items_processed=1,
                metadata={"source": "mcp", "requested_by": who.name, "agent": agent},
            )
            bank.store.save_proposal(proposal)
        return StagedProposal(
            namespace=bank.namespace,
            proposal=ProposalSummary.of(proposal),
            message=f"proposal {proposal.id} is pending; the lesson stays active until a person approves it",
        )

    tools = {
        fn.__name__: fn
        for fn in (
            get_context,
            recall_lessons,
            record_episode,
            finish_goal,
            add_lesson,
            show_lesson,
            list_rules,
            search_reflections,
            list_proposals,
            consolidate,
            archive_lesson,
        )
    }
    # Every tool the table names, in the order written here (the model reads get_context first).
    assert sorted(tools) == sorted(BY_MCP_TOOL), "the MCP tools and the table's disagree"
    for name, fn in tools.items():
        _add(server, fn, BY_MCP_TOOL[name])
    _resources(server, access)
    return server


def _resources(server: MCPServer, access: Access) -> None:
    def bank_of(ctx: Context, namespace: str, operation: str) -> LessonBank:
        try:
            return access.bank(ctx, namespace, operation)[0]
        except ToolError as exc:
            raise ResourceError(str(exc)) from None
        except LessonbankError as exc:
            raise ResourceError(f"{code_of(exc)[0]}: {exc}") from None

    @server.resource(
        "lesson://{namespace}/{lesson_id}",
        name="lesson",
        title="A lesson",
        description="One stored lesson as JSON: text, provenance, counters, status.",
        mime_type="application/json",
    )
    def read_lesson(namespace: str, lesson_id: str, ctx: Context) -> str:
        bank = bank_of(ctx, namespace, "get_lesson")
        try:
            lesson = bank.get_lesson(lesson_id)
        except NotFoundError:
            raise ResourceNotFoundError(
                f"not_found: no lesson {lesson_id!r} in namespace {namespace!r}"
            ) from None
        return lesson.model_dump_json(indent=2)

    @server.resource(
        "lessons://{namespace}",
        name="lessons",
        title="Lessons of a namespace",
        description=f"The namespace's active lessons (up to {LISTING_LIMIT}) as JSON, each with its lesson:// URI.",
        mime_type="application/json",
    )
    def list_lessons(namespace: str, ctx: Context) -> str:
        bank = bank_of(ctx, namespace, "lessons")
        lessons = bank.lessons(limit=LISTING_LIMIT)
        return json.dumps(
            {
                "namespace": bank.namespace,
                "lessons": [LessonSummary.of(lesson).model_dump() for lesson in lessons],
            },
            ensure_ascii=False,
            indent=2,
        )
