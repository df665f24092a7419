"""The ``lessonbank`` command: a thin shell over LessonBank that translates its errors.

Every command takes the global ``--db URL``, ``--namespace NAME`` and ``--llm PROVIDER:MODEL``
(env ``LESSONBANK_DB``, ``LESSONBANK_NAMESPACE``, ``LESSONBANK_LLM``). Machine-readable output
with ``--json``; errors go to stderr with exit code 1 (2 for bad input).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from lessonbank.bank import LessonBank
from lessonbank.errors import InputError, LessonbankError
from lessonbank.models import Episode, Hit, Lesson
from lessonbank.retrieval.scoring import utility

app = typer.Typer(
    help="Let LLM agents learn from experience: record episodes, recall lessons, build context.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# Wide enough that ids never wrap when output is piped (rich assumes 80 columns then).
out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False)


class _Options:
    def __init__(self, db: str | None, namespace: str | None, llm: str | None, embedder: str | None) -> None:
        self.db, self.namespace, self.llm, self.embedder = db, namespace, llm, embedder

    def bank(self, *, worker: bool = False, hyde: bool | None = None) -> LessonBank:
        return LessonBank(
            self.db, namespace=self.namespace, llm=self.llm, worker=worker, embedder=self.embedder, hyde=hyde
        )


@app.callback()
def main_options(
    ctx: typer.Context,
    db: Annotated[
        str | None, typer.Option("--db", envvar="LESSONBANK_DB", help="Database URL, e.g. sqlite:///bank.db")
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", "-n", envvar="LESSONBANK_NAMESPACE", help="Namespace of lessons to work in"
        ),
    ] = None,
    llm: Annotated[
        str | None,
        typer.Option("--llm", envvar="LESSONBANK_LLM", help="Reflection model, e.g. openai:gpt-4o-mini"),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder",
            envvar="LESSONBANK_EMBEDDER",
            help="Embedder for vector and hybrid recall: minilm, static, hash, openai:MODEL[@URL] (default: none)",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what the library does")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    ctx.obj = _Options(db, namespace, llm, embedder)


def _fail(message: str, code: int = 1) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    raise typer.Exit(code)


def _emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def _lesson_row(lesson: Lesson) -> dict[str, Any]:
    # utility: the share of helpful outcomes that recall weighs (0.5 before any outcome).
    return {**lesson.model_dump(mode="json"), "utility": round(utility(lesson.helpful, lesson.harmful), 4)}


def _print_lessons(lessons: list[Lesson], hits: list[Hit] | None = None) -> None:
    table = Table(show_lines=False)
    if hits is not None:
        table.add_column("score", justify="right")
    for name in ("id", "kind", "lesson", "tags", "conf", "used", "+/−", "utility"):
        table.add_column(name, overflow="fold")
    for index, lesson in enumerate(lessons):
        text = lesson.situation or lesson.content
        row = [
            lesson.id,
            lesson.kind,
            text if len(text) < 160 else text[:157] + "…",
            ", ".join(lesson.tags),
            f"{lesson.confidence:.2f}",
            str(lesson.access_count),
            f"{lesson.helpful}/{lesson.harmful}",
            f"{utility(lesson.helpful, lesson.harmful):.2f}",
        ]
        if hits is not None:
            row.insert(0, f"{hits[index].score:.3f}")
        table.add_row(*row)
    out.print(table)


def _read_text(path: str) -> str:
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(f"{'stdin' if path == '-' else path} is not valid UTF-8 (byte {exc.start}); send UTF-8 text", 2)


def _json_records(text: str) -> tuple[list[Any], int]:
    """Records of a JSON array or of JSON Lines, and how many lines were not JSON (each reported)."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        records = json.loads(stripped)
        return (records if isinstance(records, list) else [records]), 0
    records, skipped = [], 0
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            skipped += 1
            err.print(f"line {number} skipped: not JSON ({exc.msg})", markup=False)
    return records, skipped


@app.command()
def add(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The lesson, in your own words")],
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="A tag (repeatable)")] = None,
    task_type: Annotated[str | None, typer.Option(help="Task type the lesson applies to")] = None,
    pin: Annotated[bool, typer.Option("--pin", help="Never let it fade")] = False,
    learned_from: Annotated[
        str | None, typer.Option(help="The task it was learned on: a similar task will find the lesson")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the lesson as JSON")] = False,
) -> None:
    """Store a lesson you already know, without an LLM."""
    with ctx.obj.bank() as bank:
        lesson = bank.add_lesson(
            text, tags=tag or [], task_type=task_type, pinned=pin, learned_from=learned_from
        )
    if as_json:
        _emit_json(_lesson_row(lesson))
    else:
        # A fresh lesson has never been used; a used one means the text matched a stored lesson.
        out.print(f"{lesson.id}  ({'reinforced an existing lesson' if lesson.access_count else 'added'})")


@app.command()
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
        _emit_json(
            [
                {
                    "score": hit.score,
                    "lexical": hit.lexical,
                    "vector": hit.vector,
                    "temporal": hit.temporal,
                    "utility": hit.utility,
                    "lesson": _lesson_row(hit.lesson),
                }
                for hit in hits
            ]
        )
    elif not hits:
        out.print("no lessons match")
    else:
        _print_lessons([hit.lesson for hit in hits], hits)


@app.command()
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
        _emit_json(block.model_dump())
    else:
        sys.stdout.write(block.text + ("\n" if block.text else ""))


class _Status(StrEnum):
    success = "success"
    failure = "failure"
    partial = "partial"


@app.command()
def record(
    ctx: typer.Context,
    task: Annotated[
        str | None, typer.Option(help="The task (omit to read an Episode as JSON on stdin)")
    ] = None,
    status: Annotated[_Status | None, typer.Option(help="success, failure or partial")] = None,
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
            _fail("give --task or pipe an Episode as JSON on stdin", 2)
        try:
            data = json.loads(_read_text("-"))
        except json.JSONDecodeError as exc:
            _fail(f"stdin is not JSON: {exc}", 2)
        if not isinstance(data, dict):
            _fail("stdin must hold one JSON object (an Episode)", 2)
    else:
        data = {
            "task": task,
            "status": status.value if status else None,
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
        _emit_json(shown)
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


@app.command()
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


@app.command()
def lessons(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Option(help="Only this kind")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Required tag (repeatable)")] = None,
    status: Annotated[str, typer.Option(help="active, pending, archived or quarantined")] = "active",
    sort: Annotated[str, typer.Option(help="created, access, confidence, utility, score")] = "created",
    limit: Annotated[int, typer.Option(min=1)] = 50,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List stored lessons."""
    with ctx.obj.bank() as bank:
        found = bank.lessons(kind=kind, tags=tag or [], status=status, sort=sort, limit=limit)
    if as_json:
        _emit_json([_lesson_row(lesson) for lesson in found])
    elif not found:
        out.print("no lessons")
    else:
        _print_lessons(found)


@app.command()
def show(
    ctx: typer.Context,
    record_id: Annotated[str, typer.Argument(help="A lesson, episode, job or reflection id")],
) -> None:
    """Show one record as JSON; for an episode, with the policy's decision and its reflections."""
    with ctx.obj.bank() as bank:
        shown = bank.show(record_id)
    _emit_json(shown)


@app.command()
def forget(ctx: typer.Context, lesson_id: Annotated[str, typer.Argument(help="Lesson id (les_…)")]) -> None:
    """Delete a lesson."""
    with ctx.obj.bank() as bank:
        bank.forget(lesson_id)
    out.print(f"forgot {lesson_id}")


@app.command("import")
def import_(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="JSON Lines (or a JSON array) of lessons; - for stdin")],
) -> None:
    """Import lessons; each record needs at least "content". Same content reinforces."""
    if path != "-" and not Path(path).is_file():
        _fail(f"no such file: {path}", 2)
    try:
        records, unreadable = _json_records(_read_text(path))
    except json.JSONDecodeError as exc:
        _fail(f"{path} is not JSON: {exc}", 2)
    records = [r if isinstance(r, dict) else {"content": r} if isinstance(r, str) else {} for r in records]
    with ctx.obj.bank() as bank:
        result = bank.import_lessons(records)
    out.print(
        f"added {result['added']}, reinforced {result['reinforced']}, skipped {result['skipped'] + unreadable}"
    )


class _ExportFormat(StrEnum):
    json = "json"
    jsonl = "jsonl"
    markdown = "markdown"


@app.command()
def export(
    ctx: typer.Context,
    fmt: Annotated[_ExportFormat, typer.Option("--format", "-f")] = _ExportFormat.json,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to a file")] = None,
) -> None:
    """Export every lesson of the namespace."""
    with ctx.obj.bank() as bank:
        text = bank.export(fmt.value)
    if output:
        output.write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")
    else:
        sys.stdout.write(text + ("" if text.endswith("\n") else "\n"))


class _JobsAction(StrEnum):
    list = "list"
    failed = "failed"
    retry = "retry"
    purge = "purge"
    drain = "drain"
    decisions = "decisions"


@app.command()
def jobs(
    ctx: typer.Context,
    action: Annotated[
        _JobsAction, typer.Argument(help="list, failed, retry, purge, drain or decisions")
    ] = _JobsAction.list,
    ids: Annotated[list[str] | None, typer.Argument(help="Job ids, for retry")] = None,
    dead: Annotated[bool, typer.Option("--dead", help="purge: also dead-lettered jobs")] = False,
    timeout: Annotated[float, typer.Option(help="drain: give up after this many seconds")] = 600.0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Inspect and manage reflection jobs (drain runs them now, in this process).

    ``decisions`` lists the policy's latest decisions, skips included, with their reasons.
    """
    with ctx.obj.bank() as bank:
        if action is _JobsAction.decisions:
            _print_decisions(bank.decisions(), as_json)
        elif action in (_JobsAction.list, _JobsAction.failed):
            found = bank.jobs(status="dead" if action is _JobsAction.failed else None)
            if as_json:
                _emit_json([job.model_dump(mode="json") for job in found])
                return
            table = Table()
            for name in (
                "id",
                "status",
                "attempts",
                "trigger",
                "reflector",
                "episode",
                "detail / last error",
            ):
                table.add_column(name, overflow="fold")
            for job in found:
                why = job.last_error if job.status == "dead" else (job.detail or job.last_error or "")
                table.add_row(
                    job.id,
                    job.status,
                    f"{job.attempts}/{job.max_attempts}",
                    str(job.payload.get("trigger")),
                    str(job.payload.get("reflector", "lesson")),
                    job.episode_id or "",
                    why or "",
                )
            out.print(table if found else "no jobs")
            if action is _JobsAction.list:  # skips make no job: show the policy's latest decisions too
                _print_decisions(bank.decisions(limit=20), False, title="latest policy decisions")
        elif action is _JobsAction.retry:
            out.print(f"requeued {bank.retry_jobs(ids or None)} job(s)")
        elif action is _JobsAction.purge:
            statuses = ("done", "dead") if dead else ("done",)
            out.print(f"purged {bank.purge_jobs(statuses=statuses)} job(s)")
        else:
            if bank.reflection_llm is None:
                _fail("no LLM configured: set LESSONBANK_LLM or pass --llm to drain jobs")
            worker = bank._new_worker([bank.namespace])
            asyncio.run(asyncio.wait_for(worker.run(until_idle=True), timeout))
            out.print(f"drained: {worker.processed} job(s) done; now {bank._pending() or 'empty'}")


def _print_decisions(rows: list[dict[str, Any]], as_json: bool, *, title: str | None = None) -> None:
    if as_json:
        _emit_json(rows)
        return
    table = Table(title=title)
    for name in ("episode", "agent", "status", "decision", "trigger", "reflector", "reason"):
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(
            row["episode_id"],
            row.get("agent") or "",
            row["status"],
            "reflect" if row.get("reflect") else "skip",
            row.get("trigger") or "",
            row.get("reflector") or "",
            row.get("reason") or "",
        )
    out.print(table if rows else "no episodes")


@app.command()
def embed(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Embed the lessons that have no vector yet for the configured embedder (--embedder)."""
    with ctx.obj.bank() as bank:
        if bank.embedder is None:
            _fail(
                "no embedder configured: pass --embedder minilm (or static, hash, openai:MODEL) or set LESSONBANK_EMBEDDER"
            )
        count = bank.embed_missing()
        name = bank.embedder.name
    if as_json:
        _emit_json({"embedded": count, "embedder": name})
    else:
        out.print(f"embedded {count} lesson(s) with {name}")


@app.command()
def stats(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Counts of episodes, lessons, reflections, jobs and tokens used."""
    with ctx.obj.bank() as bank:
        numbers = bank.stats()
    if as_json:
        _emit_json(numbers)
        return
    table = Table(show_header=False)
    for key, value in numbers.items():
        if key not in ("by_reflector", "by_day"):
            table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
    out.print(table)
    for key, title in (("by_reflector", "reflector"), ("by_day", "day (UTC)")):
        rows = numbers.get(key) or {}
        if not rows:
            continue
        spend = Table(title=f"reflection spend by {title}")
        for name in (title, "reflections", "LLM calls", "tokens in", "tokens out", "cost $", "unpriced"):
            spend.add_column(name, justify="left" if name == title else "right")
        for label, row in rows.items():
            spend.add_row(
                label,
                str(row["reflections"]),
                str(row["calls"]),
                f"{row['tokens_in']:,}",
                f"{row['tokens_out']:,}",
                f"{row['cost_usd']:.4f}",
                str(row["unpriced_calls"]),
            )
        out.print(spend)


@app.command()
def worker(
    ctx: typer.Context,
    concurrency: Annotated[int, typer.Option(min=1, help="Jobs run at once")] = 4,
    until_idle: Annotated[bool, typer.Option("--until-idle", help="Exit when no job is left")] = False,
) -> None:
    """Run reflection jobs in this process until stopped (SIGINT/SIGTERM finish cleanly).

    Serves every namespace unless --namespace (or LESSONBANK_NAMESPACE) is given.
    """
    namespace_given = ctx.obj.namespace is not None or "LESSONBANK_NAMESPACE" in os.environ
    with ctx.obj.bank() as bank:
        if bank.reflection_llm is None:
            _fail("no LLM configured: set LESSONBANK_LLM or pass --llm")
        bank.settings = bank.settings.with_overrides(worker_concurrency=concurrency)
        runner = bank._new_worker([bank.namespace] if namespace_given else None)

        async def run() -> None:
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, runner.stop)
            await runner.run(until_idle=until_idle)

        err.print(
            f"worker {runner.owner} serving {'namespace ' + bank.namespace if namespace_given else 'all namespaces'}"
        )
        asyncio.run(run())
        err.print(f"worker stopped after {runner.processed} job(s)")


GLOBAL_OPTIONS = ("--db", "--namespace", "-n", "--llm")


def hoist_global_options(argv: list[str]) -> list[str]:
    """Move global options written after the command (``lessonbank recall q --db URL``) before it."""
    command_at = next(
        (
            i
            for i, arg in enumerate(argv)
            if not arg.startswith("-") and (i == 0 or argv[i - 1] not in GLOBAL_OPTIONS)
        ),
        None,
    )
    if command_at is None:
        return argv
    head, tail, rest = argv[:command_at], [], argv[command_at:]
    index = 0
    while index < len(rest):
        arg = rest[index]
        if arg == "--":
            tail.extend(rest[index:])
            break
        name = arg.split("=", 1)[0]
        if name in GLOBAL_OPTIONS and "=" in arg:
            head.append(arg)
        elif arg in GLOBAL_OPTIONS and index + 1 < len(rest):
            head.extend(rest[index : index + 2])
            index += 1
        else:
            tail.append(arg)
        index += 1
    return head + tail


def main() -> None:
    try:
        app(args=hoist_global_options(sys.argv[1:]), prog_name="lessonbank")
    except (InputError, ValidationError) as exc:
        _report(exc, 2)
    except LessonbankError as exc:
        _report(exc, 1)
    except TimeoutError:
        _report(TimeoutError("timed out"), 1)


def _report(exc: Exception, code: int) -> NoReturn:
    if isinstance(exc, ValidationError):
        lines = [
            (f"{'.'.join(str(p) for p in e['loc'])}: " if e["loc"] else "")
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        ]
        message = "invalid input: " + "; ".join(lines)
    else:
        message = str(exc)
    sys.stderr.write(f"error: {message}\n")
    sys.exit(code)


# Commands for what reflections produced (goals, insights, rules, replay) live in their own module.
from lessonbank import cli_learned  # noqa: E402, F401
from lessonbank.loop import cli as loop_cli  # noqa: E402, F401

if __name__ == "__main__":
    # Run the importable module's app: that is where cli_learned registered its commands.
    from lessonbank.cli import main as _main

    _main()
