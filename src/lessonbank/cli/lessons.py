"""What the bank holds: ``add``, ``lessons``, ``show``, ``forget``, ``rescreen``, ``import``, ``export``,
``stats``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import typer
from rich.table import Table

from lessonbank.cli.common import (
    emit_json,
    err,
    fail,
    lesson_row,
    out,
    print_lessons,
    writable_file,
)
from lessonbank.cli.progress import progress
from lessonbank.errors import InputError
from lessonbank.services.transfer import ExportFormat, RecordReader


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
        emit_json(lesson_row(lesson))
    else:
        # A fresh lesson has never been used; a used one means the text matched a stored lesson.
        out.print(f"{lesson.id}  ({'reinforced an existing lesson' if lesson.access_count else 'added'})")


def lessons(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Option(help="Only this kind")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Required tag (repeatable)")] = None,
    status: Annotated[str, typer.Option(help="active, pending, archived or quarantined")] = "active",
    sort: Annotated[str, typer.Option(help="created, access, confidence, utility, score")] = "created",
    limit: Annotated[int, typer.Option(min=1)] = 50,
    tier: Annotated[
        str | None,
        typer.Option(help="Only this decay tier: active, fading, dormant or archive (proposed for archive)"),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON, with each lesson's decay and tier")
    ] = False,
) -> None:
    """List stored lessons (--tier: by how much each has decayed; pinned lessons never do)."""
    with ctx.obj.bank() as bank:
        found = bank.lessons(kind=kind, tags=tag or [], status=status, sort=sort, limit=limit, tier=tier)
        now = bank.services.catalog.scope.now()
    if as_json:
        from lessonbank.services.consolidation.decay import decay_score, tier_of

        scores = [decay_score(lesson, now) for lesson in found]
        emit_json(
            [
                {**lesson_row(lesson), "decay": round(score, 4), "tier": tier_of(score)}
                for lesson, score in zip(found, scores, strict=True)
            ]
        )
    elif not found:
        out.print("no lessons")
    else:
        print_lessons(found)


def show(
    ctx: typer.Context,
    record_id: Annotated[str, typer.Argument(help="A lesson, episode, job or reflection id")],
) -> None:
    """Show one record as JSON; for an episode, with the policy's decision and its reflections."""
    with ctx.obj.bank() as bank:
        shown = bank.show(record_id)
    emit_json(shown)


def forget(ctx: typer.Context, lesson_id: Annotated[str, typer.Argument(help="Lesson id (les_…)")]) -> None:
    """Delete a lesson."""
    with ctx.obj.bank() as bank:
        bank.forget(lesson_id, actor="cli")
    out.print(f"forgot {lesson_id}")


def rescreen(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would change; write nothing")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Redact and screen every stored lesson again with this version's rules.

    Run it after an upgrade: a lesson stored before a secret pattern or an injection rule existed
    gets its secrets redacted, or is quarantined for a person. Running it again changes nothing."""
    with ctx.obj.bank() as bank:
        counts = bank.rescreen(dry_run=dry_run)
    if as_json:
        emit_json({**counts, "dry_run": dry_run})
        return
    verb = "would change" if dry_run else "changed"
    out.print(
        f"checked {counts['checked']} lesson(s); {verb}: {counts['redacted']} redacted, "
        f"{counts['quarantined']} quarantined"
    )


def import_(
    ctx: typer.Context,
    path: Annotated[
        str,
        typer.Argument(
            help="JSON Lines (or a JSON array) of lessons; - for stdin; a skills folder or an AGENTS.md"
        ),
    ],
) -> None:
    """Import lessons; each record needs at least "content". Same content reinforces.

    A folder of skills (DIR/<name>/SKILL.md) or a Markdown file with the rules section
    (AGENTS.md, CLAUDE.md), as `lessonbank export` wrote them, is read back as one pending
    proposal a person approves (`lessonbank proposals`): an edited skill or rule is an edit, a new
    one a candidate, a deleted one an archive. Nothing is written to the lessons before approval.

    The input is read a piece at a time, so a backup of any size imports in flat memory. A file
    holding a JSON array is read through once first: if it is broken, nothing is imported."""
    if path != "-" and (Path(path).is_dir() or path.lower().endswith(".md")):
        _import_agent_files(ctx, Path(path))
        return
    what = "stdin" if path == "-" else path
    if path != "-" and not Path(path).is_file():
        fail(f"no such file: {path}", 2)
    try:
        with ctx.obj.bank() as bank, _opened(path) as stream:
            if path != "-" and _starts_array(stream):
                for _ in _NumberedReader(stream, what):  # parse only: a broken array stops here
                    pass
                stream.seek(0)
            reader = _NumberedReader(
                stream, what, on_skip=lambda message: err.print(message, markup=False, soft_wrap=True)
            )
            records = (record for record in map(reader.checked, reader) if record is not None)
            total = {"added": 0, "reinforced": 0, "skipped": 0}
            size = Path(path).stat().st_size if path != "-" else None
            try:
                # One import for the whole stream (a large one is prepared by worker processes); the
                # counts after each batch written say what was kept should a read break half way.
                with progress(f"importing {what}", total=size) as advance:
                    done = 0

                    def written(counts: dict[str, int]) -> None:
                        nonlocal total, done
                        total = {key: counts[key] for key in total}
                        read = stream.tell() if size is not None else sum(total.values())
                        advance(read - done)
                        done = read

                    # The write service itself: the bank's import_lessons has the remote bank's
                    # parameters, and a progress callback cannot travel in a request.
                    bank.services.intake.import_lessons(records, on_written=written)
            except InputError as exc:
                if any(total.values()):
                    fail(f"{exc}; imported before it: {_counts(total, reader.skipped)}", 2)
                raise
    except OSError as exc:
        fail(f"cannot read {what}: {exc.strerror or exc}", 2)
    if reader.empty:
        err.print(f"{what} is empty: nothing to import", markup=False, soft_wrap=True)
    out.print(_counts(total, reader.skipped))
    if total["skipped"] + reader.skipped:
        raise typer.Exit(1)  # some records were not imported: each is named above


def _import_agent_files(ctx: typer.Context, path: Path) -> None:
    """Stage the edits of a skills folder or an AGENTS.md as a pending proposal, and say what it holds."""
    from lessonbank.integrations.agents_md import import_agents_md
    from lessonbank.integrations.skills import import_skills

    with ctx.obj.bank() as bank:
        staged = import_skills(bank, path) if path.is_dir() else import_agents_md(bank, path)
    for where, why in staged.skipped:
        err.print(f"{where} skipped: {why}", markup=False, soft_wrap=True)
    counts = staged.counts()
    found = (
        f"{counts['edits']} edit(s), {counts['candidates']} candidate(s), {counts['archives']} archive(s); "
        f"{counts['unchanged']} unchanged, {counts['skipped']} skipped"
    )
    if staged.proposal is None:
        out.print(f"nothing to propose: {found}", markup=False, soft_wrap=True)
    else:
        out.print(
            f"proposal {staged.proposal.id} is pending ({found}); "
            f"approve it with `lessonbank proposals approve {staged.proposal.id}`",
            markup=False,
            soft_wrap=True,
        )
    if counts["skipped"]:
        raise typer.Exit(1)


class _NumberedReader(RecordReader):
    """The import's reader: knows the line (JSON Lines) or position (array) of each record, and
    :meth:`checked` turns a record that is not a valid lesson into one line naming it, on stderr."""

    line = 0

    def _line(self, number: int, raw: bytes) -> Iterator[Any]:
        self.line = number
        return super()._line(number, raw)

    def checked(self, record: Any) -> dict[str, Any] | None:
        from pydantic import ValidationError

        from lessonbank.models import Lesson
        from lessonbank.services.transfer import STATE_KEY

        where = f"record {self.records}" if self.is_array else f"line {self.line}"
        if isinstance(record, str):
            record = {"content": record}
        if not isinstance(record, dict):
            self._refuse(where, f"not a lesson (a JSON object or a string), but {type(record).__name__}")
            return None
        data = {k: v for k, v in record.items() if v is not None and k not in ("content_hash", STATE_KEY)}
        data.setdefault("namespace", "default")
        data.setdefault("source", "import")
        try:
            Lesson.model_validate(data)
        except ValidationError as exc:
            self._refuse(where, _invalid(exc))
            return None
        except ValueError as exc:
            self._refuse(where, " ".join(str(exc).split()))
            return None
        return record

    def _refuse(self, where: str, why: str) -> None:
        self.skipped += 1
        if self.on_skip:
            self.on_skip(f"{where} skipped: {why}")
        return None


def _invalid(exc: Any) -> str:
    """A pydantic error as a person reads it: each field and what is wrong, no links."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "record"
        if error["type"] == "missing":
            parts.append(f'"{field}" is missing')
        elif error["type"] == "extra_forbidden":
            parts.append(f'"{field}" is not a lesson field')
        else:
            parts.append(
                f'"{field}": {error["msg"].removeprefix("Value error, ")} (got {error.get("input")!r})'
            )
    return "; ".join(parts)


def _counts(result: dict[str, int], unreadable: int) -> str:
    return f"added {result['added']}, reinforced {result['reinforced']}, skipped {result['skipped'] + unreadable}"


def _opened(path: str) -> AbstractContextManager[BinaryIO]:
    return nullcontext(sys.stdin.buffer) if path == "-" else open(path, "rb")


def _starts_array(stream: BinaryIO) -> bool:
    """Whether the file is a JSON array (its first non-blank byte is ``[``); the file is rewound."""
    first = b""
    while piece := stream.read(1 << 12):
        first = piece.lstrip(b"\xef\xbb\xbf \t\r\n")
        if first:
            break
    stream.seek(0)
    return first.startswith(b"[")


def _stat_lines(numbers: dict[str, Any]) -> list[tuple[str, str]]:
    """``stats`` as readable lines, one per subject (``--json`` keeps every raw field)."""

    def counts(value: Any) -> str:
        if not isinstance(value, dict):
            return str(value)
        total = sum(v for v in value.values() if isinstance(v, int))
        parts = ", ".join(f"{name} {count}" for name, count in value.items())
        return f"{total} ({parts})" if parts else "0"

    known = {"namespace", "episodes", "lessons", "lessons_by_status", "reflections", "jobs", "tokens_in"}
    known |= {"tokens_out", "llm_calls", "cost_usd", "size_bytes", "llm", "consolidation"}
    known |= {"by_reflector", "by_day"}
    lines = [
        ("namespace", str(numbers.get("namespace", ""))),
        ("episodes", counts(numbers.get("episodes", 0))),
        ("lessons", counts(numbers.get("lessons", {}))),
        ("  by status", counts(numbers.get("lessons_by_status", {}))),
        ("reflections", counts(numbers.get("reflections", {}))),
        ("jobs", counts(numbers.get("jobs", {}))),
        (
            "LLM use",
            f"{numbers.get('llm_calls', 0):,} call(s), {numbers.get('tokens_in', 0):,} tokens in, "
            f"{numbers.get('tokens_out', 0):,} out, ${numbers.get('cost_usd', 0.0):.4f}",
        ),
        ("llm", str(numbers.get("llm") or "none configured (--llm or LESSONBANK_LLM)")),
    ]
    if "size_bytes" in numbers:
        lines.append(("size", _size(numbers["size_bytes"])))
    cycle = numbers.get("consolidation")
    if isinstance(cycle, dict):
        cap = cycle.get("daily_cap")
        lines.append(
            (
                "consolidation",
                f"breaker {cycle.get('breaker')} ({cycle.get('failed_or_empty_in_a_row', 0)} failed or empty "
                f"in a row, opens at {cycle.get('breaker_limit')}); today {cycle.get('tokens_today', 0):,} "
                f"tokens, ${cycle.get('cost_usd_today', 0.0):.4f}"
                + (f" of a ${cap} cap" if cap is not None else ", no daily cap"),
            )
        )
    for key, value in numbers.items():  # anything a newer bank reports, shown as it is
        if key not in known:
            lines.append(
                (key, json.dumps(value, default=str) if isinstance(value, dict | list) else str(value))
            )
    return lines


def _size(size: Any) -> str:
    if not isinstance(size, int | float):
        return str(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return str(size)


def export(
    ctx: typer.Context,
    target: Annotated[
        Path | None,
        typer.Argument(
            help="Where to write, as --output: for skills a folder, for agents-md an AGENTS.md or CLAUDE.md",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[ExportFormat, typer.Option("--format", "-f")] = "json",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to a file (replaced once whole, keeping its mode; a new one is private), "
            "into a FIFO or device, or - for stdout",
        ),
    ] = None,
    live_only: Annotated[
        bool, typer.Option("--live-only", help="Leave out superseded and expired lessons (not a full backup)")
    ] = False,
) -> None:
    """Export every lesson of the namespace: a full backup, superseded and expired lessons marked.

    Written as it is read, in flat memory. A file (or the file a link points to) is replaced only
    once the export is whole and keeps its mode; a new file is readable by you only (0600). A FIFO
    or a device such as /dev/stdout is written into, never replaced.

    --format skills DIR writes each live procedure as DIR/<name>/SKILL.md (Agent Skills);
    --format agents-md FILE writes the live rules as one marked section of FILE, the rest of it
    untouched. Edit them, then `lessonbank import DIR` or `lessonbank import FILE` to propose the
    changes for approval."""
    output = output or target
    if output is not None and str(output) == "-":
        output = None
    if fmt == "skills" and output is None:
        fail("--format skills writes a folder: give it (lessonbank export --format skills DIR)", 2)
    if output is not None and fmt != "skills":
        writable_file(output)
    with ctx.obj.bank() as bank:
        try:
            written = bank.export_to(output or sys.stdout, fmt, live_only=live_only)
        except OSError as exc:
            fail(f"cannot write {output or 'stdout'}: {exc.strerror or exc}", 2)
    if fmt in ("skills", "agents-md") and output is not None:
        what = "skill(s)" if fmt == "skills" else "rule(s)"
        err.print(f"wrote {written} {what} to {output}", markup=False, soft_wrap=True)


def stats(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Counts of episodes, lessons, reflections, jobs and tokens used."""
    with ctx.obj.bank() as bank:
        numbers = bank.stats()
    if as_json:
        emit_json(numbers)
        return
    for label, value in _stat_lines(numbers):
        out.print(f"{label:<14} {value}", markup=False, soft_wrap=True)
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
