"""What reflections produced: ``goal finish``, ``insights``, ``rules`` and ``replay`` examples.

Thin like the rest of the CLI: each command calls one LessonBank method and prints the result
(``--json`` for machines).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import typer

from lessonbank.cli.common import emit_json, err, fail, listing, out
from lessonbank.models import Lesson
from lessonbank.requests import GoalState

goal_app = typer.Typer(help="Report goals reaching a terminal state (their insight is reflected).")


def _when(value: Any) -> str:
    if value is None:
        return "never"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%d %H:%M")


def _row(lesson: Lesson) -> dict[str, Any]:
    return lesson.model_dump(mode="json", exclude={"content_hash"})


@goal_app.command("finish")
def goal_finish(
    ctx: typer.Context,
    goal_id: Annotated[str, typer.Argument(help="The goal's id")],
    title: Annotated[str | None, typer.Option(help="The goal's title, shown in [PAST REFLECTIONS]")] = None,
    status: Annotated[GoalState, typer.Option(help="completed or failed")] = "completed",
    output: Annotated[list[str] | None, typer.Option("--output", help="A task output (repeatable)")] = None,
    error: Annotated[list[str] | None, typer.Option("--error", help="An error message (repeatable)")] = None,
    agent: Annotated[str | None, typer.Option(help="Which agent")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the insight and print it")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait with --wait")] = 120.0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Record that a goal completed or failed; its insight is reflected in the background (or now, with --wait)."""
    with ctx.obj.bank(worker=wait) as bank:
        episode = bank.finish_goal(
            goal_id, title=title, status=status, outputs=output or [], errors=error or [], agent=agent
        )
        drained = bank.flush(timeout=timeout) if wait else None
        shown = bank.show(episode.id)
        found = bank.insights(goal_id=goal_id) if wait else []
    if as_json:
        emit_json({**shown, "insights": [_row(lesson) for lesson in found]})
        return
    decision = shown["decision"] or {}
    verdict = f"reflect with {decision.get('reflector')}" if decision.get("reflect") else "no reflection"
    out.print(f"{episode.id}  {verdict}  ({decision.get('reason')})")
    for lesson in found:
        out.print(f"{lesson.id}  importance {lesson.importance:.1f}  {lesson.content}")
    if wait and drained is False:
        err.print("insight not finished: see `lessonbank jobs`")


def insights(
    ctx: typer.Context,
    goal: Annotated[
        str | None, typer.Option("--goal", "--goal-id", help="Only this goal (default: recent goals)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List live goal insights, most important first."""
    with ctx.obj.bank() as bank:
        found = bank.insights(goal_id=goal)
    if as_json:
        emit_json([_row(lesson) for lesson in found])
        return
    table = listing(("id", "goal", "importance", "expires", "insight"))
    for lesson in found:
        title = lesson.metadata.get("goal_title") or lesson.goal_id or ""
        table.add_row(
            lesson.id, str(title), f"{lesson.importance:.1f}", _when(lesson.expires_at), lesson.content
        )
    out.print(table if found else "no insights")


class _RulesAction(StrEnum):
    list = "list"
    confirm = "confirm"


def rules(
    ctx: typer.Context,
    action: Annotated[_RulesAction, typer.Argument(help="list, or confirm RULE_ID (mark it helpful)")] = (
        _RulesAction.list
    ),
    rule_id: Annotated[str | None, typer.Argument(help="Rule id, for confirm")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent's rules")] = None,
    stream: Annotated[str | None, typer.Option(help="tactical or strategic")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List learned rules (strategic first), or confirm one as helpful."""
    with ctx.obj.bank() as bank:
        if action is _RulesAction.confirm:
            if not rule_id:
                fail("give the id of the rule to confirm: lessonbank rules confirm les_…", 2)
            rule = bank.confirm_rule(rule_id)
            if as_json:
                emit_json(_row(rule))
            else:
                meta = rule.metadata
                out.print(f"{rule.id}  {meta.get('stream')}  confirmations {meta.get('confirmations')}")
            return
        found = bank.rules(agent=agent, stream=stream)
    if as_json:
        emit_json([_row(lesson) for lesson in found])
        return
    table = listing(("id", "agent", "stream", "confirmed", "last confirmed", "expires", "rule"))
    for rule in found:
        meta = rule.metadata
        table.add_row(
            rule.id,
            rule.agent or "",
            str(meta.get("stream", "tactical")),
            str(meta.get("confirmations", 1)),
            _when(meta.get("last_confirmed")),
            _when(rule.expires_at),
            rule.content,
        )
    out.print(table if found else "no rules")


def replay(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Argument(help="The task to find examples for")] = None,
    task_type: Annotated[str | None, typer.Option(help="Match this task type first")] = None,
    k: Annotated[int, typer.Option("-k", min=0, help="How many examples")] = 3,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show the replay examples (recorded procedures) a task would get."""
    with ctx.obj.bank() as bank:
        found = bank.replay(task=task, task_type=task_type, k=k)
    if as_json:
        emit_json([_row(lesson) for lesson in found])
        return
    if not found:
        out.print("no replay examples")
    for lesson in found:
        out.print(
            f"[bold]{lesson.id}[/bold]  {lesson.metadata.get('result')}  expires {_when(lesson.expires_at)}"
        )
        out.print(lesson.content, markup=False)
        out.print()
