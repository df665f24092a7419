"""Lifecycle commands: ``archive`` and ``restore`` (soft; ``forget`` is the hard delete) and ``audit``,
the log of every change to a lesson. Changes made here are audited with the actor ``cli``."""

from __future__ import annotations

from typing import Annotated

import typer

from lessonbank.cli.common import emit_json, listing, out

ACTOR = "cli"


def archive(
    ctx: typer.Context,
    lesson_id: Annotated[str, typer.Argument(help="Lesson id (les_…)")],
    reason: Annotated[str | None, typer.Option(help="Why, kept in the audit log")] = None,
) -> None:
    """Archive a lesson: kept, no longer recalled or injected (lessonbank restore brings it back)."""
    with ctx.obj.bank() as bank:
        was = bank.get_lesson(lesson_id).status
        bank.archive(lesson_id, reason=reason, actor=ACTOR)
    out.print(f"{lesson_id} was already archived" if was == "archived" else f"archived {lesson_id}")


def edit(
    ctx: typer.Context,
    lesson_id: Annotated[str, typer.Argument(help="Lesson id (les_…)")],
    pin: Annotated[
        bool | None, typer.Option("--pin/--unpin", help="Pinned: never decays, always in core memory")
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            help="Replace all the lesson's tags with these (repeat); --add-tag / --remove-tag change one",
        ),
    ] = None,
    importance: Annotated[float | None, typer.Option(min=0.0, max=1.0, help="From 0 to 1")] = None,
    add_tag: Annotated[
        list[str] | None, typer.Option("--add-tag", help="Add this tag, keeping the others (repeat)")
    ] = None,
    remove_tag: Annotated[
        list[str] | None, typer.Option("--remove-tag", help="Remove this tag, keeping the others (repeat)")
    ] = None,
) -> None:
    """Pin or unpin a lesson, set its tags or importance (audited; its text is not edited in place)."""
    with ctx.obj.bank() as bank:
        tags = tag
        if add_tag or remove_tag:
            tags = _changed_tags(
                tag if tag is not None else bank.get_lesson(lesson_id).tags, add_tag, remove_tag
            )
        lesson = bank.edit_lesson(lesson_id, pinned=pin, tags=tags, importance=importance, actor=ACTOR)
    state = "pinned" if lesson.pinned else "not pinned"
    out.print(
        f"{lesson_id}: {state}, tags {', '.join(lesson.tags) or '-'}, importance {lesson.importance:.2f}"
    )


def _changed_tags(tags: list[str], added: list[str] | None, removed: list[str] | None) -> list[str]:
    """``tags`` plus ``added``, less ``removed`` (compared without case), in their order."""
    gone = {name.strip().lower() for name in removed or []}
    result: list[str] = []
    for name in [*tags, *(added or [])]:
        if name.strip().lower() not in gone and name.strip().lower() not in {t.lower() for t in result}:
            result.append(name.strip())
    return result


def restore(ctx: typer.Context, lesson_id: Annotated[str, typer.Argument(help="Lesson id (les_…)")]) -> None:
    """Make an archived lesson active again; for a quarantined or pending lesson, approve it."""
    with ctx.obj.bank() as bank:
        was = bank.get_lesson(lesson_id).status
        bank.restore(lesson_id, actor=ACTOR)
    if was == "active":
        out.print(f"{lesson_id} is already active")
    else:
        out.print(f"{'restored' if was == 'archived' else 'approved'} {lesson_id} (was {was})")


def audit(
    ctx: typer.Context,
    lesson: Annotated[str | None, typer.Option("--lesson", help="Only this lesson's changes")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many rows, newest first")] = 50,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the rows as JSON, with before and after")
    ] = False,
) -> None:
    """Show the audit log: who changed which lesson, when, and how (newest first)."""
    with ctx.obj.bank() as bank:
        rows = bank.audit(lesson_id=lesson, limit=limit)
    if as_json:
        emit_json([row.model_dump(mode="json") for row in rows])
        return
    table = listing(("when", "actor", "action", "lesson", "summary"))
    for row in rows:
        when = row.at.strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(when, row.actor, row.action, row.lesson_id or "", row.summary)
    out.print(table)
