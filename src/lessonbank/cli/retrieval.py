"""Getting lessons back: ``recall``, ``context`` (the prompt block) and ``embed`` (vectors for recall)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from lessonbank.cli.common import emit_json, fail, lesson_row, out, print_lessons


def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The task you are about to do")],
    k: Annotated[int, typer.Option("-k", "--k", min=0, help="How many lessons")] = 5,
    kind: Annotated[str | None, typer.Option(help="Only this kind")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Required tag (repeatable)")] = None,
    mode: Annotated[
        str | None, typer.Option(help="lexical, vector, hybrid or auto (hybrid when an embedder is set)")
    ] = None,
    hyde: Annotated[
        bool | None,
        typer.Option("--hyde/--no-hyde", help="Add an LLM-written hypothetical answer to the query"),
    ] = None,
    agent: Annotated[str | None, typer.Option(help="Only lessons of this agent")] = None,
    task_type: Annotated[
        str | None, typer.Option("--task-type", help="Only lessons of this task type")
    ] = None,
    goal: Annotated[str | None, typer.Option("--goal", "--goal-id", help="Only lessons of this goal")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show the lessons most relevant to a task."""
    with ctx.obj.bank(hyde=hyde) as bank:
        hits = bank.recall(
            query, k=k, kind=kind, tags=tag or [], mode=mode, agent=agent, task_type=task_type, goal_id=goal
        )
    if as_json:
        emit_json(
            [
                {
                    "score": hit.score,
                    "lexical": hit.lexical,
                    "vector": hit.vector,
                    "temporal": hit.temporal,
                    "utility": hit.utility,
                    "lesson": lesson_row(hit.lesson),
                }
                for hit in hits
            ]
        )
    elif not hits:
        out.print("no lessons match")
    else:
        print_lessons([hit.lesson for hit in hits], hits)


def context(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Argument(help="The task the prompt is for")] = None,
    budget: Annotated[int, typer.Option("--budget", min=0, help="Token budget")] = 800,
    fmt: Annotated[
        list[str] | None,
        typer.Option(
            "--format", help="Section (repeatable): long_term_memory, past_reflections, learned_rules, replay"
        ),
    ] = None,
    goal: Annotated[
        str | None, typer.Option("--goal", "--goal-id", help="Goal id, for past_reflections")
    ] = None,
    agent: Annotated[str | None, typer.Option(help="Agent, for learned_rules")] = None,
    task_type: Annotated[str | None, typer.Option(help="Task type, for replay")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Print the block to put in the prompt for a task, within the token budget."""
    with ctx.obj.bank() as bank:
        block = bank.context(
            task, goal_id=goal, agent=agent, task_type=task_type, budget_tokens=budget, formats=fmt or None
        )
    if as_json:
        emit_json(block.model_dump())
    else:
        sys.stdout.write(block.text + ("\n" if block.text else ""))


def embed(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Embed the lessons that have no vector yet for the configured embedder (--embedder)."""
    with ctx.obj.bank() as bank:
        if bank.embedder is None:
            fail(
                "no embedder configured: pass --embedder minilm (or static, hash, openai:MODEL) or set LESSONBANK_EMBEDDER"
            )
        count = bank.embed_missing()
        name = bank.embedder.name
    if as_json:
        emit_json({"embedded": count, "embedder": name})
    else:
        out.print(f"embedded {count} lesson(s) with {name}")
