"""What every command shares: the global options, the consoles, JSON output and input helpers.

Commands print tables to stdout through :data:`out`, warnings to stderr through :data:`err`, JSON
with :func:`emit_json`, and stop with :func:`fail` (exit code 1, or 2 for bad input).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console
    from rich.table import Table

    from lessonbank.bank import LessonBank
    from lessonbank.models import Hit, Lesson

    out: Console
    err: Console


def __getattr__(name: str) -> Console:
    """``out`` and ``err``, made on first use: a command that prints no table (a hook) never loads rich."""
    if name not in ("out", "err"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _console(name)


def _console(name: str) -> Console:
    made: Console | None = globals().get(name)
    if made is not None:
        return made
    from rich.console import Console

    if name == "out":  # wide enough that ids never wrap when piped (rich assumes 80 columns then)
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    else:
        console = Console(stderr=True, highlight=False)
    globals()[name] = console
    return console


class Options:
    """The global options (``ctx.obj`` of every command) and the bank they open."""

    def __init__(self, db: str | None, namespace: str | None, llm: str | None, embedder: str | None) -> None:
        self.db, self.namespace, self.llm, self.embedder = db, namespace, llm, embedder

    def bank(self, *, worker: bool = False, hyde: bool | None = None, patient: bool = False) -> LessonBank:
        """The bank of the global options. An interactive command fails fast on an unreachable
        database (one attempt, one error line); ``patient`` (``worker``) keeps retrying for the URL's
        ``retry_s`` budget, as a server does."""
        from lessonbank.bank import LessonBank  # the stack loads when a command opens a bank, not at start-up
        from lessonbank.stores.connection import RetryBudget

        RetryBudget.fail_fast = not patient
        return LessonBank(
            self.db, namespace=self.namespace, llm=self.llm, worker=worker, embedder=self.embedder, hyde=hyde
        )


def fail(message: str, code: int = 1) -> NoReturn:
    from lessonbank.redact import redact

    sys.stderr.write(f"error: {redact(message)}\n")
    raise typer.Exit(code)


MCP_AT_LEAST = 2  # the server uses mcp.server.mcpserver and mcp_types, new in the MCP SDK 2.0


def require_mcp_sdk(command: str) -> None:
    """Stop with a clear error when the installed MCP SDK is older than the server needs (an older
    ``mcp`` imports, then fails deep inside); a missing one is left to the import that names it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("mcp")
    except PackageNotFoundError:
        return
    major = installed.split(".", 1)[0]
    if major.isdigit() and int(major) < MCP_AT_LEAST:
        fail(
            f"`lessonbank {command}` needs the MCP SDK {MCP_AT_LEAST}.0 or newer, but mcp {installed} is "
            f"installed: pip install --upgrade 'mcp>={MCP_AT_LEAST}.0' (or pip install --upgrade 'lessonbank[server]')"
        )


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def lesson_row(lesson: Lesson) -> dict[str, Any]:
    from lessonbank.retrieval.scoring import utility

    # utility: the share of helpful outcomes that recall weighs (0.5 before any outcome).
    return {**lesson.model_dump(mode="json"), "utility": round(utility(lesson.helpful, lesson.harmful), 4)}


def listing(columns: Sequence[str], *, title: str | None = None) -> Table:
    """A listing's table: one column per name, long values folded rather than cut."""
    from rich.table import Table

    made = Table(title=title, show_lines=False)
    for name in columns:
        made.add_column(name, overflow="fold")
    return made


def print_lessons(lessons: list[Lesson], hits: list[Hit] | None = None) -> None:
    from rich.table import Table

    from lessonbank.retrieval.scoring import utility

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
    _console("out").print(table)


def read_text(path: str) -> str:
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{'stdin' if path == '-' else path} is not valid UTF-8 (byte {exc.start}); send UTF-8 text", 2)


def load_json(text: str, what: str) -> Any:
    """``text`` parsed as JSON; anything unreadable (bad syntax, nesting too deep) stops with exit 2."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{what} is not JSON: {exc}", 2)
    except RecursionError:
        fail(f"{what} is nested too deeply to read as JSON", 2)


def json_records(text: str, what: str) -> tuple[list[Any], int]:
    """Records of a JSON array or of JSON Lines, and how many lines were not JSON (each reported)."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        records = load_json(stripped, what)
        return (records if isinstance(records, list) else [records]), 0
    records, skipped = [], 0
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            skipped += 1
            _console("err").print(f"line {number} skipped: not JSON ({exc.msg})", markup=False)
        except RecursionError:
            skipped += 1
            _console("err").print(f"line {number} skipped: nested too deeply to read as JSON", markup=False)
    return records, skipped


def writable_file(path: Path) -> Path:
    """``path`` if a file can be written there; otherwise stop with exit 2 and say why."""
    if path.is_dir():
        fail(f"cannot write {path}: it is a directory; give a file name", 2)
    if not path.parent.is_dir():
        fail(f"cannot write {path}: the folder {path.parent} does not exist", 2)
    return path
