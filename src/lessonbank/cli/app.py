"""The ``lessonbank`` Typer app: the global options, the command table and error translation.

Every command is a plain function in the module of its group; :func:`build_app` is the one place
that registers them, in the order ``lessonbank --help`` lists them. Importing a command module
registers nothing.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from lessonbank.cli.common import Options, fail
from lessonbank.cli.consolidation import approve, consolidate, core, dreams, proposals_app, reject
from lessonbank.cli.episodes import record, reflect
from lessonbank.cli.jobs import jobs, purge, worker
from lessonbank.cli.learned import goal_app, insights, replay, rules
from lessonbank.cli.lessons import add, export, forget, import_, lessons, rescreen, show, stats
from lessonbank.cli.lifecycle import archive, audit, edit, restore
from lessonbank.cli.loop import analytics, loop_app
from lessonbank.cli.mcp import mcp
from lessonbank.cli.retrieval import context, embed, expand, recall
from lessonbank.cli.server import keys_app, serve
from lessonbank.errors import InputError, LessonbankError
from lessonbank.redact import redact

# (name, function), in the order of `lessonbank --help`; the groups (goal, loop, proposals) follow them.
COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("add", add),
    ("recall", recall),
    ("context", context),
    ("record", record),
    ("reflect", reflect),
    ("lessons", lessons),
    ("show", show),
    ("forget", forget),
    ("archive", archive),
    ("restore", restore),
    ("edit", edit),
    ("audit", audit),
    ("rescreen", rescreen),
    ("consolidate", consolidate),
    ("approve", approve),
    ("reject", reject),
    ("dreams", dreams),
    ("core", core),
    ("import", import_),
    ("export", export),
    ("jobs", jobs),
    ("purge", purge),
    ("embed", embed),
    ("expand", expand),
    ("stats", stats),
    ("worker", worker),
    ("insights", insights),
    ("rules", rules),
    ("replay", replay),
    ("analytics", analytics),
    ("mcp", mcp),
    ("serve", serve),
)
GROUPS: tuple[tuple[str, typer.Typer], ...] = (
    ("goal", goal_app),
    ("loop", loop_app),
    ("proposals", proposals_app),
    ("keys", keys_app),
)


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


def build_app() -> typer.Typer:
    """A fresh ``lessonbank`` app with every command and group registered."""
    app = typer.Typer(
        help="Let LLM agents learn from experience: record episodes, recall lessons, build context.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.callback()(main_options)
    for name, command in COMMANDS:
        app.command(name)(command)
    for name, group in GROUPS:
        app.add_typer(group, name=name)
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


def main() -> None:
    """The ``lessonbank`` entry point: run the app, turning library errors into exit codes 1 and 2."""
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
    sys.stderr.write(f"error: {redact(message)}\n")
    sys.exit(code)
