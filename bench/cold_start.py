"""Cold start: the first recall of a new process, on SQLite and PostgreSQL (and Redis), with and without
the lexical index snapshot.

For each store and size, one bank is filled with ``_corpus.py`` lessons (one ``import_lessons``
call), then a fresh process opens it and recalls once, ``--runs`` times in a row, with its own
``LESSONBANK_HOME``. The first process finds no snapshot: it loads every term vector and leaves the
snapshot (beside a SQLite bank, in ``$LESSONBANK_HOME/cache`` for a server store); the next ones
start from it. Each process reports, timed inside it: opening the bank (imports included) and the
first recall, the recall alone, and its peak resident memory. The bench's process holds no bank while they run.

Targets (issue 33): first recall in a new process ≤ 0.5 s at 100k lessons and ≤ 3 s at 1M on SQLite
and PostgreSQL, peak RSS ≤ 1.5 GB at 1M.

    .venv/bin/python bench/cold_start.py --sizes 100000 --backends sqlite,postgres
    .venv/bin/python bench/cold_start.py --sizes 10000 --runs 3 --out /tmp/cold.json

Prints a table and writes JSON (default ``bench/results/cold_start.json``).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
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
import _serve
from core import format_table, load_average, machine_info
from lessonbank import LessonBank

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "cold_start.json"
SEED = 11
REAL_MAX = 100_000  # lessons made of the corpus's own pairs; past that, remixed (it holds ~170k pairs)
FIRST_RECALL = (
    "import resource, sys, time; t = time.perf_counter(); from lessonbank import LessonBank; "
    "bank = LessonBank(sys.argv[1], worker=False); opened = time.perf_counter() - t; "
    "bank.recall(sys.argv[2]); took = time.perf_counter() - t; bank.close(); "
    "print(opened, took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"
)


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


def first_recalls(url: str, home: Path, prompts: list[str], runs: int) -> list[dict[str, float]]:
    out = []
    for prompt in prompts[:runs]:
        done = subprocess.run(
            [sys.executable, "-c", FIRST_RECALL, url, prompt],
            env=_serve.environment(home),
            capture_output=True,
            timeout=1800,
            check=True,
        )
        opened, took, peak = (float(part) for part in done.stdout.split()[-3:])
        out.append({"open_s": round(opened, 3), "recall_s": round(took - opened, 3), "first_recall_s": round(took, 3),
                    "peak_rss_mb": round(peak / 2**20), "snapshots": snapshots(url, home)})  # fmt: skip
    return out


def snapshots(url: str, home: Path) -> int:
    """Snapshot files the bank has now: beside a SQLite bank, else in the home's cache folder."""
    if url.startswith("sqlite:///"):
        return len(list(Path(f"{url.removeprefix('sqlite:///')}.lexicon").glob("*.snap")))
    return len(list((home / "cache" / "index-snapshots").glob("*/*.snap")))


def run(args: argparse.Namespace) -> dict[str, Any]:
    source = _corpus.load_source(SEED)
    prompts = _corpus.make_queries(source, max(args.runs, 1), SEED)
    results: dict[str, Any] = {
        "benchmark": "cold_start",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {"sizes": args.sizes, "backends": args.backends, "runs": args.runs},
        "rows": [],
        "skipped": {},
    }
    for backend in args.backends:
        reason = _backends.available(backend)
        if reason is not None:
            results["skipped"][backend] = reason
            continue
        for size in args.sizes:
            with (
                tempfile.TemporaryDirectory(prefix="lb-cold-") as tmp,
                _backends.fresh_url(backend, Path(tmp)) as url,
            ):
                home = Path(tmp) / "home"
                print(f"{backend}: {size:,} lessons: import ...", file=sys.stderr)
                started = time.perf_counter()
                with LessonBank(url, worker=False) as bank:
                    bank.import_lessons(bank_lessons(source, size, SEED))
                import_s = time.perf_counter() - started
                print(f"{backend}: {size:,} lessons: first recalls ...", file=sys.stderr)
                processes = first_recalls(url, home, prompts, args.runs)
                row = {"backend": backend, "lessons": size, "import_s": round(import_s, 1),
                       "without_snapshot": processes[0], "from_snapshot": processes[1:],
                       "load_average_after": load_average()}  # fmt: skip
                print(json.dumps(row), file=sys.stderr)
                results["rows"].append(row)
    return results


def report(results: dict[str, Any]) -> str:
    rows = []
    for row in results["rows"]:
        cold, warm = row["without_snapshot"], row["from_snapshot"]
        best = sorted(p["first_recall_s"] for p in warm)
        rows.append(
            [
                row["backend"],
                f"{row['lessons']:,}",
                f"{cold['first_recall_s']:.2f} ({cold['recall_s']:.2f}) / {cold['peak_rss_mb']:,}",
                f"{best[len(best) // 2]:.2f} / {max(best):.2f} ({min(p['recall_s'] for p in warm):.2f})",
                f"{max(p['peak_rss_mb'] for p in warm):,}",
            ]
        )
    header = ["store", "lessons", "no snapshot: first recall s (recall alone) / peak MB",
              "from snapshot: p50 / max s (best recall alone)", "from snapshot: peak MB"]  # fmt: skip
    lines = [format_table(header, rows)]
    if results["skipped"]:
        lines.append("Skipped: " + "; ".join(f"{k}: {v}" for k, v in results["skipped"].items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--runs", type=int, default=4, help="fresh processes per bank (the first makes the snapshot)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.sizes = [int(part.replace("_", "")) for part in args.sizes.split(",") if part.strip()]
    args.backends = [part for part in args.backends.split(",") if part]
    unknown = set(args.backends) - {"sqlite", "postgres", "redis"}
    if unknown or args.runs < 2:
        parser.error("backends are sqlite, postgres, redis; --runs is at least 2")
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(report(results))
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
