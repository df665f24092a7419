"""``lessonbank claude``: wire lessonbank into Claude Code (hooks and MCP server), or write a plugin.

The hooks run ``lessonbank hooks claude`` by the absolute path of the ``lessonbank`` in use (the
one beside this interpreter), so they work whatever PATH Claude Code has; the global ``--db`` and
``--namespace`` given to ``claude install`` are written into them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from lessonbank.cli.common import fail, out

if TYPE_CHECKING:
    from lessonbank.integrations.claude.install import Wiring

claude_app = typer.Typer(
    help="Wire lessonbank into Claude Code: install, uninstall (hooks and MCP server), plugin DIR.",
    no_args_is_help=True,
)

ProjectOption = Annotated[
    bool, typer.Option("--project", help="This folder: .claude/settings.json and .mcp.json (the default)")
]
UserOption = Annotated[
    bool, typer.Option("--user", help="Every project: ~/.claude/settings.json and ~/.claude.json")
]
UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="A `lessonbank serve` to use instead of a local command: http hooks to its hook route, "
        "MCP at its /mcp (e.g. http://127.0.0.1:8765)",
    ),
]
KeyEnvOption = Annotated[
    str,
    typer.Option(
        "--key-env",
        help="With --url: the environment variable holding the API key Claude Code sends "
        "(Authorization: Bearer); the key itself is never written",
    ),
]


def _scope(project: bool, user: bool) -> Literal["project", "user"]:
    if project and user:
        fail("give --project or --user, not both", 2)
    return "user" if user else "project"


def _wiring(ctx: typer.Context, url: str | None, key_env: str) -> Wiring:
    from lessonbank.integrations.claude.install import Wiring

    options = ctx.obj
    if url is not None and not url.startswith(("http://", "https://")):
        fail(f"--url must start with http:// or https://, not {url!r}", 2)
    return Wiring(
        namespace=options.namespace if options else None,
        db=None if url or not options else options.db,
        url=url,
        key_env=key_env,
    )


@claude_app.command("install")
def install(
    ctx: typer.Context,
    project: ProjectOption = False,
    user: UserOption = False,
    url: UrlOption = None,
    key_env: KeyEnvOption = "LESSONBANK_API_KEY",
) -> None:
    """Merge lessonbank's hooks (SessionStart, UserPromptSubmit, PostToolUse, PostToolUseFailure,
    PreCompact, Stop, SessionEnd) and its MCP server into Claude Code's settings, leaving every other
    hook and key as it was; running it again changes nothing."""
    from lessonbank.integrations.claude.install import Target
    from lessonbank.integrations.claude.install import install as merge

    target = Target.of(_scope(project, user))
    wiring = _wiring(ctx, url, key_env)
    try:
        changed = merge(target, wiring)
    except ValueError as exc:
        fail(str(exc), 2)
    _report(changed, "installed in", [target.settings, target.mcp])
    out.print(f"hook: {wiring.hook().get('command') or wiring.hook().get('url')}")


@claude_app.command("uninstall")
def uninstall(ctx: typer.Context, project: ProjectOption = False, user: UserOption = False) -> None:
    """Remove what `lessonbank claude install` added (its hooks, its MCP server), and nothing else."""
    from lessonbank.integrations.claude.install import Target
    from lessonbank.integrations.claude.install import uninstall as remove

    target = Target.of(_scope(project, user))
    try:
        changed = remove(target)
    except ValueError as exc:
        fail(str(exc), 2)
    _report(changed, "removed from", [target.settings, target.mcp])


@claude_app.command("plugin")
def plugin(
    ctx: typer.Context,
    folder: Annotated[Path, typer.Argument(help="The plugin folder to write (created if missing)")],
    url: UrlOption = None,
    key_env: KeyEnvOption = "LESSONBANK_API_KEY",
) -> None:
    """Write lessonbank as a Claude Code plugin folder: .claude-plugin/plugin.json, hooks/hooks.json,
    .mcp.json and skills/lessonbank/SKILL.md (load it with `claude --plugin-dir DIR`)."""
    from importlib.metadata import PackageNotFoundError, version

    from lessonbank.integrations.claude.plugin import write_plugin

    try:
        number = version("lessonbank")
    except PackageNotFoundError:
        number = "0.0.0"
    for path in write_plugin(folder, _wiring(ctx, url, key_env), version=number):
        out.print(str(path))


def _report(changed: list[Path], verb: str, paths: list[Path]) -> None:
    if not changed:
        out.print(f"nothing to change in {', '.join(str(path) for path in paths)}")
    for path in changed:
        out.print(f"{verb} {path}")
