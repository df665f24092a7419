"""The table of bank operations: what each one needs and where each surface exposes it.

One record per operation: its name, a one-line summary, the role it needs (``read`` < ``write`` <
``admin``), and where it is reachable — the REST route (method and path under ``/api/v1``), the MCP
tool, the dashboard action. Every surface asks this table for the role of what it is about to do,
so no surface keeps its own idea of roles: the REST routes are declared from it
(:mod:`lessonbank.server.rest`), the MCP tools check it per call (:mod:`lessonbank.server.mcp_tools`),
the dashboard's pages and forms check it (:mod:`lessonbank.server.dashboard`), and the security
suite (``tests/security/``) walks it: every operation, every role, every surface it names.

Some operations have no route of their own: they are what another call *becomes* for some inputs,
and need more than the call itself:

- ``approve_lesson``: restoring a quarantined or pending lesson is its approval (admin), while
  restoring an archived one is a write (:func:`restore_operation`);
- ``pin_lesson``: adding a lesson already pinned is what editing reserves for admin;
- ``import_counters``: an import that brings its own counters and pins (``helpful``, ``harmful``,
  ``access_count``, ``pinned``…); without admin they are dropped (:data:`ADMIN_LESSON_FIELDS`).

Roles:

- ``read``: recall, context, lessons, show, goals, insights, rules, replay, jobs, stats, proposals, audit;
- ``write``: that and record, reflect, add, import, archive, restore, consolidate, finish a goal;
- ``admin``: that and what a person decides: approve, reject, revert proposals, forget, edit, pin,
  retry jobs, approve a quarantined lesson.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from lessonbank import requests as rq

if TYPE_CHECKING:
    from lessonbank.models import Lesson

Role = Literal["read", "write", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)

# Lesson fields that rank a lesson or keep it alive: set by outcomes, use and a person, never by a
# writer from outside (an import by a write key drops them, with a warning).
ADMIN_LESSON_FIELDS = ("pinned", "helpful", "harmful", "access_count", "last_accessed")


def at_least(held: Role, needed: Role) -> bool:
    """Whether a principal holding ``held`` may do what needs ``needed``."""
    return ROLES.index(held) >= ROLES.index(needed)


@dataclass(frozen=True)
class Operation:
    """One bank operation and where it is exposed (None: not on that surface).

    ``request`` is the operation's arguments as one model (:mod:`lessonbank.requests`); its fields are
    the bank method's parameters, so a surface calls ``bank.<name>(**arguments)``. ``envelope``: the
    REST answer wraps the result as ``{envelope: result}`` (a bare count, flag or text is no JSON
    object). ``mcp_title`` and ``idempotent`` describe the MCP tool (read-only comes from the role).
    ``cli`` is the command that runs it (``"proposals show"``: a group's command). ``tag`` and
    ``description`` place and explain the REST route in the OpenAPI document.
    """

    name: str
    role: Role
    summary: str
    rest: tuple[str, str] | None = None  # (method, path under /api/v1)
    mcp: str | None = None  # tool name
    dashboard: tuple[str, str] | None = None  # (method, path): a page (GET) or a form (POST)
    request: type[rq.Request[Any]] | None = None
    envelope: str | None = None
    mcp_title: str | None = None
    idempotent: bool = False
    cli: str | None = None
    tag: str | None = None  # the REST API's section (OpenAPI tag)
    description: str | None = None  # the REST route's longer description, when the summary is not enough

    @property
    def result(self) -> Any:
        """What the operation returns: its request model's type argument (None: no model)."""
        return rq.result_of(self.request) if self.request is not None else None

    @property
    def path_ids(self) -> tuple[str, ...]:
        """The ids the REST path names (``{lesson_id}``…), besides the namespace."""
        if self.rest is None:
            return ()
        return tuple(
            part[1:-1] for part in self.rest[1].split("/") if part.startswith("{") and part != _NS_ID
        )

    @property
    def in_query(self) -> bool:
        """Whether the REST route reads its arguments from the query string (else from a JSON body)."""
        return self.rest is not None and self.rest[0] in ("GET", "DELETE")


_NS = "/ns/{namespace}"
_NS_ID = "{namespace}"

_TABLE = (
    # ------------------------------------------------------------------ episodes and reflection
    Operation(
        "record",
        "write",
        "Record an episode",
        ("POST", f"{_NS}/episodes"),
        mcp="record_episode",
        request=rq.RecordRequest,
        mcp_title="Record an episode",
        cli="record",
        tag="episodes",
        description="Store one attempt at a task; its reflection (if the policy wants one) is queued, never awaited.",
    ),
    Operation(
        "reflect",
        "write",
        "Reflect on an episode",
        ("POST", f"{_NS}/episodes/{{episode_id}}/reflect"),
        request=rq.ReflectRequest,
        cli="reflect",
        tag="episodes",
        description="Queue a reflection on a stored episode (trigger ``manual``), whatever the policy said.",
    ),
    Operation(
        "decisions",
        "read",
        "The policy's latest decisions",
        ("GET", f"{_NS}/decisions"),
        dashboard=("GET", "/episodes"),
        request=rq.DecisionsRequest,
        tag="episodes",
    ),
    Operation(
        "show",
        "read",
        "Any record by id",
        ("GET", f"{_NS}/records/{{record_id}}"),
        dashboard=("GET", "/episodes/{episode_id}"),
        request=rq.ShowRequest,
        cli="show",
        tag="episodes",
        description="A lesson, episode (with its decision and reflections), job or reflection of this namespace.",
    ),
    Operation(
        "search_reflections",
        "read",
        "Search past loop reflections",
        ("GET", f"{_NS}/reflections"),
        mcp="search_reflections",
        request=rq.SearchReflectionsRequest,
        mcp_title="Search past reflections",
        tag="episodes",
        description="AIWG reflection records, newest first, by failure category, confidence and keywords.",
    ),
    # ------------------------------------------------------------------ lessons
    Operation(
        "add_lesson",
        "write",
        "Add a lesson you already know",
        ("POST", f"{_NS}/lessons"),
        mcp="add_lesson",
        request=rq.AddLessonRequest,
        mcp_title="Add a lesson",
        cli="add",
        tag="lessons",
        description="Store a lesson without an LLM (tags ``reflexion``, ``trigger:manual``, ``user-supplied``). Adding it pinned is what editing reserves for admin.",
    ),
    Operation("pin_lesson", "admin", "Add a lesson already pinned"),
    Operation(
        "lessons",
        "read",
        "List lessons",
        ("GET", f"{_NS}/lessons"),
        dashboard=("GET", "/lessons"),
        request=rq.LessonsRequest,
        cli="lessons",
        tag="lessons",
        description="Stored lessons, filtered (repeat ``kind``, ``tags``, ``status`` for several) and sorted; with ``tier`` only those whose decay score is in that tier now.",
    ),
    Operation(
        "get_lesson",
        "read",
        "Get a lesson",
        ("GET", f"{_NS}/lessons/{{lesson_id}}"),
        mcp="show_lesson",
        dashboard=("GET", "/lessons/{lesson_id}"),
        request=rq.GetLessonRequest,
        mcp_title="Show a lesson",
        tag="lessons",
    ),
    Operation(
        "forget",
        "admin",
        "Forget a lesson (admin)",
        ("DELETE", f"{_NS}/lessons/{{lesson_id}}"),
        dashboard=("POST", "/lessons/{lesson_id}/forget"),
        request=rq.ForgetRequest,
        cli="forget",
        tag="lessons",
        description="Delete a lesson for good (audited); archive it instead to keep it.",
    ),
    Operation(
        "archive",
        "write",
        "Archive a lesson",
        ("POST", f"{_NS}/lessons/{{lesson_id}}/archive"),
        dashboard=("POST", "/lessons/{lesson_id}/archive"),
        request=rq.ArchiveRequest,
        cli="archive",
        tag="lessons",
        description="Soft-delete: kept and audited, no longer recalled or injected.",
    ),
    Operation(
        "propose_archive",
        "write",
        "Propose archiving a lesson",
        mcp="archive_lesson",
        mcp_title="Propose archiving a lesson",
        idempotent=True,
    ),
    Operation(
        "edit_lesson",
        "admin",
        "Edit a lesson (pin, tags, importance)",
        ("PATCH", f"{_NS}/lessons/{{lesson_id}}"),
        dashboard=("POST", "/lessons/{lesson_id}/edit"),
        request=rq.EditLessonRequest,
        cli="edit",
        tag="lessons",
        description="Pin or unpin a lesson, set its tags or importance (audited). A person's word: admin, since a pinned lesson never decays and no cycle merges or archives it.",
    ),
    Operation(
        "restore",
        "write",
        "Restore a lesson",
        ("POST", f"{_NS}/lessons/{{lesson_id}}/restore"),
        dashboard=("POST", "/lessons/{lesson_id}/restore"),
        request=rq.RestoreRequest,
        cli="restore",
        tag="lessons",
        description="Make an archived lesson active again. For a quarantined or pending lesson this is its approval, which needs an admin key.",
    ),
    Operation("approve_lesson", "admin", "Approve a quarantined or pending lesson (its restore)"),
    Operation(
        "recall",
        "read",
        "Recall the lessons most relevant to a query",
        ("POST", f"{_NS}/recall"),
        mcp="recall_lessons",
        request=rq.RecallRequest,
        mcp_title="Recall lessons",
        cli="recall",
        tag="lessons",
        description="The ``k`` best lessons with their score parts (lexical, vector, temporal, utility).",
    ),
    Operation(
        "context",
        "read",
        "A prompt block for a task, within a token budget",
        ("POST", f"{_NS}/context"),
        mcp="get_context",
        dashboard=("GET", "/why"),
        request=rq.ContextRequest,
        mcp_title="Get prompt context",
        cli="context",
        tag="lessons",
        description="The lessons to inject for ``task``, rendered, never over ``budget_tokens``; counts as use.",
    ),
    Operation(
        "audit",
        "read",
        "The audit log",
        ("GET", f"{_NS}/audit"),
        request=rq.AuditRequest,
        cli="audit",
        tag="lessons",
        description="Who changed what and when, newest first (of one lesson when given).",
    ),
    Operation(
        "import_lessons",
        "write",
        "Import lessons",
        ("POST", f"{_NS}/import"),
        request=rq.ImportRequest,
        cli="import",
        tag="lessons",
        description="Bulk-add lessons (same content reinforces; invalid records are counted and skipped). Counters and pins (``helpful``, ``harmful``, ``access_count``, ``last_accessed``, ``pinned``) are kept for an admin key only: for any other they are dropped, counted in ``counters_ignored`` and logged.",
    ),
    Operation("import_counters", "admin", "Import lessons with their counters and pins"),
    Operation(
        "export",
        "read",
        "Export every lesson",
        ("GET", f"{_NS}/export"),
        request=rq.ExportRequest,
        cli="export",
        tag="lessons",
        description="The namespace's lessons as json, jsonl or markdown, streamed a page at a time.",
    ),
    Operation(
        "embed_missing",
        "write",
        "Embed lessons that have no vector",
        ("POST", f"{_NS}/embed-missing"),
        request=rq.EmbedMissingRequest,
        envelope="count",
        cli="embed",
        tag="lessons",
    ),
    Operation(
        "expand",
        "write",
        "Example tasks for lessons written by hand (LLM)",
        ("POST", f"{_NS}/expand"),
        request=rq.ExpandRequest,
        cli="expand",
        tag="lessons",
        description="Ask the LLM for example tasks that need each lesson and index them with it; ``dry_run``: only the plan (lessons, tokens, cost at most), nothing sent.",
    ),
    Operation(
        "rescreen",
        "admin",
        "Redact and screen every lesson again (admin)",
        ("POST", f"{_NS}/rescreen"),
        request=rq.RescreenRequest,
        cli="rescreen",
        tag="lessons",
    ),
    Operation(
        "apply_retention",
        "admin",
        "Delete old episodes, reflections, jobs (admin)",
        ("POST", f"{_NS}/retention"),
        request=rq.RetentionRequest,
        cli="purge",
        tag="lessons",
        description="Lessons are never deleted here.",
    ),
    # ------------------------------------------------------------------ goals, rules, replay
    Operation(
        "finish_goal",
        "write",
        "Report a goal's end",
        ("POST", f"{_NS}/goals/{{goal_id}}/finish"),
        mcp="finish_goal",
        request=rq.FinishGoalRequest,
        mcp_title="Finish a goal",
        cli="goal finish",
        tag="goals and rules",
        description="The goal's insight is reflected in the background.",
    ),
    Operation(
        "insights",
        "read",
        "Goal insights",
        ("GET", f"{_NS}/insights"),
        request=rq.InsightsRequest,
        cli="insights",
        tag="goals and rules",
    ),
    Operation(
        "rules",
        "read",
        "Learned rules",
        ("GET", f"{_NS}/rules"),
        mcp="list_rules",
        request=rq.RulesRequest,
        mcp_title="List learned rules",
        cli="rules",
        tag="goals and rules",
        description="Live rules (kind ``principle``), strategic first.",
    ),
    Operation(
        "confirm_rule",
        "write",
        "Confirm a rule",
        ("POST", f"{_NS}/rules/{{rule_id}}/confirm"),
        request=rq.ConfirmRuleRequest,
        tag="goals and rules",
        description="Extends the rule and, confirmed across 4+ weeks, promotes it to strategic.",
    ),
    Operation(
        "replay",
        "read",
        "Replay examples for a task",
        ("GET", f"{_NS}/replay"),
        request=rq.ReplayRequest,
        cli="replay",
        tag="goals and rules",
    ),
    # ------------------------------------------------------------------ jobs and state
    Operation(
        "jobs",
        "read",
        "List jobs",
        ("GET", f"{_NS}/jobs"),
        dashboard=("GET", "/jobs"),
        request=rq.JobsRequest,
        cli="jobs",
        tag="jobs",
    ),
    Operation(
        "pending",
        "read",
        "Jobs counted by status",
        ("GET", f"{_NS}/jobs/pending"),
        request=rq.PendingRequest,
        tag="jobs",
    ),
    Operation(
        "retry_jobs",
        "admin",
        "Requeue dead-lettered jobs (admin)",
        ("POST", f"{_NS}/jobs/retry"),
        dashboard=("POST", "/jobs/retry"),
        request=rq.RetryJobsRequest,
        envelope="count",
        tag="jobs",
    ),
    Operation(
        "purge_jobs",
        "admin",
        "Delete finished jobs (admin)",
        ("POST", f"{_NS}/jobs/purge"),
        request=rq.PurgeJobsRequest,
        envelope="count",
        tag="jobs",
    ),
    Operation(
        "flush",
        "write",
        "Wait for queued jobs",
        ("POST", f"{_NS}/flush"),
        request=rq.FlushRequest,
        envelope="done",
        tag="jobs",
    ),
    Operation(
        "stats",
        "read",
        "Counts and the consolidation guards",
        ("GET", f"{_NS}/stats"),
        dashboard=("GET", "/"),
        request=rq.StatsRequest,
        cli="stats",
        tag="jobs",
    ),
    Operation(
        "analytics",
        "read",
        "How Reflexion loops learn",
        ("GET", f"{_NS}/analytics"),
        request=rq.AnalyticsRequest,
        cli="analytics",
        tag="jobs",
        description="Success rate, iterations, learning rate, failure categories and lesson reuse of the loops.",
    ),
    # ------------------------------------------------------------------ consolidation
    Operation(
        "consolidate",
        "write",
        "Run a consolidation cycle",
        ("POST", f"{_NS}/consolidate"),
        mcp="consolidate",
        request=rq.ConsolidateRequest,
        mcp_title="Propose a consolidation",
        cli="consolidate",
        tag="consolidation",
        description="A pending proposal (null when there is nothing to propose, or with ``wait: false``); never applied.",
    ),
    Operation(
        "end_session",
        "write",
        "End a session",
        ("POST", f"{_NS}/sessions/end"),
        request=rq.EndSessionRequest,
        tag="consolidation",
        description="Queue a session-end cycle; null when a daily cap or the circuit breaker refused it.",
    ),
    Operation(
        "proposals",
        "read",
        "List proposals",
        ("GET", f"{_NS}/proposals"),
        mcp="list_proposals",
        dashboard=("GET", "/proposals"),
        request=rq.ProposalsRequest,
        mcp_title="List proposals",
        cli="proposals",
        tag="consolidation",
    ),
    Operation(
        "proposal",
        "read",
        "Get a proposal",
        ("GET", f"{_NS}/proposals/{{proposal_id}}"),
        dashboard=("GET", "/proposals/{proposal_id}"),
        request=rq.ProposalRequest,
        cli="proposals show",
        tag="consolidation",
    ),
    Operation(
        "proposal_markdown",
        "read",
        "A proposal as the pending reflection (Markdown)",
        ("GET", f"{_NS}/proposals/{{proposal_id}}/markdown"),
        request=rq.ProposalMarkdownRequest,
        tag="consolidation",
    ),
    Operation(
        "approve",
        "admin",
        "Approve a proposal (admin)",
        ("POST", f"{_NS}/proposals/{{proposal_id}}/approve"),
        dashboard=("POST", "/proposals/{proposal_id}/approve"),
        request=rq.ApproveRequest,
        cli="approve",
        tag="consolidation",
        description="Apply it, all or nothing: ``only`` some operation ids (``core``: the core memory rewrite), ``edits`` the text to write instead of the cycle's. 409 if a lesson it touches changed since.",
    ),
    Operation(
        "reject",
        "admin",
        "Reject a proposal (admin)",
        ("POST", f"{_NS}/proposals/{{proposal_id}}/reject"),
        dashboard=("POST", "/proposals/{proposal_id}/reject"),
        request=rq.RejectRequest,
        cli="reject",
        tag="consolidation",
    ),
    Operation(
        "revert",
        "admin",
        "Revert an applied proposal (admin)",
        ("POST", f"{_NS}/proposals/{{proposal_id}}/revert"),
        dashboard=("POST", "/proposals/{proposal_id}/revert"),
        request=rq.RevertRequest,
        cli="proposals revert",
        tag="consolidation",
    ),
    Operation(
        "dreams",
        "read",
        "The dream log",
        ("GET", f"{_NS}/dreams"),
        request=rq.DreamsRequest,
        cli="dreams",
        tag="consolidation",
        description="Every consolidation cycle of this namespace, newest first.",
    ),
    Operation(
        "core_memory",
        "read",
        "The core memory document",
        ("GET", f"{_NS}/core-memory"),
        request=rq.CoreMemoryRequest,
        envelope="text",
        cli="core",
        tag="consolidation",
    ),
    # ------------------------------------------------------------------ integrations
    Operation(
        "claude_hook",
        "write",
        "Answer a Claude Code hook",
        ("POST", f"{_NS}/hooks/claude"),
        request=rq.ClaudeHookRequest,
        cli="hooks claude",
        tag="integrations",
        description="Claude Code's ``http`` hook: the payload is the body; the answer is what ``lessonbank hooks claude`` prints (JSON, text for PreCompact, or nothing).",
    ),
)

OPERATIONS: dict[str, Operation] = {op.name: op for op in _TABLE}
BY_MCP_TOOL: dict[str, Operation] = {op.mcp: op for op in _TABLE if op.mcp}
BY_REQUEST: dict[type[rq.Request[Any]], Operation] = {op.request: op for op in _TABLE if op.request}


def mcp_hints(operation: Operation) -> dict[str, bool | None]:
    """The MCP tool annotations of ``operation``: read-only when the read role suffices; no tool
    deletes or overwrites (destructive changes are staged as proposals), none reaches outside."""
    read_only = operation.role == "read"
    return {
        "read_only_hint": read_only,
        "destructive_hint": None if read_only else False,
        "idempotent_hint": True if read_only else operation.idempotent,
        "open_world_hint": False,
    }


def role_of(name: str) -> Role:
    """The role operation ``name`` needs (KeyError for a name not in the table: a bug, not a refusal)."""
    return OPERATIONS[name].role


# A lesson a person has not approved yet; archiving one keeps that in its metadata (ARCHIVED_FROM),
# so that archive-then-restore is not a way around the approval.
UNAPPROVED = ("quarantined", "pending")
ARCHIVED_FROM = "archived_from"


def needs_approval(lesson: Lesson) -> bool:
    """Whether making ``lesson`` active is its approval: quarantined, pending, or archived from one."""
    return lesson.status in UNAPPROVED or (
        lesson.status == "archived" and lesson.metadata.get(ARCHIVED_FROM) in UNAPPROVED
    )


def restore_operation(lesson: Lesson) -> str:
    """What restoring ``lesson`` is: ``approve_lesson`` when it was never approved, else ``restore``."""
    return "approve_lesson" if needs_approval(lesson) else "restore"
