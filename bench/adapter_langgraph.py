"""What the LangGraph adapter adds to a graph run: ``context_node`` before the model node and
``record_node`` after it, on a SQLite bank.

For each size (default 1k and 100k lessons from ``_corpus.py``, one ``import_lessons`` call into a
fresh SQLite bank, no worker), the same distinct corpus tasks run through two compiled graphs:

- **bare**: START → model → END, the model a function returning at once (an output, and an error on
  every fourth run, so failures are recorded too);
- **adapter**: START → context → model → record → END, the same model between ``context_node`` and
  ``record_node``, compiled with ``store=LessonBankStore(bank)``.

Each ``invoke`` is timed whole; the two nodes alone are timed too (``nodes``: context + record called
directly on the same state). The adapter's overhead is adapter − bare, per percentile. The first
``--warmup`` runs of each are untimed (the first recall loads the lexical index).

    .venv/bin/python bench/adapter_langgraph.py
    .venv/bin/python bench/adapter_langgraph.py --sizes 1000 --runs 200 --out bench/results/adapter_langgraph-1k.json
    .venv/bin/python bench/adapter_langgraph.py --quick
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langgraph.graph import END, START, StateGraph

import _corpus
from core import corpus_bank, machine_info, summarize_s
from lessonbank import LessonBank
from lessonbank.integrations.langgraph import LessonBankStore, context_node, record_node

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "adapter_langgraph.json"
SEED = 7


class State(TypedDict, total=False):
    task: str
    run: int
    lessons: str
    lesson_ids: list[str]
    output: str
    error: str
    episode_id: str


def model(state: State) -> dict[str, Any]:
    if state.get("run", 0) % 4 == 3:
        return {"output": "gave up", "error": "the tests still fail"}
    return {"output": "done"}


def graphs(bank: LessonBank) -> tuple[Any, Any]:
    bare = StateGraph(State)
    bare.add_node("model", model)
    bare.add_edge(START, "model")
    bare.add_edge("model", END)
    adapter = StateGraph(State)
    adapter.add_node("context", context_node(bank))
    adapter.add_node("model", model)
    adapter.add_node("record", record_node(bank))
    adapter.add_edge(START, "context")
    adapter.add_edge("context", "model")
    adapter.add_edge("model", "record")
    adapter.add_edge("record", END)
    return bare.compile(), adapter.compile(store=LessonBankStore(bank))


def timed(call: Callable[[int, str], Any], tasks: list[str], warmup: int) -> tuple[list[float], list[Any]]:
    timings, answers = [], []
    for run, task in enumerate(tasks):
        started = time.perf_counter()
        answer = call(run, task)
        elapsed = time.perf_counter() - started
        if run >= warmup:
            timings.append(elapsed)
            answers.append(answer)
    return timings, answers


def bench_size(
    folder: Path, size: int, source: _corpus.Source, tasks: list[str], warmup: int
) -> dict[str, Any]:
    db, import_s = corpus_bank(folder, size, source, SEED)
    print(f"{size} lessons imported in {import_s:.1f} s", file=sys.stderr)
    with LessonBank(db, worker=False) as bank:
        bare, adapter = graphs(bank)
        bare_t, _ = timed(lambda run, task: bare.invoke({"task": task, "run": run}), tasks, warmup)
        adapter_t, states = timed(lambda run, task: adapter.invoke({"task": task, "run": run}), tasks, warmup)
        context, record = context_node(bank), record_node(bank)

        def nodes(run: int, task: str) -> Any:
            state: dict[str, Any] = {"task": task, "run": run}
            state.update(context(state))
            state.update(model(state))  # type: ignore[arg-type]
            return record(state)

        nodes_t, _ = timed(nodes, tasks, warmup)
    injected = sum(1 for state in states if state.get("lesson_ids"))
    row = {
        "lessons": size,
        "import_s": round(import_s, 1),
        "runs": len(adapter_t),
        "runs_with_lessons": injected,
        "bare": summarize_s(bare_t),
        "adapter": summarize_s(adapter_t),
        "nodes": summarize_s(nodes_t),
    }
    row["overhead"] = {
        key: round(row["adapter"][key] - row["bare"][key], 2)
        for key in ("p50_ms", "p99_ms")  # type: ignore[index]
    }
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000", help="lesson counts (default 1000,100000)")
    parser.add_argument("--runs", type=int, default=300, help="timed graph runs per size and graph")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs first")
    parser.add_argument("--quick", action="store_true", help="1k lessons, 40 runs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    sizes = [1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    runs = 40 if args.quick else args.runs

    machine = machine_info()
    source = _corpus.load_source(SEED)
    tasks = _corpus.make_queries(source, args.warmup + runs, SEED)
    with tempfile.TemporaryDirectory(prefix="lb-langgraph-") as tmp:
        rows = [bench_size(Path(tmp), size, source, tasks, args.warmup) for size in sizes]

    print(f"{'lessons':>8} {'runs':>5} {'what':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for row in rows:
        for what in ("bare", "adapter", "nodes"):
            part = row[what]
            print(
                f"{row['lessons']:>8} {row['runs']:>5} {what:>8} {part['p50_ms']:>8} {part['p99_ms']:>8} {part['max_ms']:>8}"
            )
        over = row["overhead"]
        print(f"{row['lessons']:>8} {row['runs']:>5} {'overhead':>8} {over['p50_ms']:>8} {over['p99_ms']:>8}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"when": datetime.now(UTC).isoformat(), "machine": machine, "quick": args.quick, "rows": rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
