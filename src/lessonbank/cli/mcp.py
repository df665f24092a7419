"""``lessonbank mcp``: the MCP server over stdio, for an agent on this machine (Claude Code, Cursor,
any MCP client that starts a command). It runs as the local user: no API key, the bank of the usual
settings (--db, --namespace, LESSONBANK_*). Reflections run on a background thread while it serves.
"""

from __future__ import annotations

import typer

from lessonbank.cli.common import Options, fail, require_mcp_sdk
from lessonbank.settings import Settings


def mcp(ctx: typer.Context) -> None:
    """Serve the bank to an MCP client over stdio; logs go to stderr.

    Runs as the local user (no API key) on the bank of --db, --namespace and LESSONBANK_*.

    In Claude Code: claude mcp add lessonbank -- lessonbank mcp
    """
    require_mcp_sdk("mcp")
    try:
        from lessonbank.server.auth import ALL, Principal
        from lessonbank.server.banks import Banks
        from lessonbank.server.mcp_tools import Access, build_server
    except ImportError as exc:  # the mcp SDK comes with the server extra
        fail(f"lessonbank mcp needs the MCP SDK ({exc.name} is missing): pip install 'lessonbank[server]'")
    options: Options = ctx.obj
    settings = Settings.from_env(
        db=options.db, namespace=options.namespace, llm=options.llm, embedder=options.embedder
    )
    banks = Banks(settings)
    # The local user owns the bank, as with every other `lessonbank` command: any namespace, any role.
    local = Principal(name="local", role="admin", namespaces=(ALL,))
    server = build_server(Access(banks, settings.namespace, lambda request: local))
    try:
        server.run("stdio")
    finally:
        banks.close()
