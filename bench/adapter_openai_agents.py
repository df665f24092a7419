"""OpenAI Agents SDK adapter overhead: what ``lesson_instructions`` + ``LessonBankHooks`` add to a run.

For each size (default 1k and 100k lessons from ``_corpus.py``, one ``import_lessons`` call into a fresh
SQLite bank), one agent answers distinct corpus tasks through the real ``Runner.run``, its model an
``OpenAIChatCompletionsModel`` over a local chat-completions server (``_chat_server.py``: a tool call,
then the answer, so two model requests and one tool call per run; tracing off):

- **plain**: static instructions, no hooks;
- **adapter**: ``lesson_instructions(bank, ...)`` and ``hooks.run(...)``: the context block for the task
  in the system message, one episode recorded per run (the bank has no LLM and runs no worker, so the
  reflection job is written and left queued, as ``record()`` leaves it for a worker). Two variants:
  ``default`` (the long-term memory section) and ``rules`` (``agent_rules=True``: the running agent's
  learned rules are looked up too, as a second section).

The plain run and the adapter runs alternate task by task, so a change in the machine's load hits both. Timed: each whole run
(start to result), and in the adapter runs the adapter's own work, the two bank calls it makes (the
context build for the injection, ``record``), through a bank wrapper that times them.

    .venv/bin/python bench/adapter_openai_agents.py
    .venv/bin/python bench/adapter_openai_agents.py --sizes 1000 --runs 100 --bank sync
    .venv/bin/python bench/adapter_openai_agents.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

import _chat_server
import _corpus
from core import corpus_bank, machine_info, percentile, summarize_s
from lessonbank import AsyncLessonBank, LessonBank
from lessonbank.integrations.openai_agents import LessonBankHooks, lesson_instructions

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "adapter_openai_agents.json"
SEED = 7
INSTRUCTIONS = "You solve programming tasks. Check your answer before you give it."
# The adapter as it comes (the long-term memory section), and with agent_rules=True (the running agent's
# learned rules as a second section: looked up on every run, given half the budget).
VARIANTS: dict[str, dict[str, Any]] = {"default": {}, "rules": {"agent_rules": True}}


@function_tool
def run_tests(name: str) -> str:
    """Run the tests of a function."""
    return f"3 of 3 tests of {name} pass"


class TimedBank:
    """The bank's two calls the adapter makes (context, record), each timed; the rest is not used."""

    def __init__(self, bank: Any) -> None:
        self.bank = bank
        self.context_s: list[float] = []
        self.record_s: list[float] = []
        self.injected: list[int] = []

    async def context(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        block = self.bank.context(*args, **kwargs)
        block = await block if inspect.isawaitable(block) else block
        self.context_s.append(time.perf_counter() - started)
        self.injected.append(len(block.lesson_ids))
        return block

    async def record(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        episode = self.bank.record(*args, **kwargs)
        episode = await episode if inspect.isawaitable(episode) else episode
        self.record_s.append(time.perf_counter() - started)
        return episode


async def bench_size(db: str, url: str, tasks: list[str], warmup: int, flavour: str) -> list[dict[str, Any]]:
    """One row per variant; the plain run and each variant's run alternate, task by task."""
    bank: Any = AsyncLessonBank(db, worker=False) if flavour == "async" else LessonBank(db, worker=False)
    timed = {name: TimedBank(bank) for name in VARIANTS}
    plain_s: list[float] = []
    adapter_s: dict[str, list[float]] = {name: [] for name in VARIANTS}
    async with AsyncOpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0) as client:
        model = OpenAIChatCompletionsModel(model="local-model", openai_client=client)
        plain = Agent(name="solver", instructions=INSTRUCTIONS, tools=[run_tests], model=model)
        adapted = {
            name: (
                plain.clone(instructions=lesson_instructions(timed[name], INSTRUCTIONS, **options)),  # type: ignore[arg-type]
                LessonBankHooks(timed[name]),  # type: ignore[arg-type]
            )
            for name, options in VARIANTS.items()
        }
        for n, task in enumerate(tasks):
            started = time.perf_counter()
            await Runner.run(plain, task)
            if n >= warmup:  # the first ones load the lexical index and warm the connections
                plain_s.append(time.perf_counter() - started)
            for name, (agent, hooks) in adapted.items():
                started = time.perf_counter()
                await hooks.run(agent, task)
                if n >= warmup:
                    adapter_s[name].append(time.perf_counter() - started)
    close = bank.close()
    if inspect.isawaitable(close):
        await close
    rows = []
    for name, options in VARIANTS.items():
        context_s, record_s = timed[name].context_s[warmup:], timed[name].record_s[warmup:]
        own = [c + r for c, r in zip(context_s, record_s, strict=True)]
        injected = timed[name].injected[warmup:]
        rows.append(
            {
                "variant": name,
                "context_options": options,
                "bank": flavour,
                "runs": len(adapter_s[name]),
                "plain_run": summarize_s(plain_s),
                "adapter_run": summarize_s(adapter_s[name]),
                "overhead_p50_ms": round(
                    (percentile(adapter_s[name], 0.5) - percentile(plain_s, 0.5)) * 1000, 2
                ),
                "injection": summarize_s(context_s),
                "recording": summarize_s(record_s),
                "adapter_own": summarize_s(own),
                "lessons_injected_mean": round(sum(injected) / len(injected), 2),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000", help="lesson counts (default 1000,100000)")
    parser.add_argument("--runs", type=int, default=200, help="timed runs of each kind per size")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs of each kind first")
    parser.add_argument(
        "--bank", choices=("async", "sync"), default="async", help="AsyncLessonBank or LessonBank"
    )
    parser.add_argument("--quick", action="store_true", help="1k lessons, 30 runs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    sizes = [1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    runs = 30 if args.quick else args.runs
    set_tracing_disabled(True)  # traces would go to api.openai.com
    machine = machine_info()
    source = _corpus.load_source(SEED)
    tasks = _corpus.make_queries(source, args.warmup + runs, SEED)
    script = _chat_server.ChatScript([("run_tests", {"name": "solution"})], answer="def solution(): ...")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lb-oa-") as tmp, _chat_server.serving(script) as url:
        for size in sizes:
            db, import_s = corpus_bank(Path(tmp), size, source, SEED)
            print(f"{size} lessons imported in {import_s:.1f} s", file=sys.stderr)
            for row in asyncio.run(bench_size(db, url, tasks, args.warmup, args.bank)):
                rows.append({"lessons": size, "import_s": round(import_s, 1), **row})

    print(
        f"{'lessons':>8} {'variant':>10} {'bank':>5} {'runs':>5} {'plain p50/p99':>15} {'adapter p50/p99':>17} "
        f"{'inject p50/p99':>16} {'record p50/p99':>16} {'own p50/p99':>15} {'injected':>8}"
    )
    for row in rows:

        def pair(key: str, row: dict[str, Any] = row) -> str:
            return f"{row[key]['p50_ms']}/{row[key]['p99_ms']}"

        print(
            f"{row['lessons']:>8} {row['variant']:>10} {row['bank']:>5} {row['runs']:>5} {pair('plain_run'):>15} "
            f"{pair('adapter_run'):>17} {pair('injection'):>16} {pair('recording'):>16} "
            f"{pair('adapter_own'):>15} {row['lessons_injected_mean']:>8}"
        )
    print("times in ms; own = injection + recording, the adapter's bank calls in one run", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"when": datetime.now(UTC).isoformat(), "machine": machine, "quick": args.quick, "rows": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
