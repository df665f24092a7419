"""``lessonbank loop run|export`` and ``lessonbank analytics``: thin shells over lessonbank.loop."""

from __future__ import annotations

import importlib
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from lessonbank.cli.common import emit_json, err, out
from lessonbank.errors import ConfigError, InputError
from lessonbank.loop.analytics import analyze, plot_rewards
from lessonbank.loop.evaluators import CommandEvaluator
from lessonbank.loop.records import export_aiwg
from lessonbank.loop.runner import Actor, ReflexionLoop

loop_app = typer.Typer(
    help="Run Reflexion loops (actor → checks → reflect → retry) and export their records."
)


class _Format(StrEnum):
    aiwg = "aiwg"


def load_actor(spec: str) -> Actor:
    """``module:function`` → the callable (the current directory is importable)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InputError(f"--actor {spec!r} must look like module:function, e.g. my_agent:act", field="actor")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r} for --actor: {exc}") from exc
    actor = getattr(module, attr, None)
    if not callable(actor):
        raise ConfigError(f"{module_name} has no callable {attr!r} for --actor")
    return actor  # type: ignore[no-any-return]


def _omega(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.isdigit() else value


@loop_app.command("run")
def run(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="What the loop must achieve")],
    actor: Annotated[str, typer.Option("--actor", help="module:function called as actor(task, memory)")],
    check: Annotated[list[str], typer.Option("--check", help="A verification command; repeat for several")],
    cwd: Annotated[Path, typer.Option("--cwd", help="Directory the checks run in")] = Path("."),
    omega: Annotated[
        str | None,
        typer.Option("--omega", help="Ω: 1..10, 'auto' or a preset name (default: the checks' preset)"),
    ] = None,
    max_iterations: Annotated[int, typer.Option("--max-iterations", help="Attempts before aborting")] = 5,
    task_type: Annotated[str | None, typer.Option("--task-type", help="Task type, e.g. code")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds each check may run")] = 300.0,
    records_dir: Annotated[
        Path | None,
        typer.Option(
            "--records-dir",
            help="Also write each record as the loop runs to DIR/<loop-id>/001.json …, e.g. .aiwg/ralph/reflections",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON")] = False,
) -> None:
    """Run one Reflexion loop from the shell."""
    bank = ctx.obj.bank()
    try:
        evaluator = CommandEvaluator(check, cwd=cwd, timeout_s=timeout)
        loop = ReflexionLoop(
            bank,
            actor=load_actor(actor),
            evaluator=evaluator,
            omega=_omega(omega),
            max_iterations=max_iterations,
            records_dir=records_dir,
        )
        result = loop.run(task, task_type=task_type)
    finally:
        bank.close()
    if as_json:
        emit_json(
            {
                "loop_id": result.loop_id,
                "passed": result.passed,
                "status": result.status,
                "iterations": result.iterations,
                "rewards": result.rewards,
                "reflections": result.reflections,
                "tokens": result.tokens_in + result.tokens_out,
                "cost_usd": result.cost_usd,
            }
        )
    else:
        out.print(
            f"{result.loop_id}: {result.status} after {result.iterations} iteration(s); "
            f"rewards {', '.join(f'{r:.2f}' for r in result.rewards)}"
        )
    if not result.passed:
        raise typer.Exit(1)


@loop_app.command("export")
def export(
    ctx: typer.Context,
    loop_id: Annotated[str, typer.Argument(help="The loop id (ralph-…)")],
    directory: Annotated[Path, typer.Argument(help="Where DIR/<loop-id>/001.json … are written")],
    format: Annotated[_Format, typer.Option("--format", help="Record format")] = _Format.aiwg,
) -> None:
    """Write a loop's iteration records, one JSON file per iteration."""
    bank = ctx.obj.bank()
    try:
        paths = export_aiwg(bank, loop_id, directory)
    finally:
        bank.close()
    out.print(f"wrote {len(paths)} record(s) to {directory / loop_id}")


def analytics(
    ctx: typer.Context,
    plot: Annotated[Path | None, typer.Option("--plot", help="PNG of the reward curves")] = Path(
        "reward_curves.png"
    ),
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Do not write the PNG")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON")] = False,
) -> None:
    """How loops learn: success rate, iterations, learning rate, failure categories, lesson reuse."""
    bank = ctx.obj.bank()
    try:
        report = analyze(bank)
    finally:
        bank.close()
    if not report.loops:
        if as_json:
            emit_json({**report.as_dict(), "plot": None})
        else:
            out.print("no loops recorded in this namespace yet; run `lessonbank loop run` first")
        return
    written = None
    if plot is not None and not no_plot:
        try:
            written = plot_rewards(report, plot)
        except ConfigError as exc:
            err.print(f"warning: {exc}")
    if as_json:
        data: dict[str, Any] = report.as_dict()
        data["plot"] = str(written) if written else None
        emit_json(data)
        return
    table = Table("loop", "status", "iters", "rewards", "learning rate", "failure categories", "lessons")
    for loop in report.loops:
        table.add_row(
            loop.loop_id,
            loop.status,
            str(loop.iterations),
            " ".join(f"{r:.2f}" for r in loop.rewards),
            f"{loop.learning_rate:+.3f}",
            ", ".join(loop.failure_categories) or "-",
            str(loop.lessons_written),
        )
    out.print(table)
    out.print(
        f"loops {len(report.loops)} · success rate {report.success_rate:.0%} · avg iterations "
        f"{report.avg_iterations:.2f} · avg learning rate {report.avg_learning_rate:+.3f} · lesson reuse rate "
        f"{report.lesson_reuse_rate:.0%} ({report.lessons_reused}/{report.lessons_written})"
    )
    if report.failure_categories:
        out.print(
            "failure categories: " + ", ".join(f"{k} {v}" for k, v in report.failure_categories.items())
        )
    if written:
        out.print(f"reward curves: {written}")
