"""A FLAG is a decision: for two lessons that contradict each other (A and B, in the order the
operation names them), the person who approves the proposal chooses

- ``keep-a``: A stays, B is archived; ``keep-b``: B stays, A is archived;
- ``both``: both stay, each with the text and scope (agent, task type, goal) the person gives it:
  narrower scopes, so they no longer meet (something must change);
- ``dismiss``: they do not contradict; recorded on both lessons (``metadata["not_contradicting"]``)
  and not proposed again.

A flag approved without a decision changes nothing (it was shown: not proposed again). A decision
is written in the proposal's edit format (:func:`flag_text`, read back by :func:`read_decision`):
the CLI's ``approve --edit`` file holds it under the flag's ``=== <id> flag`` line, the dashboard
and the REST API send the same text as the flag's edit. It is applied in the approval's transaction,
each change an audit row (:func:`decided_writes`). :func:`open_flags` says which lessons a pending
proposal flags, for a page that shows them. Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import cast

from lessonbank.errors import InputError
from lessonbank.models import LESSON_MAX_CHARS, AuditAction, Lesson
from lessonbank.proposals import FLAG_DECISIONS, FlagDecision, Operation, Proposal
from lessonbank.redact import redact
from lessonbank.services.consolidation.operations import SCOPE_FIELDS

UNDECIDED = "decision: " + " | ".join(FLAG_DECISIONS)
FIELDS = ("text", *SCOPE_FIELDS)
SIDES = ("a", "b")
HELP = (
    "# keep-a: keep A, archive B · keep-b: keep B, archive A · both: keep both with the text and scope\n"
    "# below (narrow them; an empty scope serves every one) · dismiss: not a contradiction.\n"
    "# Leave the line as it is to decide nothing."
)
Write = Callable[[AuditAction, str, Lesson, Lesson], None]


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())


def flag_text(op: Operation, lessons_by_id: Mapping[str, Lesson] | None = None) -> str:
    """The flag's block in the edit format: the lessons, the undecided decision line and, when the
    lessons are known, each one's text and scope to narrow for ``both``."""
    lines = [HELP]
    known = lessons_by_id or {}
    for side, lesson_id in zip(SIDES, op.lesson_ids, strict=False):
        lesson = known.get(lesson_id)
        lines.append(f"# {side.upper()} {lesson_id}: {_one_line(lesson.content)[:200] if lesson else ''}")
    lines.append(UNDECIDED)
    for side, lesson_id in zip(SIDES, op.lesson_ids, strict=False):
        lesson = known.get(lesson_id)
        if lesson is not None:
            lines.append(f"{side}.text: {_one_line(lesson.content)}")
            lines += [f"{side}.{name}: {getattr(lesson, name) or ''}" for name in SCOPE_FIELDS]
    return "\n".join(lines)


def decision_text(decision: str, fields: Mapping[str, str] | None = None) -> str:
    """A decision in the edit format, from a form: ``decision`` and ``a.text``, ``b.agent``, ...."""
    lines = [f"decision: {decision}"]
    lines += [f"{key}: {_one_line(value)}" for key, value in (fields or {}).items()]
    return "\n".join(lines)


def read_decision(text: str, op: Operation) -> tuple[FlagDecision | None, dict[str, dict[str, str | None]]]:
    """(the decision, the revisions by lesson id for ``both``) of a flag's block; (None, {}) when it
    is left undecided. InputError on an unknown decision or field, or a two-lesson decision on a
    flag of more lessons."""
    decision: str | None = None
    given: dict[str, dict[str, str | None]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if not sep:
            raise InputError(f"flag {op.id}: a line {line[:80]!r} is not 'name: value'", field="edits")
        if key == "decision":
            decision = None if value == UNDECIDED.partition(": ")[2] or not value else value.lower()
            continue
        side, _, name = key.partition(".")
        if side not in SIDES or name not in FIELDS:
            raise InputError(
                f"flag {op.id}: unknown field {key!r}; use decision, a.text, a.agent, a.task_type, "
                "a.goal_id and the same for b",
                field="edits",
            )
        given.setdefault(side, {})[name] = value or None
    if decision is None:
        return None, {}
    if decision not in FLAG_DECISIONS:
        raise InputError(
            f"flag {op.id}: unknown decision {decision!r}; choose one of {', '.join(FLAG_DECISIONS)}",
            field="edits",
        )
    if decision != "dismiss" and len(op.lesson_ids) != 2:
        raise InputError(f"flag {op.id} names {len(op.lesson_ids)} lessons: only dismiss", field="edits")
    revisions: dict[str, dict[str, str | None]] = {}
    if decision == "both":
        for side, lesson_id in zip(SIDES, op.lesson_ids, strict=False):
            fields = given.get(side, {})
            if "text" in fields and not fields["text"]:
                raise InputError(f"flag {op.id}: {side}.text is empty", field="edits")
            if len(fields.get("text") or "") > LESSON_MAX_CHARS:
                raise InputError(f"flag {op.id}: {side}.text is over {LESSON_MAX_CHARS} characters")
            if fields:
                revisions[lesson_id] = fields
    return cast(FlagDecision, decision), revisions


def decided_writes(op: Operation, latest: Callable[[str], Lesson], write: Write, now: datetime) -> None:
    """What the person's decision on flag ``op`` writes, through ``write(action, summary, before,
    after)`` (see the module docstring). InputError when ``both`` changes neither lesson."""
    ids = op.lesson_ids
    if op.decision in ("keep-a", "keep-b"):
        kept, archived = (ids[0], ids[1]) if op.decision == "keep-a" else (ids[1], ids[0])
        source = latest(archived)
        after = source.model_copy(update={"status": "archived", "updated_at": now})
        write("archive", f"contradicts {kept}, which the person kept ({op.decision})", source, after)
    elif op.decision == "both":
        changed = 0
        for lesson_id in ids:
            source = latest(lesson_id)
            update = _revised(source, op.revisions.get(lesson_id, {}))
            if update:
                changed += 1
                after = source.model_copy(update={**update, "updated_at": now})
                others = ", ".join(i for i in ids if i != lesson_id)
                write("edit", f"kept beside {others} with a narrower scope or text (both)", source, after)
        if not changed:
            raise InputError(
                f"flag {op.id}: 'both' changes neither lesson, so they still contradict; narrow a scope "
                "or a text, or dismiss the flag",
                field="edits",
            )
    elif op.decision == "dismiss":
        for lesson_id in ids:
            source = latest(lesson_id)
            apart = [i for i in ids if i != lesson_id]
            marked = sorted({*source.metadata.get("not_contradicting", []), *apart})
            after = source.model_copy(
                update={"metadata": {**source.metadata, "not_contradicting": marked}, "updated_at": now}
            )
            write("edit", f"not contradicting {', '.join(apart)} (flag dismissed)", source, after)


def _revised(lesson: Lesson, fields: Mapping[str, str | None]) -> dict[str, str | None]:
    """The fields of ``lesson`` the person changed; a text given on one line that folds to the stored
    one is no change."""
    update: dict[str, str | None] = {}
    for name, value in fields.items():
        if name == "text":
            if value and _one_line(value) != _one_line(lesson.content):
                update["content"] = redact(value)
        elif value != getattr(lesson, name):
            update[name] = value
    return update


def open_flags(proposals: Iterable[Proposal]) -> dict[str, list[str]]:
    """Lesson id -> the lessons a pending proposal's flag says it contradicts."""
    found: dict[str, set[str]] = {}
    for proposal in proposals:
        if proposal.status != "pending":
            continue
        for op in proposal.operations:
            if op.kind != "flag" or op.status == "dropped":
                continue
            for lesson_id in op.lesson_ids:
                found.setdefault(lesson_id, set()).update(i for i in op.lesson_ids if i != lesson_id)
    return {lesson_id: sorted(others) for lesson_id, others in sorted(found.items())}
