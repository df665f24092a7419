"""Background reflection: ``jobs`` (inspect, retry, purge, drain, decisions), the ``worker`` process,
and ``purge`` (retention: old episodes, reflections and done jobs)."""

from __future__ import annotations

import asyncio
import os
import signal
from enum import StrEnum
from typing import Annotated, Any

import typer

from lessonbank.cli.common import emit_json, err, fail, listing, out


class _JobsAction(StrEnum):
    list = "list"
    failed = "failed"
    retry = "retry"
    purge = "purge"
    drain = "drain"
    decisions = "decisions"


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
                emit_json([job.model_dump(mode="json") for job in found])
                return
            table = listing(
                (
                    "id",
                    "status",
                    "attempts",
                    "trigger",
                    "reflector",
                    "episode",
                    "detail / last error",
                )
            )
            for job in found:
                why = job.last_error if job.status == "dead" else (job.detail or job.last_error or "")
                table.add_row(
                    job.id,
                    job.status,
                    f"{job.attempts}/{job.max_attempts}",
                    str(job.payload.get("trigger")),
                    str(job.payload.get("reflector", "lesson")) if job.kind == "reflect" else "cycle",
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
                fail("no LLM configured: set LESSONBANK_LLM or pass --llm to drain jobs")
            worker = bank.new_worker([bank.namespace])
            asyncio.run(asyncio.wait_for(worker.run(until_idle=True), timeout))
            out.print(f"drained: {worker.processed} job(s) done; now {bank.pending() or 'empty'}")


def _print_decisions(rows: list[dict[str, Any]], as_json: bool, *, title: str | None = None) -> None:
    if as_json:
        emit_json(rows)
        return
    table = listing(("episode", "agent", "status", "decision", "trigger", "reflector", "reason"), title=title)
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


def worker(
    ctx: typer.Context,
    concurrency: Annotated[int, typer.Option(min=1, help="Jobs run at once")] = 4,
    until_idle: Annotated[bool, typer.Option("--until-idle", help="Exit when no job is left")] = False,
) -> None:
    """Run reflection jobs and consolidation cycles in this process until stopped.

    It also checks the automatic consolidation triggers of the namespaces it serves, every 30 s:
    LESSONBANK_CONSOLIDATION_SCHEDULE (cron), _THRESHOLD (new episodes) and _INACTIVITY_H (dream mode).

    SIGINT/SIGTERM stop it cleanly: no new job is leased, the jobs in flight are cancelled and handed
    back with their attempt refunded (a result already being written is written first).

    Serves every namespace unless --namespace (or LESSONBANK_NAMESPACE) is given.
    """
    from lessonbank.services.consolidation.triggers import TICK_S, Scheduler, describe

    namespace_given = ctx.obj.namespace is not None or "LESSONBANK_NAMESPACE" in os.environ
    with ctx.obj.bank(patient=True) as bank:
        if bank.reflection_llm is None:
            fail("no LLM configured: set LESSONBANK_LLM or pass --llm")
        bank.settings = bank.settings.with_overrides(worker_concurrency=concurrency)
        served = [bank.namespace] if namespace_given else None
        runner = bank.new_worker(served)
        scheduler = Scheduler(bank.services.cycles, namespaces=served)

        async def run() -> None:
            loop, stop = asyncio.get_running_loop(), asyncio.Event()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, runner.stop)
            # The triggers are looked at before the first lease, so --until-idle runs what they ask for.
            await asyncio.to_thread(scheduler.tick)
            ticking = asyncio.create_task(scheduler.run(stop, wake=runner.wake, every_s=TICK_S))
            try:
                await runner.run(until_idle=until_idle)
            finally:
                stop.set()
                await ticking

        err.print(
            f"worker {runner.owner} serving {'namespace ' + bank.namespace if namespace_given else 'all namespaces'}"
        )
        err.print(describe(bank.settings))
        asyncio.run(run())
        handed_back = f"; {runner.released} unfinished job(s) handed back" if runner.released else ""
        err.print(f"worker stopped after {runner.processed} job(s){handed_back}")


def purge(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would go; delete nothing")] = False,
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than",
            help="Days: purge every kind older than this (default: each kind's LESSONBANK_*_RETENTION_DAYS)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Delete episodes, reflections and done jobs past retention, in this namespace.

    Episodes a job that is not done still needs are kept; lessons are never deleted (they keep their
    text). Retention is off unless LESSONBANK_EPISODE_RETENTION_DAYS, LESSONBANK_REFLECTION_RETENTION_DAYS
    or LESSONBANK_DONE_JOB_RETENTION_DAYS is set, or --older-than is given. ``jobs purge`` still removes
    done (and --dead) jobs whatever their age.
    """
    with ctx.obj.bank() as bank:
        settings = bank.settings
        configured = (
            settings.episode_retention_days,
            settings.reflection_retention_days,
            settings.done_job_retention_days,
        )
        if older_than is None and not any(configured):
            if as_json:
                emit_json({"episodes": 0, "reflections": 0, "jobs": 0, "dry_run": dry_run})
            else:
                out.print(
                    "nothing to purge: no retention is set; set LESSONBANK_EPISODE_RETENTION_DAYS, "
                    "LESSONBANK_REFLECTION_RETENTION_DAYS or LESSONBANK_DONE_JOB_RETENTION_DAYS, "
                    "or pass --older-than DAYS"
                )
            return
        counts = bank.services.retention.apply(older_than_days=older_than, dry_run=dry_run)
        if as_json:
            emit_json({**counts, "dry_run": dry_run})
            return
        verb = "would purge" if dry_run else "purged"
        out.print(
            f"{verb} {counts['episodes']} episode(s), {counts['reflections']} reflection(s), "
            f"{counts['jobs']} done job(s) in namespace {bank.namespace}"
        )
