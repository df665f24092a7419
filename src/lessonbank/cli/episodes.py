"""What happened on a task: ``record`` an episode, ``reflect`` on a stored one now."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from lessonbank.cli.common import emit_json, err, fail, load_json, out, read_text
from lessonbank.models import Episode, Status


def record(
    ctx: typer.Context,
    task: Annotated[
        str | None, typer.Option(help="The task (omit to read an Episode as JSON on stdin)")
    ] = None,
    status: Annotated[Status | None, typer.Option(help="success, failure or partial")] = None,
    error: Annotated[str | None, typer.Option(help="The error, if any")] = None,
    attempt: Annotated[str | None, typer.Option(help="What the agent tried")] = None,
    output: Annotated[str | None, typer.Option(help="What came out")] = None,
    task_type: Annotated[str | None, typer.Option(help="Kind of task, e.g. code")] = None,
    agent: Annotated[str | None, typer.Option(help="Which agent")] = None,
    signal_: Annotated[
        list[str] | None, typer.Option("--signal", help="hallucination or low_quality")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t")] = None,
    context_id: Annotated[
        list[str] | None,
        typer.Option(
            "--context-id", help="A lesson injected for this task (repeatable): credited with the outcome"
        ),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the reflection and print it")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait with --wait")] = 120.0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Record an episode; reflection runs in the background (or now, with --wait)."""
    if task is None:
        if sys.stdin.isatty():
            fail("give --task or pipe an Episode as JSON on stdin", 2)
        data = load_json(read_text("-"), "stdin")
        if not isinstance(data, dict):
            fail("stdin must hold one JSON object (an Episode)", 2)
    else:
        data = {
            "task": task,
            "status": status,
            "error": error,
            "attempt": attempt,
            "output": output,
            "task_type": task_type,
            "agent": agent,
            "signals": signal_ or [],
            "tags": tag or [],
        }
        data = {key: value for key, value in data.items() if value is not None}
    with ctx.obj.bank(worker=wait) as bank:
        episode = bank.record(Episode.model_validate(data), context_ids=context_id)
        drained = bank.flush(timeout=timeout) if wait else None
        shown = bank.show(episode.id)
    if as_json:
        emit_json(shown)
        return
    decision = shown["decision"] or {}
    out.print(
        f"{episode.id}  "
        + (
            f"reflect: {decision.get('trigger')} with {decision.get('reflector')}"
            if decision.get("reflect")
            else "no reflection"
        )
        + f"  ({decision.get('reason')})"
    )
    for reflection in shown["reflections"]:
        if reflection["status"] == "ok":
            out.print(
                f"reflection {reflection['id']}: {len(reflection['lesson_ids'])} lesson(s) {reflection['lesson_ids']}"
            )
        else:
            out.print(f"reflection {reflection['id']}: {reflection['status']} ({reflection['skip_reason']})")
    if wait and drained is False:
        err.print("reflection not finished: see `lessonbank jobs`")


def reflect(
    ctx: typer.Context,
    episode_id: Annotated[str, typer.Argument(help="Episode id (ep_…)")],
    reflector: Annotated[
        str | None, typer.Option(help="lesson, insight, dual or reflexion (default: the policy table's)")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait")] = False,
) -> None:
    """Reflect on a stored episode now (trigger manual), whatever the policy decided."""
    with ctx.obj.bank(worker=wait) as bank:
        decision = bank.reflect(episode_id, reflector=reflector)
        if wait:
            bank.flush()
    out.print(f"queued {decision.job_id}")
