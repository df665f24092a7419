"""A lesson's lifecycle: archive and restore (soft), approval of a quarantined or pending lesson, and
the audit log that records every change a person, the API, the CLI or a cycle makes.

Statuses: ``active`` (recalled and injected), ``pending`` (waiting for a person), ``quarantined`` (read
as instructions to the model, held until approved), ``archived`` (kept, never recalled). Recall and
context only see ``active``; :meth:`~lessonbank.LessonBank.forget` is the one hard delete.

Rules, decided here and applied by the store inside the change's transaction
(``Store.change_lesson``), so the status and its audit row are written together or not at all:

- ``archive``: any status but ``archived`` → ``archived`` (audit action ``archive``, the reason in the
  summary). Archiving an archived lesson is a no-op: nothing written, no audit row, the lesson returned
  as it is (so a retried call or a proposal applied twice does no harm).
- ``restore``: ``archived`` → ``active`` (action ``restore``); ``quarantined`` or ``pending`` →
  ``active`` (action ``approve``: restoring is the person's approval). Restoring an active lesson is
  a no-op, as above.
- Every row names its actor: ``api`` by default, ``cli`` from the command line, or what the caller
  passes (a consolidation cycle: ``reflection:<cycle id>``).
- Secrets: the actor and the reason are caller text, redacted here (``redact.ARCHIVE_TEXT_FIELDS``)
  before they reach a row, a proposal or a mirror commit; every store redacts each audit row again
  as it writes it (``redact.AUDIT_TEXT_FIELDS``), whoever built it.

What is audited: archive, restore, approve, delete (``forget``, ``before`` = the lesson), and any
edit a caller makes through ``update_lesson`` with an audit entry. What is not: the write path's
counters (reinforce's use count and confidence, outcome credit, the access count recall moves):
they are counters, not changes to what a lesson says or whether it is seen, and one row per recall
would grow the log with every prompt. A lesson's creation is recorded on the lesson itself
(``source``, ``episode_id``, ``reflection_id``, ``created_at``), its supersession by
``superseded_by``, and a quarantine on write by its status and ``metadata``.

The git mirror: when ``Settings.mirror_dir`` is set, each change a person makes here (an archive or
restore that changed something) is then committed to the mirror with the actor as its author
(:mod:`~lessonbank.services.consolidation.mirror`); other services call :meth:`Lifecycle.mirror`
after theirs (a ``forget``). The bank is the source of truth: a mirror that fails is a logged
warning, never a failed or undone change, and its next commit catches up.
"""

from __future__ import annotations

from lessonbank.errors import InputError
from lessonbank.models import AuditAction, AuditEntry, Lesson, LessonStatus
from lessonbank.operations import ARCHIVED_FROM, UNAPPROVED, needs_approval
from lessonbank.redact import redact
from lessonbank.requests import EditLessonRequest
from lessonbank.services.consolidation.mirror import mirror_change
from lessonbank.services.scope import Scope, check_count, check_text_arg

REASON_MAX_CHARS = 1_000
ACTOR_MAX_CHARS = 200


def clean_reason(reason: object) -> str | None:
    """A person's reason, secrets redacted, on one line and cut to :data:`REASON_MAX_CHARS`; None
    when blank. Redacted before it is cut: a token cut in half no longer looks like one."""
    if reason is None:
        return None
    check_text_arg(reason, "reason")
    return " ".join(redact(str(reason)).split())[:REASON_MAX_CHARS] or None


def check_actor(actor: object) -> str:
    """The actor, trimmed, secrets redacted; refuse an empty or oversized one. It is kept in audit
    rows, a proposal's ``decided_by`` and the mirror's commit author, so it is caller text like any.
    The limit is the caller's; a marker longer than the secret it replaced is cut to it, so an actor
    checked twice (a service, then its audit row) passes twice."""
    check_text_arg(actor, "actor")
    actor = str(actor).strip()
    if not actor or len(actor) > ACTOR_MAX_CHARS:
        raise InputError(
            f"actor must be 1 to {ACTOR_MAX_CHARS} chars, e.g. 'api', 'cli' or 'reflection:<cycle id>'",
            field="actor",
        )
    return redact(actor)[:ACTOR_MAX_CHARS]


class Lifecycle:
    """Archive, restore and the audit log of one bank's namespace."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def entry(
        self, action: AuditAction, actor: str, summary: str, lesson_id: str | None = None
    ) -> AuditEntry:
        """An audit row of this namespace, stamped now (the store fills in before and after)."""
        return AuditEntry(
            namespace=self.scope.namespace,
            at=self.scope.now(),
            actor=check_actor(actor),
            action=action,
            lesson_id=lesson_id,
            summary=summary,
        )

    def archive(self, lesson_id: str, *, reason: str | None = None, actor: str = "api") -> Lesson:
        """Archive the lesson (soft: kept, no longer recalled); a no-op when it is archived already."""
        check_text_arg(lesson_id, "lesson_id")
        reason = clean_reason(reason)
        actor = check_actor(actor)

        summaries: list[str] = []  # what the change did, for the mirror's commit (none: a no-op)

        def change(old: Lesson) -> tuple[Lesson, AuditEntry] | None:
            if old.status == "archived":
                return None
            summaries.append(f"archived (was {old.status})" + (f": {reason}" if reason else ""))
            moved, entry = self._moved(old, "archived", "archive", actor, summaries[-1])
            if old.status in UNAPPROVED:  # restoring it later is still its approval
                moved = moved.model_copy(update={"metadata": {**old.metadata, ARCHIVED_FROM: old.status}})
            return moved, entry

        lesson = self.scope.store.change_lesson(self.scope.namespace, lesson_id, change)
        if summaries:
            self.mirror(actor, f"Archive {lesson_id}: {summaries[-1]}")
        return lesson

    def restore(self, lesson_id: str, *, actor: str = "api") -> Lesson:
        """Make the lesson active again: from archived (``restore``), or from quarantined or pending,
        which is the person's approval (``approve``); a no-op when it is active already."""
        check_text_arg(lesson_id, "lesson_id")
        actor = check_actor(actor)

        done: list[tuple[AuditAction, str]] = []  # what the change did, for the mirror's commit

        def change(old: Lesson) -> tuple[Lesson, AuditEntry] | None:
            if old.status == "active":
                return None
            action: AuditAction = "approve" if needs_approval(old) else "restore"
            verb = "restored" if action == "restore" else "approved"
            done.append((action, f"{verb} (was {old.status})"))
            moved, entry = self._moved(old, "active", action, actor, done[-1][1])
            if ARCHIVED_FROM in old.metadata:
                metadata = {k: v for k, v in old.metadata.items() if k != ARCHIVED_FROM}
                moved = moved.model_copy(update={"metadata": metadata})
            return moved, entry

        lesson = self.scope.store.change_lesson(self.scope.namespace, lesson_id, change)
        if done:
            action, summary = done[-1]
            self.mirror(actor, f"{action.capitalize()} {lesson_id}: {summary}")
        return lesson

    def edit(self, request: EditLessonRequest) -> Lesson:
        """A person's edit of what the bank keeps about a lesson: pin it (it never decays and is
        never merged or archived by a cycle; it is always in core memory's Critical Facts), its tags,
        its importance. Audited (``edit``, before and after); a no-op when nothing changes. Its text
        is not edited in place: a new lesson supersedes it (``add_lesson(..., supersedes=id)``) or a
        consolidation proposal is approved with changes."""
        lesson_id, pinned, tags, importance = (
            request.lesson_id,
            request.pinned,
            request.tags,
            request.importance,
        )
        check_text_arg(lesson_id, "lesson_id")
        actor = check_actor(request.actor)
        update: dict[str, object] = {}
        if pinned is not None:
            if not isinstance(pinned, bool):
                raise InputError(f"pinned must be true or false, got {pinned!r}", field="pinned")
            update["pinned"] = pinned
        if tags is not None:
            if isinstance(tags, str) or not all(isinstance(tag, str) for tag in tags):
                raise InputError("tags must be a list of strings", field="tags")
            update["tags"] = list(tags)
        if importance is not None:
            if (
                isinstance(importance, bool)
                or not isinstance(importance, int | float)
                or not 0 <= importance <= 1
            ):
                raise InputError(
                    f"importance must be a number in [0, 1], got {importance!r}", field="importance"
                )
            update["importance"] = float(importance)
        if not update:
            raise InputError("nothing to edit: give pinned, tags or importance")
        changes: list[str] = []

        def change(old: Lesson) -> tuple[Lesson, AuditEntry] | None:
            new = Lesson.model_validate({**old.model_dump(), **update, "updated_at": self.scope.now()})
            what = [
                f"{key} {getattr(old, key)!r} → {getattr(new, key)!r}"
                for key in update
                if getattr(old, key) != getattr(new, key)
            ]
            if not what:
                return None
            changes.append("; ".join(what))
            return new, self.entry("edit", actor, changes[-1], old.id).of(old, new)

        lesson = self.scope.store.change_lesson(self.scope.namespace, lesson_id, change)
        if changes:
            self.mirror(actor, f"Edit {lesson_id}: {changes[-1]}")
        return lesson

    def mirror(self, actor: str, message: str) -> str | None:
        """Commit the namespace as it now is to the git mirror, authored by ``actor``, after a change
        the caller has made: the commit's sha, or None (no mirror, nothing changed, or the mirror
        failed and said so in a warning; the change itself stands)."""
        scope = self.scope
        return mirror_change(scope.settings, scope.store, scope.namespace, author=actor, message=message)

    def _moved(
        self, old: Lesson, status: LessonStatus, action: AuditAction, actor: str, summary: str
    ) -> tuple[Lesson, AuditEntry]:
        new = old.model_copy(update={"status": status, "updated_at": self.scope.now()})
        return new, self.entry(action, actor, summary, old.id).of(old, new)

    def audit(self, *, lesson_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """The namespace's audit rows (of one lesson when given), newest first."""
        if lesson_id is not None:
            check_text_arg(lesson_id, "lesson_id")
        check_count(limit, "limit", minimum=1)
        return self.scope.store.audit_log(self.scope.namespace, lesson_id=lesson_id, limit=limit)
