"""Recall latency on every backend at the same size, in one table.

    .venv/bin/python bench/recall_backends.py                       # 100k lessons on each backend
    .venv/bin/python bench/recall_backends.py --size 10000 --queries 200
    .venv/bin/python bench/recall_backends.py --backends redis,postgres

Each backend gets a fresh database (a Redis key prefix, a PostgreSQL schema, an SQLite file),
the same lessons from ``_corpus.py`` through ``import_lessons()``, then the same queries
(after a warm-up) through ``recall(query, k=5)``. Prints a table and writes JSON
(default ``bench/results/recall_backends.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _backends
import _corpus
from core import bench_settings, format_table, hit_stats, machine_info, summarize_ns, time_each
from lessonbank import LessonBank

SEED = 20260511
WARMUP = 20
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "recall_backends.json"


def bench_backend(
    backend: str, lessons: list[dict[str, Any]], queries: Sequence[str], workdir: Path
) -> dict[str, Any]:
    with (
        _backends.fresh_url(backend, workdir) as url,
        LessonBank(url, settings=bench_settings(workdir / "home"), worker=False) as bank,
    ):
        start = time.perf_counter()
        counts = bank.import_lessons(lessons)
        import_s = time.perf_counter() - start
        samples = time_each(lambda q: bank.recall(q, k=5), queries, WARMUP)
        return {
            "backend": backend,
            "lessons": counts["added"],
            "import_s": import_s,
            "import_per_s": len(lessons) / import_s,
            "recall": {**summarize_ns(samples), **hit_stats(bank, queries[WARMUP:])},
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--backends", default="sqlite,redis,postgres")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    source = _corpus.load_source(SEED)
    lessons = _corpus.make_lessons(source, args.size, SEED)
    queries = _corpus.make_queries(source, args.queries + WARMUP, SEED)
    results: dict[str, Any] = {
        "benchmark": "recall_backends",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {"size": args.size, "queries": args.queries, "warmup": WARMUP, "seed": SEED},
        "backends": [],
        "skipped": {},
    }
    with tempfile.TemporaryDirectory(prefix="lessonbank-bench-") as tmp:
        for backend in args.backends.split(","):
            reason = _backends.available(backend)
            if reason is not None:
                results["skipped"][backend] = reason
                print(f"{backend}: skipped ({reason})", file=sys.stderr)
                continue
            print(f"{backend}: importing {args.size:,} lessons, {args.queries} recalls ...", file=sys.stderr)
            results["backends"].append(bench_backend(backend, lessons, queries, Path(tmp)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    rows = [
        [
            r["backend"],
            f"{r['lessons']:,}",
            f"{r['import_per_s']:,.0f}",
            f"{r['recall']['p50_ms']:.2f}",
            f"{r['recall']['p99_ms']:.2f}",
            f"{r['recall']['queries_with_hits']:.2f}",
        ]
        for r in results["backends"]
    ]
    print(
        format_table(
            ["backend", "lessons", "import/s", "recall p50 ms", "recall p99 ms", "queries with hits"], rows
        )
    )
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
