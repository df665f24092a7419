"""Reference pages generated from the code at build time, so they cannot drift from it.

mkdocs loads this file as a hook (``hooks:`` in mkdocs.yml) and adds three pages that exist only in
the built site, never in the repository:

- ``reference/cli.md``: every command and group of the ``lessonbank`` Typer app, with its help,
  arguments and options, read from the click command tree;
- ``reference/rest.md``: every route of the REST API from the FastAPI app's OpenAPI document, then
  the document itself;
- ``reference/mcp.md``: every MCP tool the server lists, with its role (from
  ``lessonbank.operations.OPERATIONS``), annotations and input schema.

Building them opens no bank: the server's app and the MCP server are created over a temporary
``LESSONBANK_HOME`` and never started.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

GENERATED = ("reference/cli.md", "reference/rest.md", "reference/mcp.md")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    with tempfile.TemporaryDirectory() as home:
        previous = os.environ.get("LESSONBANK_HOME")
        os.environ["LESSONBANK_HOME"] = home
        try:
            pages = {
                "reference/cli.md": cli_reference(),
                "reference/rest.md": rest_reference(),
                "reference/mcp.md": mcp_reference(),
            }
        finally:
            if previous is None:
                os.environ.pop("LESSONBANK_HOME", None)
            else:
                os.environ["LESSONBANK_HOME"] = previous
    for uri, content in pages.items():
        files.append(File.generated(config, uri, content=content))
    return files


def _cell(text: str) -> str:
    """Prose for a Markdown table cell: one line, no column break, no raw HTML."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def _code(value: Any) -> str:
    """A JSON value as a code span in a table cell."""
    return "`" + json.dumps(value, sort_keys=True, ensure_ascii=False).replace("|", "\\|") + "`"


# ------------------------------------------------------------------------------------------------ CLI


def _walk(command: Any, ctx: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command under ``command`` (depth first, in the order ``--help`` lists them)."""
    yield path, command
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
                yield from _walk(sub, sub_ctx, (*path, name))


def cli_reference() -> str:
    import typer.core
    from typer.main import get_command
    from typer.testing import CliRunner

    from lessonbank.cli.app import build_app

    app = build_app()
    root = get_command(app)
    root_ctx = root.make_context("lessonbank", [], resilient_parsing=True)
    lines = [
        "# CLI reference",
        "",
        "Generated from the `lessonbank` command tree when this site is built: each command's `--help`.",
        "The global options (`--db`, `--namespace`, `--llm`, `--embedder`) go before the command; `--db`,",
        "`--namespace` and `--llm` are also read after it.",
        "",
    ]
    # Plain click-style help (no rich panels), so the text reads the same in a code block.
    rich, typer.core.HAS_RICH = typer.core.HAS_RICH, False
    try:
        runner = CliRunner()
        for path, _command in _walk(root, root_ctx, ()):
            shown = " ".join(("lessonbank", *path))
            done = runner.invoke(app, [*path, "--help"], prog_name="lessonbank", terminal_width=100)
            if done.exit_code != 0:
                raise RuntimeError(f"{shown} --help failed: {done.output}")
            level = "#" * min(len(path) + 2, 4)
            lines += [f"{level} `{shown}`", "", "```text", done.output.rstrip(), "```", ""]
    finally:
        typer.core.HAS_RICH = rich
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- REST


def rest_reference() -> str:
    from lessonbank.server.app import create_app
    from lessonbank.settings import Settings

    app = create_app(Settings.from_env())
    spec = app.openapi()
    lines = [
        "# REST API reference",
        "",
        "Generated from the OpenAPI document of `lessonbank serve` (`lessonbank.server.app.create_app`) when",
        "this site is built; a running server serves the same document at `/openapi.json` and an",
        "interactive page at `/docs`. Every route is under `/api/v1`; the role is the operation's",
        '(see [Serving](../how-to/serve.md)). Errors are JSON `{"error": {"code", "message", "field"}}`.',
        "",
        "| method | path | summary |",
        "|---|---|---|",
    ]
    for path, methods in spec["paths"].items():
        for method, route in methods.items():
            lines.append(f"| {method.upper()} | `{path}` | {_cell(route.get('summary', ''))} |")
    lines += ["", "## Operations and roles", "", *operations_table(), "", "## Routes", ""]
    for path, methods in spec["paths"].items():
        for method, route in methods.items():
            lines += [f"### {method.upper()} `{path}`", ""]
            if route.get("description"):
                lines += [route["description"].strip(), ""]
            params = route.get("parameters", [])
            if params:
                lines += ["| parameter | in | required | schema |", "|---|---|---|---|"]
                for param in params:
                    required = "yes" if param.get("required") else ""
                    schema = _code(param.get("schema", {}))
                    lines.append(f"| `{param['name']}` | {param['in']} | {required} | {schema} |")
                lines.append("")
            body = route.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                lines += [f"Body: {_code(body)}", ""]
    lines += [
        "## OpenAPI document",
        "",
        "```json",
        json.dumps(spec, indent=2, sort_keys=True),
        "```",
        "",
    ]
    return "\n".join(lines)


def operations_table() -> list[str]:
    """Every operation of ``lessonbank.operations.OPERATIONS``: the role it needs and where it is exposed."""
    from lessonbank.operations import OPERATIONS

    lines = [
        "Every operation of the table in `lessonbank.operations`, the role it needs (`read` < `write` < `admin`)",
        "and where it is reachable. Some have no route of their own: they are what another call becomes for",
        "some inputs (restoring a quarantined lesson is its approval; adding a lesson pinned; importing counters).",
        "",
        "| operation | role | REST | MCP tool | CLI | summary |",
        "|---|---|---|---|---|---|",
    ]
    for op in OPERATIONS.values():
        rest = f"{op.rest[0]} `/api/v1{op.rest[1]}`" if op.rest else ""
        mcp = f"`{op.mcp}`" if op.mcp else ""
        cli = f"`lessonbank {op.cli}`" if op.cli else ""
        lines.append(f"| `{op.name}` | {op.role} | {rest} | {mcp} | {cli} | {_cell(op.summary)} |")
    return lines


# ------------------------------------------------------------------------------------------------ MCP


def _mcp_tools() -> list[Any]:
    from lessonbank.server.banks import Banks
    from lessonbank.server.mcp_tools import Access, build_server
    from lessonbank.settings import Settings

    banks = Banks(Settings.from_env())
    try:
        server = build_server(Access(banks, "default", lambda request: None))
        tools: list[Any] = asyncio.run(server.list_tools())
        return tools
    finally:
        banks.close()


def mcp_reference() -> str:
    from lessonbank.operations import BY_MCP_TOOL

    tools = _mcp_tools()
    lines = [
        "# MCP tools reference",
        "",
        "Generated from the MCP server (`lessonbank.server.mcp_tools.build_server`) and the operation",
        "table (`lessonbank.operations.OPERATIONS`) when this site is built. The same tools are served over",
        "stdio (`lessonbank mcp`) and Streamable HTTP (`/mcp` of `lessonbank serve`); over HTTP each call",
        "needs the role shown, on the namespace it names. See [MCP clients](../how-to/mcp.md).",
        "",
        "| tool | title | role | read-only | operation |",
        "|---|---|---|---|---|",
    ]
    for tool in tools:
        operation = BY_MCP_TOOL[tool.name]
        read_only = "yes" if tool.annotations and tool.annotations.read_only_hint else "no"
        lines.append(
            f"| `{tool.name}` | {_cell(tool.title or '')} | {operation.role} | {read_only} | `{operation.name}` |"
        )
    lines.append("")
    for tool in tools:
        operation = BY_MCP_TOOL[tool.name]
        lines += [f"## `{tool.name}`", "", f"Role: **{operation.role}**. {_cell(tool.title or '')}.", ""]
        if tool.description:
            lines += [" ".join(tool.description.split()), ""]
        schema = tool.input_schema
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        if properties:
            lines += ["| argument | required | schema | description |", "|---|---|---|---|"]
            for name, prop in properties.items():
                shown = {k: v for k, v in prop.items() if k not in ("title", "description")}
                lines.append(
                    f"| `{name}` | {'yes' if name in required else ''} | "
                    f"{_code(shown)} | {_cell(prop.get('description', ''))} |"
                )
            lines.append("")
        lines += [
            '??? note "Input schema"',
            "",
            "    ```json",
            *("    " + line for line in json.dumps(schema, indent=2, sort_keys=True).splitlines()),
            "    ```",
            "",
        ]
    return "\n".join(lines)


if __name__ == "__main__":  # print one page: python docs/hooks.py cli|rest|mcp
    import sys

    print({"cli": cli_reference, "rest": rest_reference, "mcp": mcp_reference}[sys.argv[1]]())
