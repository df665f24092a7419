"""The ``lessonbank`` command: a thin shell over LessonBank that translates its errors.

Every command takes the global ``--db URL``, ``--namespace NAME`` and ``--llm PROVIDER:MODEL``
(env ``LESSONBANK_DB``, ``LESSONBANK_NAMESPACE``, ``LESSONBANK_LLM``). Machine-readable output
with ``--json``; errors go to stderr with exit code 1 (2 for bad input).

One module per command group, each a set of plain functions that register nothing on import;
:mod:`lessonbank.cli.app` registers them all in one place:

- ``app``: the Typer app, global options, the command table, ``main`` and error translation
- ``lazy``: the group that imports a command's module only when that command runs or shows its help
- ``common``: the options object, consoles, JSON output and input helpers every group uses
- ``lessons``: add, lessons, show, forget, rescreen, import, export, stats
- ``retrieval``: recall, context, embed
- ``episodes``: record, reflect
- ``jobs``: jobs, worker
- ``learned``: goal finish, insights, rules, replay
- ``loop``: loop run, loop export, analytics
- ``lifecycle``: archive, restore, audit
- ``consolidation``: consolidate, proposals (list, show, revert), approve, reject, dreams
"""

from lessonbank.cli.app import app, hoist_global_options, main

__all__ = ["app", "hoist_global_options", "main"]
