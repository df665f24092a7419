"""Consolidation commands: ``consolidate`` runs a cycle (it only proposes), ``proposals`` lists and
shows what cycles proposed, ``approve`` / ``reject`` decide, ``proposals revert`` undoes an applied
proposal, ``dreams`` is the log of every cycle. Decisions made here are audited with the actor ``cli``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from lessonbank.cli.common import emit_json, out
from lessonbank.proposals import Proposal

ACTOR = "cli"

proposals_app = typer.Typer(
    help="What consolidation cycles proposed: list (default), show ID, revert ID.",
    invoke_without_command=True,
)


def consolidate(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be proposed; store nothing")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the proposal as JSON")] = False,
) -> None:
    """Run one consolidation cycle now. It proposes (merges of near duplicates, archival of what
    decayed, contradictions to look at); nothing changes until you approve."""
    with ctx.obj.bank() as bank:
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


@proposals_app.callback()
def proposals(
    ctx: typer.Context,
    status: Annotated[
        str | None, typer.Option(help="pending, applied, partially_applied, rejected, reverted")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first")] = 20,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List proposals, newest first (pending ones wait for you: approve or reject)."""
    if ctx.invoked_subcommand is not None:
        return
    with ctx.obj.bank() as bank:
        found = bank.proposals(status=status, limit=limit)
    if as_json:
        emit_json([proposal.model_dump(mode="json") for proposal in found])
        return
    table = Table()
    for name in ("id", "created", "status", "trigger", "operations", "summary"):
        table.add_column(name, overflow="fold")
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
        typer.Option("--only", help="Apply only these operation ids (comma-separated); reject the rest"),
    ] = None,
) -> None:
    """Apply a pending proposal, all of it or --only some operations, in one transaction."""
    chosen = [part.strip() for part in only.split(",") if part.strip()] if only is not None else None
    with ctx.obj.bank() as bank:
        decided = bank.approve(proposal_id, only=chosen, actor=ACTOR)
    applied = sum(op.status == "applied" for op in decided.operations)
    out.print(f"{decided.status.replace('_', ' ')} {proposal_id}: {applied} operation(s) applied")


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
    table = Table()
    for name in ("started", "trigger", "seconds", "items", "outcome", "proposal", "summary"):
        table.add_column(name, overflow="fold")
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
