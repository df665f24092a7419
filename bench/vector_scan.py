"""How lesson vectors are searched: a plain-bytes column scanned with numpy, against sqlite-vec.

lessonbank stores each vector as little-endian float32 bytes next to the lesson (SQLite, Redis and
PostgreSQL alike) and searches an in-process numpy matrix that follows the store's change sequence
(``lessonbank.retrieval.vector.VectorIndex``). This benchmark measures that path on a real SQLite
store at 1k, 10k and 100k lessons — the first (cold) load, the steady-state search including the
change check, memory — and the same k-nearest search in sqlite-vec's ``vec0`` table, when
``sqlite-vec`` and an SQLite build that can load extensions (``pysqlite3-binary``) are installed:

    .venv/bin/python -m pip install sqlite-vec pysqlite3-binary   # only for the comparison
    .venv/bin/python bench/vector_scan.py [--sizes 1000,10000,100000] [--dim 384]

Vectors are random unit vectors (latency does not depend on what they mean), or with
``--vectors-from bench/results/cache/vectors.sqlite --model minilm-l6-v2`` real lesson vectors from the
benchmarks' vector cache (200 of the indexed lessons stand for queries, each left out of its own results). Past 32k vectors
the index compares sign bits first and re-ranks a shortlist; ``shortlist_recall`` is the share of the
exact scan's k nearest that the two-step search returns (1.0 below 32k, where the scan is exact).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from lessonbank.models import Lesson
from lessonbank.retrieval.vector import VectorIndex, as_bytes
from lessonbank.stores.sqlite import SQLiteStore

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "vector_scan.json"
QUERIES = 200
LIMIT = 40  # the candidate pool hybrid recall asks for at k=10
MODEL = "bench-random"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def unit_vectors(count: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def timed(fn: Any, queries: np.ndarray) -> dict[str, float]:
    for query in queries[:10]:
        fn(query)
    samples = []
    for query in queries:
        started = time.perf_counter()
        fn(query)
        samples.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": statistics.median(samples), "p99_ms": percentile(samples, 0.99)}


def bytes_scan(size: int, dim: int, vectors: np.ndarray, queries: np.ndarray, folder: Path) -> dict[str, Any]:
    store = SQLiteStore(str(folder / f"bank-{size}.db"))
    lessons = [Lesson(namespace="bench", content=f"lesson number {i}") for i in range(size)]
    store.import_lessons(lessons)
    ids = [lesson.id for lesson in lessons]  # distinct contents: every lesson is stored under its own id
    started = time.perf_counter()
    for start in range(0, size, 1_000):
        rows = [(ids[i], f"h{i}", as_bytes(vectors[i])) for i in range(start, min(size, start + 1_000))]
        store.put_vectors("bench", MODEL, rows)
    write_s = time.perf_counter() - started
    index = VectorIndex(store, "bench", MODEL, dim, refresh_s=0.0)  # check for changes on every search
    started = time.perf_counter()
    index.sync(force=True)
    cold_s = time.perf_counter() - started
    recall = shortlist_recall(index, vectors, ids, queries)
    steady = timed(lambda q: index.search(q, LIMIT), queries)
    index.refresh_s = 3600.0
    scan_only = timed(lambda q: index.search(q, LIMIT), queries)
    store.close()
    return {
        "write_vectors_per_s": size / write_s,
        "cold_load_ms": cold_s * 1000,
        "search_with_change_check": steady,
        "search_only": scan_only,
        "matrix_mb": size * dim * 4 / 1e6,
        "shortlist_recall": recall,
    }


def shortlist_recall(
    index: VectorIndex, vectors: np.ndarray, ids: list[str], queries: np.ndarray
) -> dict[str, float]:
    """How many of the exact k nearest the index returns, per query: mean and worst. A query that is
    one of the indexed vectors (real vectors) is left out of its own neighbours."""
    shares = []
    for query in queries:
        scores = vectors @ query
        own = frozenset(ids[i] for i in np.flatnonzero(scores > 0.99999))
        exact = {ids[i] for i in np.argsort(-scores)[: LIMIT + len(own)] if ids[i] not in own}
        found = {lesson_id for lesson_id, _ in index.search(query, LIMIT, exclude=own)}
        shares.append(len(exact & found) / LIMIT)
    return {"mean": statistics.fmean(shares), "min": min(shares)}


def cached_vectors(path: Path, model: str, count: int) -> np.ndarray:
    """The first ``count`` vectors of ``model`` in a benchmark vector cache (unit length, float32)."""
    with sqlite3.connect(path) as conn:
        blobs = [
            blob
            for (blob,) in conn.execute(
                "SELECT vector FROM vectors WHERE name = ? ORDER BY rowid LIMIT ?", (model, count)
            )
        ]
    if len(blobs) < count:
        raise SystemExit(f"{path} holds {len(blobs)} vectors of {model!r}, {count} needed")
    return np.stack([np.frombuffer(blob, dtype="<f4") for blob in blobs])


def sqlite_vec_scan(
    size: int, dim: int, vectors: np.ndarray, queries: np.ndarray, folder: Path
) -> dict[str, Any] | str:
    try:
        import pysqlite3 as sqlite3  # type: ignore[import-not-found]
        import sqlite_vec  # type: ignore[import-not-found]
    except ImportError as exc:
        return f"not measured: {exc.name} is not installed"
    conn = sqlite3.connect(str(folder / f"vec-{size}.db"))
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{dim}])")
    started = time.perf_counter()
    with conn:
        conn.executemany(
            "INSERT INTO v (rowid, embedding) VALUES (?, ?)",
            ((i + 1, as_bytes(vectors[i])) for i in range(size)),
        )
    write_s = time.perf_counter() - started

    def search(query: np.ndarray) -> list[Any]:
        return conn.execute(
            "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = ?", (as_bytes(query), LIMIT)
        ).fetchall()

    result = {
        "write_vectors_per_s": size / write_s,
        "search": timed(search, queries),
        "version": sqlite_vec.__version__,
    }
    conn.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--vectors-from", type=Path, default=None, help="a benchmark vector cache (SQLite)")
    parser.add_argument("--model", default="minilm-l6-v2", help="whose vectors to take from --vectors-from")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    report: dict[str, Any] = {
        "dim": args.dim,
        "vectors": f"{args.model} from {args.vectors_from}" if args.vectors_from else "random unit",
        "load_average": os.getloadavg(),
        "sizes": {},
    }
    real = cached_vectors(args.vectors_from, args.model, max(sizes)) if args.vectors_from else None
    if real is not None:
        args.dim = report["dim"] = real.shape[1]
    random_queries = unit_vectors(QUERIES, args.dim, seed=7)
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            vectors = real[:size] if real is not None else unit_vectors(size, args.dim, seed=size)
            # Real vectors: lessons spread over the bank stand for queries (left out of their own results).
            queries = vectors[:: max(1, size // QUERIES)][:QUERIES] if real is not None else random_queries
            report["sizes"][str(size)] = {
                "bytes_numpy": bytes_scan(size, args.dim, vectors, queries, Path(tmp)),
                "sqlite_vec": sqlite_vec_scan(size, args.dim, vectors, queries, Path(tmp)),
            }
            print(f"{size}: done", file=sys.stderr)
    print(
        f"\nk-nearest ({LIMIT}) of {args.dim}-d {report['vectors']} vectors, {QUERIES} queries; "
        f"load {report['load_average'][0]:.1f}\n"
    )
    print(
        "| lessons | bytes + numpy: search p50/p99 | + change check p50/p99 | cold load | matrix "
        "| shortlist recall mean / worst | sqlite-vec vec0 p50/p99 |"
    )
    print("|---|---|---|---|---|---|---|")
    for size, row in report["sizes"].items():
        ours, theirs = row["bytes_numpy"], row["sqlite_vec"]
        vec = (
            theirs
            if isinstance(theirs, str)
            else f"{theirs['search']['p50_ms']:.2f} / {theirs['search']['p99_ms']:.2f} ms"
        )
        print(
            f"| {int(size):,} | {ours['search_only']['p50_ms']:.2f} / {ours['search_only']['p99_ms']:.2f} ms | "
            f"{ours['search_with_change_check']['p50_ms']:.2f} / {ours['search_with_change_check']['p99_ms']:.2f} ms | "
            f"{ours['cold_load_ms']:.0f} ms | {ours['matrix_mb']:.0f} MB | "
            f"{ours['shortlist_recall']['mean']:.3f} / {ours['shortlist_recall']['min']:.3f} | {vec} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
