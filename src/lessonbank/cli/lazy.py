"""A command group that imports a command's module only when that command runs or shows its help.

The group holds a table of :class:`LazyCommand` (name, ``module:attribute``, one-line help). Listing
the commands (``lessonbank --help``) reads the table alone, so it imports none of the bank, stores,
retrieval or servers; resolving a command to run it (or to show its own ``--help``) imports its module
and builds the real command from the function or Typer sub-app there, exactly as an eager
``app.command(name)(function)`` / ``app.add_typer(sub_app, name=name)`` would.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo, TyperInfo


@dataclass(frozen=True)
class LazyCommand:
    """One row of the command table: ``target`` is ``"package.module:attribute"``, a command function
    or a :class:`typer.Typer` sub-app (a group); ``help`` is the first paragraph of its help text, as
    the group's listing shows it (a test keeps it equal to the implementation's)."""

    name: str
    target: str
    help: str

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


class LazyGroup(TyperGroup):
    """A :class:`~typer.core.TyperGroup` whose commands come from :attr:`table` and load on first use."""

    table: ClassVar[tuple[LazyCommand, ...]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._pending = {entry.name: entry for entry in self.table if entry.name not in self.commands}
        self._listing = False
        for entry in self._pending.values():
            # a placeholder with the listing's help, so listings and "did you mean" need no import
            self.commands[entry.name] = TyperCommand(name=entry.name, help=entry.help)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = self._pending.get(cmd_name)
        if entry is None or self._listing:
            return self.commands.get(cmd_name)
        command = self._build(entry)
        self.commands[cmd_name] = command
        del self._pending[cmd_name]
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def _build(self, entry: LazyCommand) -> Any:
        target = entry.load()
        if isinstance(target, typer.Typer):
            return typer.main.get_group_from_info(
                TyperInfo(target, name=entry.name),
                pretty_exceptions_short=True,
                suggest_commands=self.suggest_commands,
                rich_markup_mode=self.rich_markup_mode,
            )
        return typer.main.get_command_from_info(
            CommandInfo(name=entry.name, callback=target),
            pretty_exceptions_short=True,
            rich_markup_mode=self.rich_markup_mode,
        )
