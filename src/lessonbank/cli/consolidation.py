"""Consolidation commands: ``consolidate`` runs a cycle (it only proposes), ``proposals`` lists and
shows what cycles proposed, ``approve`` / ``reject`` decide, ``proposals revert`` undoes an applied
proposal, ``dreams`` is the log of every cycle. Decisions made here are audited with the actor ``cli``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lessonbank.cli.common import emit_json, listing, out
from lessonbank.cli.progress import progress

if TYPE_CHECKING:
    from lessonbank.proposals import Proposal

ACTOR = "cli"

proposals_app = typer.Typer(
    help="What consolidation cycles proposed: list (default), show ID, approve ID, reject ID, revert ID.",
    invoke_without_command=True,
)


def consolidate(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be proposed, computed here; store nothing")
    ] = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait", help="Wait for the cycle (run it here if no worker does) and show its proposal"
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the proposal (with --wait or --dry-run), else the job, as JSON"),
    ] = False,
) -> None:
    """Queue one consolidation cycle of this namespace; a `lessonbank worker` runs it (one cycle per
    namespace at a time: a cycle already queued or running is the one you get). It proposes (merges,
    archival of what decayed, contradictions to look at, with an LLM what the episodes teach); nothing
    changes until you approve. --wait waits for it and shows the proposal."""
    if not (wait or dry_run):
        with ctx.obj.bank() as bank:
            job = bank.services.cycles.manual()  # what bank.consolidate(wait=False) queues, with its job
        if as_json:
            emit_json(job.model_dump(mode="json"))
        else:
            state = "running" if job.status == "leased" else job.status
            out.print(
                f"cycle job {job.id} ({state}, trigger {job.payload.get('trigger')}): a `lessonbank worker` "
                "runs it; `lessonbank consolidate --wait` runs it here; then `lessonbank proposals`"
            )
        return
    with ctx.obj.bank() as bank, progress("consolidating (a dry run)" if dry_run else "consolidating"):
        proposal = bank.consolidate(dry_run=dry_run)
        text = (
            None
            if proposal is None or as_json or dry_run
            else bank.services.consolidation.render(proposal.id)
        )
    if as_json:
        emit_json(None if proposal is None else proposal.model_dump(mode="json"))
        return
    if proposal is None:
        out.print("nothing to propose: no near duplicates, nothing decayed, no new contradiction")
        return
    if dry_run:
        out.print(f"dry run: would propose {_counts(proposal)} (nothing stored)")
        return
    typer.echo(text, nl=False)
    out.print(
        f"proposal {proposal.id}: lessonbank approve {proposal.id} [--only OP,…] or lessonbank reject {proposal.id}"
    )


_STATUS_HELP = "pending, applied, partially_applied, rejected, reverted"
_LIMIT_HELP = "At most this many, newest first"


@proposals_app.callback()
def proposals(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(help=_STATUS_HELP)] = None,
    limit: Annotated[int, typer.Option(min=1, help=_LIMIT_HELP)] = 20,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List proposals, newest first (pending ones wait for you: approve or reject)."""
    if ctx.invoked_subcommand is None:
        _list_proposals(ctx, status, limit, as_json)


@proposals_app.command("list")
def list_proposals(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(help=_STATUS_HELP)] = None,
    limit: Annotated[int, typer.Option(min=1, help=_LIMIT_HELP)] = 20,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List proposals, newest first (as `lessonbank proposals` alone does)."""
    _list_proposals(ctx, status, limit, as_json)


def _list_proposals(ctx: typer.Context, status: str | None, limit: int, as_json: bool) -> None:
    with ctx.obj.bank() as bank:
        found = bank.proposals(status=status, limit=limit)
    if as_json:
        emit_json([proposal.model_dump(mode="json") for proposal in found])
        return
    if not found:
        out.print(f"no {status + ' ' if status else ''}proposals: lessonbank consolidate proposes some")
        return
    table = listing(("id", "created", "status", "trigger", "operations", "summary"))
    for proposal in found:
        table.add_row(
            proposal.id,
            proposal.created_at.strftime("%Y-%m-%d %H:%M"),
            proposal.status,
            proposal.trigger,
            _counts(proposal),
            proposal.summary,
        )
    out.print(table)


@proposals_app.command("show")
def show_proposal(
    ctx: typer.Context,
    proposal_id: Annotated[str, typer.Argument(help="Proposal id (prp_…)")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show a proposal as a pending reflection: each operation with its id, lessons and reason."""
    with ctx.obj.bank() as bank:
        if as_json:
            emit_json(bank.proposal(proposal_id).model_dump(mode="json"))
            return
        text = bank.services.consolidation.render(proposal_id)
    typer.echo(text, nl=False)


@proposals_app.command("revert")
def revert(
    ctx: typer.Context, proposal_id: Annotated[str, typer.Argument(help="Proposal id (prp_…)")]
) -> None:
    """Undo an applied proposal: each lesson it changed goes back, each lesson it added is archived."""
    with ctx.obj.bank() as bank:
        bank.revert(proposal_id, actor=ACTOR)
    out.print(f"reverted {proposal_id}")


def approve(
    ctx: typer.Context,
    proposal_id: Annotated[str, typer.Argument(help="Proposal id (prp_…)")],
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            help="Apply only these operation ids (comma-separated; 'core' is the core memory rewrite); reject the rest",
        ),
    ] = None,
    edit: Annotated[
        bool,
        typer.Option("--edit", help="Approve with changes: edit what it writes in $VISUAL / $EDITOR first"),
    ] = False,
    edit_file: Annotated[
        Path | None,
        typer.Option(
            "--edit-file",
            help="Approve with changes read from this file (as --edit writes it; '-' for stdin)",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Apply a pending proposal, all of it or --only some operations, in one transaction; with
    --edit or --edit-file, with your changes to what it writes."""
    if edit and edit_file is not None:
        raise typer.BadParameter("give --edit or --edit-file, not both")
    chosen = [part.strip() for part in only.split(",") if part.strip()] if only is not None else None
    edits: dict[str, str] | None = None
    with ctx.obj.bank() as bank:
        if edit or edit_file is not None:
            from lessonbank.services.consolidation.edits import edit_file as edit_file_text
            from lessonbank.services.consolidation.edits import read_edit_file

            proposal = bank.proposal(proposal_id)
            # a flag's lessons, with their text and scope, for the person to decide on
            flagged = sorted({i for op in proposal.operations if op.kind == "flag" for i in op.lesson_ids})
            lessons = {i: bank.get_lesson(i) for i in flagged} if edit else None
            text = _edited(edit_file_text(proposal, lessons=lessons)) if edit else _read(edit_file)
            kept, edits = read_edit_file(text, proposal)
            chosen = [i for i in kept if chosen is None or i in chosen]
        decided = bank.approve(proposal_id, only=chosen, edits=edits, actor=ACTOR)
    applied = sum(op.status == "applied" for op in decided.operations)
    changed = f", {len(edits)} edited" if edits else ""
    out.print(f"{decided.status.replace('_', ' ')} {proposal_id}: {applied} operation(s) applied{changed}")


def core(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Also the evolution and reflection logs")] = False,
    logs: Annotated[bool, typer.Option("--logs", help="Print the evolution and reflection logs too")] = False,
) -> None:
    """The namespace's core memory (Identity, Active Context, Persona, Critical Facts), as the last
    approved consolidation wrote it."""
    with ctx.obj.bank() as bank:
        documents = bank.services.consolidation.documents()
    if as_json:
        emit_json(
            {
                "core_memory": documents.core_memory,
                "evolution_log": documents.evolution_log(),
                "reflection_log": documents.reflection_log(),
                "reflections": documents.count,
            }
        )
        return
    if not documents.core_memory.strip():
        out.print(
            "no core memory yet: it is written by an approved consolidation (lessonbank consolidate --wait)"
        )
    else:
        typer.echo(documents.core_memory, nl=False)
    if logs:
        typer.echo("\n" + documents.evolution_log() + "\n" + documents.reflection_log(), nl=False)


def _edited(text: str) -> str:
    """``text`` after a person edited it in $VISUAL / $EDITOR (a temporary file)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        raise typer.BadParameter("set $EDITOR (or $VISUAL) to edit, or give the edited text with --edit-file")
    with tempfile.TemporaryDirectory(prefix="lessonbank-") as folder:
        path = Path(folder) / "proposal.md"
        path.write_text(text, encoding="utf-8")
        done = subprocess.run([*shlex.split(editor), str(path)], check=False)
        if done.returncode != 0:
            raise typer.BadParameter(f"the editor exited with {done.returncode}; nothing approved")
        return path.read_text(encoding="utf-8")


def _read(path: Path | None) -> str:
    if path is None or str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}") from None


def reject(
    ctx: typer.Context,
    proposal_id: Annotated[str, typer.Argument(help="Proposal id (prp_…)")],
    reason: Annotated[str | None, typer.Option("--reason", help="Why, kept with the proposal")] = None,
) -> None:
    """Reject a pending proposal: nothing is applied, and its operations are not proposed again."""
    with ctx.obj.bank() as bank:
        bank.reject(proposal_id, reason=reason, actor=ACTOR)
    out.print(f"rejected {proposal_id}")


def dreams(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first")] = 20,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The dream log: every consolidation cycle, its trigger, duration, items and outcome."""
    with ctx.obj.bank() as bank:
        runs = bank.dreams(limit=limit)
    if as_json:
        emit_json([run.model_dump(mode="json") for run in runs])
        return
    table = listing(("started", "trigger", "seconds", "items", "outcome", "proposal", "summary"))
    for run in runs:
        table.add_row(
            run.started_at.strftime("%Y-%m-%d %H:%M:%S"),
            run.trigger,
            f"{run.duration_s:.2f}",
            str(run.items_processed),
            run.outcome,
            run.proposal_id or "",
            run.error or run.summary,
        )
    out.print(table)


def _counts(proposal: Proposal) -> str:
    kinds: dict[str, int] = {}
    for op in proposal.operations:
        if op.status != "dropped":
            kinds[op.kind] = kinds.get(op.kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "none"


# `lessonbank proposals approve ID` and `proposals reject ID`, beside the top-level commands.
proposals_app.command("approve")(approve)
proposals_app.command("reject")(reject)
