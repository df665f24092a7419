"""Getting lessons back: ``recall``, ``context`` (the prompt block) and ``embed`` (vectors for recall)."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from typing import Annotated

import typer

from lessonbank.cli.common import emit_json, err, fail, lesson_row, out, print_lessons
from lessonbank.cli.progress import progress


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
        # the first recall with an embedder embeds what has no vector yet (static: distils its model)
        note = "recalling" if bank.embedder is None else f"recalling with {bank.embedder.name}"
        with progress(note) if bank.embedder is not None else nullcontext():
            hits = bank.recall(
                query,
                k=k,
                kind=kind,
                tags=tag or [],
                mode=mode,
                agent=agent,
                task_type=task_type,
                goal_id=goal,
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
        return
    sys.stdout.write(block.text + ("\n" if block.text else ""))
    if not block.text:
        # stdout stays empty (a prompt gets nothing); the person at the terminal learns why
        err.print(
            f"nothing to inject: no stored lesson matches this task within {budget} tokens "
            f"(namespace {bank.namespace})",
            markup=False,
            soft_wrap=True,
        )


def embed(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Embed the lessons that have no vector yet for the configured embedder (--embedder)."""
    with ctx.obj.bank() as bank:
        if bank.embedder is None:
            fail(
                "no embedder configured: pass --embedder minilm (or static, hash, openai:MODEL) or set LESSONBANK_EMBEDDER"
            )
        name = bank.embedder.name
        with progress(f"embedding lessons with {name}"):
            count = bank.embed_missing()
    if as_json:
        emit_json({"embedded": count, "embedder": name})
    else:
        out.print(f"embedded {count} lesson(s) with {name}")


def expand(
    ctx: typer.Context,
    lesson_ids: Annotated[
        list[str] | None, typer.Argument(help="Lessons to expand (again); default: those without examples")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", help="At most this many lessons (default 100)")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before sending")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what it would send and cost; send nothing")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Ask the LLM (--llm / LESSONBANK_LLM) for 2-3 example tasks that need each lesson added by hand or
    imported, and index them with it, so a task that only shows code finds the prose lesson about it.
    Shows the lessons, tokens and cost first and asks before sending (one call per lesson)."""
    with ctx.obj.bank() as bank:
        plan = bank.expand(lesson_ids or None, limit=limit, dry_run=True).plan
        cost = "unknown price" if plan.cost is None else f"at most ${plan.cost:.4f}"
        summary = (
            f"{plan.calls} lesson(s), {plan.calls} call(s) to {plan.model}: {plan.input_tokens:,} input tokens, "
            f"at most {plan.output_tokens:,} output tokens ({cost})"
        )
        if dry_run or not plan.calls:
            if as_json:
                from lessonbank.services.expansion import ExpansionReport

                emit_json({"dry_run": True, **ExpansionReport(plan=plan).model_dump(mode="json")})
            else:
                out.print(f"would expand {summary}" if plan.calls else "nothing to expand")
            return
        if not as_json:
            out.print(f"expand {summary}")
        if not yes and not typer.confirm("send?", default=False, err=True):
            fail("nothing sent")
        report = bank.expand(plan.lesson_ids, actor="cli")
    if as_json:
        emit_json(report.model_dump(mode="json"))
        return
    for lesson_id, examples in report.expanded.items():
        out.print(f"{lesson_id}: " + " | ".join(examples))
    for lesson_id, reason in report.skipped.items():
        out.print(f"{lesson_id}: skipped ({reason})")
    spent = "unknown price" if report.cost is None else f"${report.cost:.4f}"
    out.print(
        f"expanded {len(report.expanded)} lesson(s), skipped {len(report.skipped)}; "
        f"{report.usage.input_tokens:,} + {report.usage.output_tokens:,} tokens ({spent})"
    )
