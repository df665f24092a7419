"""``embed_missing`` on a bank without vectors: its rate from the first page to the last, on every store.

    .venv/bin/python bench/embed_missing.py --sizes 100000 --backends sqlite,postgres,redis
    .venv/bin/python bench/embed_missing.py --sizes 1000000 --backends sqlite,postgres

For each store and size, one bank is filled with ``import_lessons`` and no embedder (the corpus of
``cold_start.py``: real lesson sentences, remixed past what the corpus holds), then a bank opened with
the static embedder (``--embedder``) runs ``embed_missing()`` once. Every page it embeds is timed, from
the end of the page before (the store's query for the missing lessons, the embedding and the write):
the table gives the whole run's rate, the rate of the first and the last tenth of the pages, and their
ratio (1.0: the last page costs what the first did). The static model is loaded before the clock
starts. Redis gets a key prefix of its own, deleted afterwards; PostgreSQL a schema of its own.

On Redis the row also holds the server's memory: ``used_memory`` growth after the import and after
``embed_missing`` (the server is shared: other clients move it too), and, at the end, this bank's keys
by kind (``MEMORY USAGE`` of a sample of each kind scaled by its count, as ``redis_scale.py`` takes
it), each also per lesson.

A million lessons on Redis are ~3M keys: run that size in a database of its own
(``LB_BENCH_REDIS_URL=redis://127.0.0.1:6379/1``), as every test's cleanup SCANs database 0 by prefix
and took 15-35 s each while such a bank was there.

Target (issue 33): ≥ 2,000 vectors/s at 1M on every store, the rate flat from the first page to the last.

Prints a table and writes JSON (default ``bench/results/embed_missing.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _backends
import _corpus
from core import format_table, load_average, machine_info
from lessonbank import LessonBank
from lessonbank.retrieval.embedders import make_embedder

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "embed_missing.json"
PAGE = 1_000  # embed_missing's own default page
SEED = 11
REAL_MAX = 100_000  # lessons made of the corpus's own pairs; past that, remixed (it holds ~170k pairs)


@contextlib.contextmanager
def imported_bank(
    backend: str, size: int, source: _corpus.Source, prefix: str, keep: Path | None = None
) -> Iterator[tuple[str, Path, float | None]]:
    """A bank of ``backend`` holding ``size`` lessons of :func:`bank_lessons`: its URL, a scratch
    folder and the seconds the import took. The bank is dropped afterwards, unless ``keep`` names a
    folder: then it is kept there (a SQLite file, or a PostgreSQL schema / Redis prefix named by a
    file there) and the next run with the same ``keep`` reuses it (import seconds None)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        if keep is not None:
            url, fresh = kept_url(backend, size, keep)
            if fresh:
                print(f"{backend}: {size:,} lessons: import (kept in {keep}) ...", file=sys.stderr)
                started = time.perf_counter()
                with LessonBank(url, worker=False) as bank:
                    bank.import_lessons(bank_lessons(source, size, SEED))
                (keep / f"{backend}-{size}.done").touch()
                yield url, Path(tmp), time.perf_counter() - started
            else:
                print(f"{backend}: {size:,} lessons: the bank kept in {keep}", file=sys.stderr)
                yield url, Path(tmp), None
            return
        with _backends.fresh_url(backend, Path(tmp)) as url:
            print(f"{backend}: {size:,} lessons: import ...", file=sys.stderr)
            started = time.perf_counter()
            with LessonBank(url, worker=False) as bank:
                bank.import_lessons(bank_lessons(source, size, SEED))
            yield url, Path(tmp), time.perf_counter() - started


def kept_url(backend: str, size: int, keep: Path) -> tuple[str, bool]:
    """The URL of the bank of ``backend`` and ``size`` kept in ``keep``, and whether it must be
    imported afresh (no finished import marked there: what an interrupted one left is removed)."""
    keep.mkdir(parents=True, exist_ok=True)
    done = keep / f"{backend}-{size}.done"
    if backend == "sqlite":
        path = keep / f"sqlite-{size}.db"
        url = f"sqlite:///{path}"
        if not done.exists():
            for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                leftover.unlink(missing_ok=True)
    elif backend == "redis":
        prefix = f"lbkept{size}:"
        url = f"{_backends.REDIS_URL}?prefix={prefix}"
        if not done.exists():
            _backends.drop_redis_prefix(prefix)
    else:
        schema = f"lbkept_{size}"
        url = f"{_backends.POSTGRES_URL}?schema={schema}"
        if not done.exists():
            _backends.drop_schema(schema)
    return url, not done.exists()


def bank_lessons(source: _corpus.Source, count: int, seed: int) -> Iterator[dict[str, Any]]:
    """``count`` distinct lessons: the corpus's own (situation, correction) pairs up to ``REAL_MAX``,
    then two of its sentences and a variant number (distinct content: the bank dedupes exact
    repeats), read lazily so a million need not be held at once."""
    real = min(count, REAL_MAX)
    yield from _corpus.make_lessons(source, real, seed)
    rng = random.Random(seed + 1)
    pool = source.lesson_sentences
    for n in range(count - real):
        first, second = rng.choice(pool), rng.choice(pool)
        task = source.tasks[first.task]
        tags = rng.sample(task.keywords, min(len(task.keywords), 3))
        content = f"{first.text} {second.text} (variant {n})"
        yield {"content": content, "tags": tags, "task_type": task.task_type}


def redis_used_memory() -> int:
    import redis

    client = redis.Redis.from_url(_backends.REDIS_URL)
    try:
        return int(client.info("memory")["used_memory"])
    finally:
        client.close()


def redis_keys(url: str, lessons: int) -> dict[str, dict[str, int]]:
    """The bank's keys by kind (see ``redis_scale.key_memory``), with bytes per lesson."""
    from redis_scale import key_memory

    with LessonBank(url, worker=False) as bank:
        kinds = key_memory(bank)
    return {kind: {**v, "per_lesson": round(v["bytes"] / max(lessons, 1))} for kind, v in kinds.items()}


def timed_run(url: str, embedder: Any) -> dict[str, Any]:
    """One ``embed_missing`` with every page timed (seconds and vectors written per page)."""
    pages: list[tuple[float, int]] = []
    with LessonBank(url, worker=False, embedder=embedder) as bank:
        intake = bank.services.intake
        embed = intake.retriever.embed_lessons
        last = time.perf_counter()

        def timed(lessons: Any) -> int:
            nonlocal last
            written: int = embed(lessons)
            now = time.perf_counter()
            pages.append((now - last, written))
            last = now
            return written

        intake.retriever.embed_lessons = timed  # type: ignore[method-assign]
        started = last = time.perf_counter()
        done = intake.embed_missing(batch=PAGE)
        seconds = time.perf_counter() - started
    tenth = max(1, len(pages) // 10)

    def rate(part: Sequence[tuple[float, int]]) -> float:
        return round(sum(n for _, n in part) / max(sum(s for s, _ in part), 1e-9))

    first, final = rate(pages[:tenth]), rate(pages[-tenth:])
    return {
        "embedded": done,
        "seconds": round(seconds, 1),
        "per_s": round(done / seconds) if seconds else 0,
        "pages": len(pages),
        "first_tenth_per_s": first,
        "last_tenth_per_s": final,
        "last_over_first": round(final / first, 2) if first else None,
        "page_s": [round(s, 4) for s, _ in pages],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    source = _corpus.load_source(SEED)
    embedder = make_embedder(args.embedder)
    assert embedder is not None, f"{args.embedder!r} names no embedder"
    embedder.embed_query("load the model before any clock starts")
    results: dict[str, Any] = {
        "benchmark": "embed_missing",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {"sizes": args.sizes, "backends": args.backends, "embedder": embedder.name, "page": PAGE},
        "rows": [],
        "skipped": {},
    }
    for backend in args.backends:
        reason = _backends.available(backend)
        if reason is not None:
            results["skipped"][backend] = reason
            continue
        for size in args.sizes:
            empty = redis_used_memory() if backend == "redis" else 0
            load, cpu = load_average(), time.process_time()
            with imported_bank(backend, size, source, "lb-embed-") as (url, _, import_s):
                row: dict[str, Any] = {
                    "backend": backend,
                    "lessons": size,
                    "import_s": None,
                    "load_before_import": load,
                }
                if import_s is not None:
                    row.update(import_s=round(import_s, 1), import_per_s=round(size / import_s),
                               import_client_cpu_s=round(time.process_time() - cpu, 1))  # fmt: skip
                if backend == "redis":
                    row["redis_memory"] = {"after_import": redis_used_memory() - empty}
                print(f"{backend}: {size:,} lessons: embed_missing ...", file=sys.stderr)
                row.update(timed_run(url, embedder), load_average_after=load_average())
                if backend == "redis":
                    row["redis_memory"]["after_embed"] = redis_used_memory() - empty
                    print(f"{backend}: {size:,} lessons: Redis keys by kind ...", file=sys.stderr)
                    row["redis_memory"]["keys"] = redis_keys(url, size)
                print(json.dumps({k: v for k, v in row.items() if k != "page_s"}), file=sys.stderr)
                results["rows"].append(row)
    return results


def report(results: dict[str, Any]) -> str:
    rows = [
        [
            row["backend"],
            f"{row['lessons']:,}",
            f"{row['embedded']:,}",
            f"{row['seconds']:.1f}",
            f"{row['per_s']:,}",
            f"{row['first_tenth_per_s']:,} → {row['last_tenth_per_s']:,}",
            f"{row['last_over_first']}",
            " ".join(f"{x:.2f}" for x in row["load_average_after"]),
            f"{row['import_per_s']:,}" if row.get("import_per_s") else "",
            _memory(row),
        ]
        for row in results["rows"]
    ]
    header = ["store", "lessons", "embedded", "s", "vectors/s", "first → last tenth of pages, /s",
              "last / first", "load after", "import/s", "Redis MB import / embed (B/lesson)"]  # fmt: skip
    lines = [format_table(header, rows)]
    for row in results["rows"]:
        keys = row.get("redis_memory", {}).get("keys")
        if keys:
            parts = ", ".join(
                f"{kind} {v['keys']:,} keys {v['bytes'] / 1e6:,.0f} MB ({v['per_lesson']:,} B/lesson)"
                for kind, v in keys.items()
            )
            lines.append(f"{row['backend']} {row['lessons']:,}: {parts}")
    if results["skipped"]:
        lines.append("Skipped: " + "; ".join(f"{k}: {v}" for k, v in results["skipped"].items()))
    return "\n".join(lines)


def _memory(row: dict[str, Any]) -> str:
    memory = row.get("redis_memory")
    if not memory:
        return ""
    imported, embedded = memory["after_import"], memory["after_embed"]
    per = round(embedded / max(row["lessons"], 1))
    return f"{imported / 1e6:,.0f} / {embedded / 1e6:,.0f} ({per:,})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--backends", default="sqlite,postgres,redis")
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.sizes = [int(part.replace("_", "")) for part in args.sizes.split(",") if part.strip()]
    args.backends = [part for part in args.backends.split(",") if part]
    unknown = set(args.backends) - {"sqlite", "postgres", "redis"}
    if unknown:
        parser.error("backends are sqlite, postgres, redis")
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(report(results))
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
