"""Start-up stays light: ``import lessonbank`` and ``lessonbank --help`` load no provider SDK, NumPy,
model runtime, server or database driver, and the lazily registered commands are the same commands,
with the same help, as registering each one eagerly gives.

Structural checks (which modules a fresh interpreter imports), never timings: the times are in
``bench/startup.py``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from lessonbank.cli import app
from lessonbank.cli.app import COMMANDS, GROUPS, main_options

# Loaded only by the commands that need them (recall with an embedder, serve, mcp, a Redis or
# PostgreSQL store, a hosted LLM).
HEAVY = ("openai", "anthropic", "numpy", "onnxruntime", "fastapi", "mcp", "uvicorn", "redis", "psycopg")

# Every command and group of `lessonbank --help`, in its order.
LISTED = [
    "add",
    "recall",
    "context",
    "record",
    "reflect",
    "lessons",
    "show",
    "forget",
    "archive",
    "restore",
    "edit",
    "audit",
    "rescreen",
    "consolidate",
    "approve",
    "reject",
    "dreams",
    "core",
    "import",
    "export",
    "jobs",
    "purge",
    "embed",
    "expand",
    "stats",
    "worker",
    "insights",
    "rules",
    "replay",
    "analytics",
    "mcp",
    "serve",
    "goal",
    "loop",
    "proposals",
    "keys",
    "claude",
    "hooks",
]


def imported_by(*args: str) -> set[str]:
    """The top-level packages a fresh ``python -X importtime ARGS`` imports (its import log)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "lessonbank" in names, done.stderr[-2000:]
    return names


@pytest.mark.parametrize(
    "args",
    [("-c", "import lessonbank"), ("-m", "lessonbank.cli", "--help")],
    ids=["import lessonbank", "lessonbank --help"],
)
def test_start_up_imports_nothing_heavy(args: tuple[str, ...]) -> None:
    assert sorted(imported_by(*args) & set(HEAVY)) == []


def test_a_command_imports_only_what_it_uses() -> None:
    # recall --help builds the recall command (its module and the bank's types), not the servers or SDKs
    assert sorted(imported_by("-m", "lessonbank.cli", "recall", "--help") & set(HEAVY)) == []


def test_the_package_names_still_resolve() -> None:
    import lessonbank

    for name in lessonbank.__all__:
        assert getattr(lessonbank, name) is not None
    assert set(lessonbank.__all__) <= set(dir(lessonbank))


def eager_app() -> typer.Typer:
    """The ``lessonbank`` app with every command imported and registered up front."""
    eager = typer.Typer(
        help=app.info.help, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False
    )
    eager.callback()(main_options)
    for entry in COMMANDS:
        eager.command(entry.name)(entry.load())
    for entry in GROUPS:
        eager.add_typer(entry.load(), name=entry.name)
    return eager


def help_of(target: typer.Typer, *args: str) -> str:
    result = CliRunner().invoke(target, [*args, "--help"], prog_name="lessonbank", terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_listed_with_the_help_of_its_implementation() -> None:
    assert [entry.name for entry in COMMANDS + GROUPS] == LISTED
    listing = help_of(app)
    assert listing == help_of(eager_app())
    for name in LISTED:
        assert f"│ {name} " in listing


@pytest.mark.parametrize("name", LISTED)
def test_a_commands_own_help_is_unchanged(name: str) -> None:
    assert help_of(app, name) == help_of(eager_app(), name)


def test_a_mistyped_command_still_gets_a_suggestion() -> None:
    result = CliRunner().invoke(app, ["recal"], prog_name="lessonbank")
    assert result.exit_code == 2
    assert "Did you mean 'recall'?" in result.output


def test_every_operations_cli_command_is_registered() -> None:
    from lessonbank.operations import OPERATIONS

    named = {op.name: op.cli for op in OPERATIONS.values() if op.cli}
    assert named, "the operation table names no CLI command"
    runner = CliRunner()
    for name, command in named.items():
        result = runner.invoke(app, [*command.split(), "--help"], prog_name="lessonbank")
        assert result.exit_code == 0, (name, command, result.output)
        assert f"Usage: lessonbank {command} " in result.output, (name, command, result.output)
