"""MCP ``get_context`` round trip, through the official SDK's client, over both transports.

A fresh SQLite bank is seeded with ``--lessons`` lessons (1,000) from the shared corpus. Then, for
each transport, one client session makes ``--calls`` (500) sequential ``get_context`` calls with
distinct tasks (budget 800 tokens), after 20 warm-up calls:

- **stdio**: ``lessonbank mcp`` as a subprocess (what Claude Code starts);
- **http**: ``lessonbank serve --no-worker`` as a subprocess, Streamable HTTP at ``/mcp`` (no API
  key: loopback only).

A round trip is the client's whole call: JSON-RPC over the transport, the key check (HTTP), the
tool's recall and rendering, the structured result back and validated against the output schema.
Prints a table and writes ``bench/results/mcp.json``. The machine's cores are shared by the server
and the client.

    .venv/bin/python bench/mcp_roundtrip.py
    .venv/bin/python bench/mcp_roundtrip.py --calls 200 --lessons 10000
"""

from __future__ import annotations

# ruff: noqa: E402  (the imports follow the sys.path fix below)
import sys
from pathlib import Path

# Run as a script, this file's folder comes first on the path, ahead of the installed packages: it goes
# last, so no module here can hide one of them. (This file is not bench/mcp.py for that reason: tests put
# bench/ on the path, and a bench/mcp.py would hide the MCP SDK from them.)
_HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [entry for entry in sys.path if entry not in (_HERE, "")] + [_HERE]

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

import _corpus
from _serve import environment, serving
from lessonbank import LessonBank

RESULTS = Path(__file__).resolve().parent / "results"
WARM_UP = 20


@asynccontextmanager
async def stdio_session(db: str, home: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lessonbank.cli", "--db", db, "mcp"], env=environment(home)
    )
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def round_trips(session: ClientSession, tasks: list[str], calls: int) -> dict[str, Any]:
    for task in tasks[:WARM_UP]:
        await session.call_tool("get_context", {"task": task})
    seconds: list[float] = []
    injected = 0
    for index in range(calls):
        task = tasks[(WARM_UP + index) % len(tasks)]
        started = time.perf_counter()
        result = await session.call_tool("get_context", {"task": task, "budget_tokens": 800})
        seconds.append(time.perf_counter() - started)
        if result.is_error or result.structured_content is None:
            raise RuntimeError(f"get_context failed: {result.content}")
        injected += len(result.structured_content["lesson_ids"])
    ms = sorted(s * 1000 for s in seconds)
    return {
        "calls": calls,
        "p50_ms": round(ms[len(ms) // 2], 2),
        "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "max_ms": round(ms[-1], 2),
        "lessons_per_context": round(injected / calls, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=500, help="get_context calls measured per transport")
    parser.add_argument("--lessons", type=int, default=1_000, help="lessons in the bank")
    args = parser.parse_args()

    source = _corpus.load_source(13)
    lessons = _corpus.make_lessons(source, args.lessons, 13)
    tasks = _corpus.make_queries(source, args.calls + WARM_UP, 13)
    with tempfile.TemporaryDirectory(prefix="lb-bench-mcp-") as folder:
        workdir = Path(folder)
        db, home = f"sqlite:///{workdir / 'bank.db'}", workdir / "home"
        os.environ["LESSONBANK_HOME"] = str(home)
        with LessonBank(db, worker=False) as bank:
            for start in range(0, len(lessons), 10_000):
                bank.import_lessons(lessons[start : start + 10_000])

        async def stdio() -> dict[str, Any]:
            async with stdio_session(db, home) as session:
                return await round_trips(session, tasks, args.calls)

        async def http(url: str) -> dict[str, Any]:
            async with http_session(url) as session:
                return await round_trips(session, tasks, args.calls)

        rows = {"stdio": anyio.run(stdio)}
        with serving(db, home) as base:
            url = f"{base}/mcp"
            rows["http"] = anyio.run(http, url)

    print(f"get_context round trip, {args.lessons:,} lessons, SQLite, {args.calls} calls each\n")
    print(f"{'transport':<10} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'max ms':>8} {'lessons/ctx':>12}")
    for name, row in rows.items():
        print(
            f"{name:<10} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['mean_ms']:>8.2f} "
            f"{row['max_ms']:>8.2f} {row['lessons_per_context']:>12.2f}"
        )
    RESULTS.mkdir(exist_ok=True)
    report = {
        "benchmark": "mcp get_context round trip",
        "lessons": args.lessons,
        "store": "sqlite",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "transports": rows,
    }
    (RESULTS / "mcp.json").write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    print(f"\nwritten to {RESULTS / 'mcp.json'}")


if __name__ == "__main__":
    main()
