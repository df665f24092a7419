"""How big the PostgreSQL connection pool should be: recall throughput by pool size and client threads.

    .venv/bin/python bench/pg_pool.py                        # 100k lessons; pools 1,2,4,10; threads 1,2,4,8,16
    .venv/bin/python bench/pg_pool.py --size 20000 --seconds 3

One bank (the narrow corpus of ``_corpus.py``) in a fresh schema; for each pool size (``pool_max`` in the
URL) a fresh bank object whose indexes are loaded first, then ``threads`` threads recall (k=5, lexical)
for ``--seconds`` each. Prints recalls/s and p99 latency per (pool, threads); writes JSON (default
``bench/results/pg_pool.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _backends
import _corpus
from core import bench_settings, format_table, machine_info, summarize_ns
from lessonbank import LessonBank

SEED = 20260511
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "pg_pool.json"


def load(bank: LessonBank, queries: Sequence[str], threads: int, seconds: float) -> dict[str, Any]:
    samples: list[int] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def worker(offset: int) -> None:
        mine, n = [], offset
        while time.perf_counter() < stop:
            start = time.perf_counter_ns()
            bank.recall(queries[n % len(queries)], k=5, mode="lexical")
            mine.append(time.perf_counter_ns() - start)
            n += threads
        with lock:
            samples.extend(mine)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return {
        "threads": threads,
        "recalls_per_s": len(samples) / (time.perf_counter() - started),
        **summarize_ns(samples),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--pools", default="1,2,4,10")
    parser.add_argument("--threads", default="1,2,4,8,16")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    reason = _backends.available("postgres")
    if reason is not None:
        print(f"postgres: skipped ({reason})", file=sys.stderr)
        return 1
    source = _corpus.load_source(SEED)
    queries = _corpus.make_queries(source, 500, SEED)
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="lessonbank-pool-") as tmp,
        _backends.fresh_url("postgres", Path(tmp)) as url,
    ):
        settings = bench_settings(Path(tmp) / "home")
        with LessonBank(url, settings=settings, worker=False) as bank:
            bank.import_lessons(_corpus.make_lessons(source, args.size, SEED))
        for pool in (int(p) for p in args.pools.split(",")):
            with LessonBank(f"{url}&pool_min=1&pool_max={pool}", settings=settings, worker=False) as bank:
                bank.recall(queries[0], k=5, mode="lexical")  # the index loads before timing
                for threads in (int(t) for t in args.threads.split(",")):
                    print(f"pool {pool}, {threads} threads ...", file=sys.stderr)
                    rows.append({"pool_max": pool, **load(bank, queries, threads, args.seconds)})
    results = {
        "benchmark": "pg_pool",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {"size": args.size, "seconds": args.seconds},
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    table = [
        [
            str(r["pool_max"]),
            str(r["threads"]),
            f"{r['recalls_per_s']:,.0f}",
            f"{r['p50_ms']:.2f}",
            f"{r['p99_ms']:.2f}",
        ]
        for r in rows
    ]
    print(format_table(["pool_max", "threads", "recalls/s", "p50 ms", "p99 ms"], table))
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
