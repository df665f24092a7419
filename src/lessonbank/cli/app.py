"""The ``lessonbank`` Typer app: the global options, the command table and error translation.

Every command is a plain function in the module of its group; :data:`COMMANDS` and :data:`GROUPS`
are the one place that registers them, in the order ``lessonbank --help`` lists them, each with its
one-line help. A command's module is imported only when that command runs or shows its own help
(:mod:`lessonbank.cli.lazy`), so ``lessonbank --help`` imports no bank, store, provider SDK or server.
Importing a command module registers nothing.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Annotated, NoReturn

import typer

from lessonbank.cli.common import Options, fail
from lessonbank.cli.lazy import LazyCommand, LazyGroup
from lessonbank.errors import InputError, LessonbankError

# The command table, in the order of `lessonbank --help`; the groups (goal, loop, proposals, keys) follow.
# Each help is the first paragraph of the command's own help (tests/test_startup.py keeps them equal).
COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand("add", "lessonbank.cli.lessons:add", "Store a lesson you already know, without an LLM."),
    LazyCommand("recall", "lessonbank.cli.retrieval:recall", "Show the lessons most relevant to a task."),
    LazyCommand(
        "context",
        "lessonbank.cli.retrieval:context",
        "Print the block to put in the prompt for a task, within the token budget.",
    ),
    LazyCommand(
        "record",
        "lessonbank.cli.episodes:record",
        "Record an episode; reflection runs in the background (or now, with --wait).",
    ),
    LazyCommand(
        "reflect",
        "lessonbank.cli.episodes:reflect",
        "Reflect on a stored episode now (trigger manual), whatever the policy decided.",
    ),
    LazyCommand(
        "lessons",
        "lessonbank.cli.lessons:lessons",
        "List stored lessons (--tier: by how much each has decayed; pinned lessons never do).",
    ),
    LazyCommand(
        "show",
        "lessonbank.cli.lessons:show",
        "Show one record as JSON; for an episode, with the policy's decision and its reflections.",
    ),
    LazyCommand("forget", "lessonbank.cli.lessons:forget", "Delete a lesson."),
    LazyCommand(
        "archive",
        "lessonbank.cli.lifecycle:archive",
        "Archive a lesson: kept, no longer recalled or injected (lessonbank restore brings it back).",
    ),
    LazyCommand(
        "restore",
        "lessonbank.cli.lifecycle:restore",
        "Make an archived lesson active again; for a quarantined or pending lesson, approve it.",
    ),
    LazyCommand(
        "edit",
        "lessonbank.cli.lifecycle:edit",
        "Pin or unpin a lesson, set its tags or importance (audited; its text is not edited in place).",
    ),
    LazyCommand(
        "audit",
        "lessonbank.cli.lifecycle:audit",
        "Show the audit log: who changed which lesson, when, and how (newest first).",
    ),
    LazyCommand(
        "rescreen",
        "lessonbank.cli.lessons:rescreen",
        "Redact and screen every stored lesson again with this version's rules.",
    ),
    LazyCommand(
        "consolidate",
        "lessonbank.cli.consolidation:consolidate",
        "Queue one consolidation cycle of this namespace; a `lessonbank worker` runs it (one cycle per\nnamespace at a time: a cycle already queued or running is the one you get). It proposes (merges,\narchival of what decayed, contradictions to look at, with an LLM what the episodes teach); nothing\nchanges until you approve. --wait waits for it and shows the proposal.",
    ),
    LazyCommand(
        "approve",
        "lessonbank.cli.consolidation:approve",
        "Apply a pending proposal, all of it or --only some operations, in one transaction; with\n--edit or --edit-file, with your changes to what it writes.",
    ),
    LazyCommand(
        "reject",
        "lessonbank.cli.consolidation:reject",
        "Reject a pending proposal: nothing is applied, and its operations are not proposed again.",
    ),
    LazyCommand(
        "dreams",
        "lessonbank.cli.consolidation:dreams",
        "The dream log: every consolidation cycle, its trigger, duration, items and outcome.",
    ),
    LazyCommand(
        "core",
        "lessonbank.cli.consolidation:core",
        "The namespace's core memory (Identity, Active Context, Persona, Critical Facts), as the last\napproved consolidation wrote it.",
    ),
    LazyCommand(
        "import",
        "lessonbank.cli.lessons:import_",
        'Import lessons; each record needs at least "content". Same content reinforces.',
    ),
    LazyCommand(
        "export",
        "lessonbank.cli.lessons:export",
        "Export every lesson of the namespace: a full backup, superseded and expired lessons marked.",
    ),
    LazyCommand(
        "jobs",
        "lessonbank.cli.queue:jobs",
        "Inspect and manage reflection jobs (drain runs them now, in this process).",
    ),
    LazyCommand(
        "purge",
        "lessonbank.cli.queue:purge",
        "Delete episodes, reflections and done jobs past retention, in this namespace.",
    ),
    LazyCommand(
        "embed",
        "lessonbank.cli.retrieval:embed",
        "Embed the lessons that have no vector yet for the configured embedder (--embedder).",
    ),
    LazyCommand(
        "expand",
        "lessonbank.cli.retrieval:expand",
        "Ask the LLM (--llm / LESSONBANK_LLM) for 2-3 example tasks that need each lesson added by hand or\nimported, and index them with it, so a task that only shows code finds the prose lesson about it.\nShows the lessons, tokens and cost first and asks before sending (one call per lesson).",
    ),
    LazyCommand(
        "stats",
        "lessonbank.cli.lessons:stats",
        "Counts of episodes, lessons, reflections, jobs and tokens used.",
    ),
    LazyCommand(
        "worker",
        "lessonbank.cli.queue:worker",
        "Run reflection jobs and consolidation cycles in this process until stopped.",
    ),
    LazyCommand(
        "insights", "lessonbank.cli.learned:insights", "List live goal insights, most important first."
    ),
    LazyCommand(
        "rules",
        "lessonbank.cli.learned:rules",
        "List learned rules (strategic first), or confirm one as helpful.",
    ),
    LazyCommand(
        "replay",
        "lessonbank.cli.learned:replay",
        "Show the replay examples (recorded procedures) a task would get.",
    ),
    LazyCommand(
        "analytics",
        "lessonbank.cli.loop:analytics",
        "How loops learn: success rate, iterations, learning rate, failure categories, lesson reuse.",
    ),
    LazyCommand(
        "mcp", "lessonbank.cli.mcp:mcp", "Serve the bank to an MCP client over stdio; logs go to stderr."
    ),
    LazyCommand(
        "serve",
        "lessonbank.cli.server:serve",
        "Serve the bank: the REST API (/api/v1, OpenAPI at /docs), the MCP endpoint (/mcp) and the\ndashboard (/). Without any API key it is open to whoever can reach it, so it binds to 127.0.0.1 only.",
    ),
)
GROUPS: tuple[LazyCommand, ...] = (
    LazyCommand(
        "goal",
        "lessonbank.cli.learned:goal_app",
        "Report goals reaching a terminal state (their insight is reflected).",
    ),
    LazyCommand(
        "loop",
        "lessonbank.cli.loop:loop_app",
        "Run Reflexion loops (actor → checks → reflect → retry) and export their records.",
    ),
    LazyCommand(
        "proposals",
        "lessonbank.cli.consolidation:proposals_app",
        "What consolidation cycles proposed: list (default), show ID, approve ID, reject ID, revert ID.",
    ),
    LazyCommand(
        "keys", "lessonbank.cli.server:keys_app", "API keys of `lessonbank serve`: create, list, revoke."
    ),
    LazyCommand(
        "claude",
        "lessonbank.cli.claude:claude_app",
        "Wire lessonbank into Claude Code: install, uninstall (hooks and MCP server), plugin DIR.",
    ),
    LazyCommand(
        "hooks",
        "lessonbank.cli.hooks:hooks_app",
        "Answer an agent's hooks from the bank (claude: a Claude Code hook payload on stdin).",
    ),
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("lessonbank")
        except PackageNotFoundError:  # run from a source tree that was never installed
            number = "unknown (not installed)"
        sys.stdout.write(f"lessonbank {number}\n")
        raise typer.Exit()


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
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit"),
    ] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    for name, value in (("--db", db), ("namespace", namespace), ("--llm", llm), ("--embedder", embedder)):
        _check_utf8(name, value)
    ctx.obj = Options(db, namespace, llm, embedder)


def _check_utf8(name: str, value: str | None) -> None:
    """Arguments arrive as bytes: one that is not UTF-8 stops here, not deep inside a store."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = value.encode("utf-8", "surrogateescape")
        fail(
            f"{name} is not valid UTF-8 (byte {exc.start}: {raw[exc.start : exc.start + 1]!r}); use UTF-8 text",
            2,
        )


class Commands(LazyGroup):
    """The ``lessonbank`` group: every command and group of the table, each imported when it is used."""

    table = COMMANDS + GROUPS


def build_app() -> typer.Typer:
    """A fresh ``lessonbank`` app with every command and group registered (each loads on first use)."""
    app = typer.Typer(
        cls=Commands,
        help="Let LLM agents learn from experience: record episodes, recall lessons, build context.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.callback()(main_options)
    return app


app = build_app()

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


def main(argv: Sequence[str] | None = None) -> None:
    """The ``lessonbank`` entry point: run the app on ``argv`` (default: the command line), turning
    library errors into exit codes 1 and 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(args=hoist_global_options(args), prog_name="lessonbank")
    except Exception as exc:
        from pydantic import ValidationError  # loaded by then if a command raised one

        if isinstance(exc, InputError | ValidationError):
            _report(exc, 2)
        if isinstance(exc, LessonbankError):
            _report(exc, 1)
        if isinstance(exc, TimeoutError):
            _report(TimeoutError("timed out"), 1)
        raise
    finally:
        if connection := sys.modules.get("lessonbank.stores.connection"):
            connection.RetryBudget.fail_fast = False  # the process default, for code run in-process after


def _report(exc: Exception, code: int) -> NoReturn:
    from pydantic import ValidationError

    from lessonbank.redact import redact

    if isinstance(exc, ValidationError):
        lines = [
            (f"{'.'.join(str(p) for p in e['loc'])}: " if e["loc"] else "")
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        ]
        message = "invalid input: " + "; ".join(lines)
    else:
        message = str(exc)
    sys.stderr.write(f"error: {redact(message)}\n")
    sys.exit(code)
