"""The Redis store at scale: one bank grown to each size (default 100k, then 1M short lessons).

    .venv/bin/python bench/redis_scale.py                          # 100k and 1M
    .venv/bin/python bench/redis_scale.py --sizes 20000 --queries 100

Lessons and queries are ``_corpus.py``'s (two model-written reflection sentences, 2–4 tags, a task
type: ~270 characters; past 150k lessons, one of those with a third sentence: ~400 characters). The bank lives under a key prefix of its own, deleted at the end (never
FLUSHALL: the server is shared). At each size it reports

- import: lessons/s of ``import_lessons`` (no embedder);
- in a fresh client process (its memory is a client's, not this one's, which holds the corpus):
  the first lexical recall (it loads the in-process index from the term vectors), then lexical
  recall p50/p99; the store's own search (the token postings: the replay pool's keyword search and
  recall without numpy) p50/p99; ``write_lesson`` p50/p99 (each runs the near-duplicate check over
  the postings): half new lessons, half retyped copies of stored ones, with how many the check
  caught; the client's peak resident memory;
- Redis memory: ``used_memory`` growth since the bank was empty (the server is shared: other
  clients move it too), and this bank's keys by kind (``MEMORY USAGE`` of a sample of each kind,
  scaled by its count).

Prints a table and writes JSON (default ``bench/results/redis_scale.json``).

Memory: at 1M lessons Redis holds ~5.5 GB, and the fresh client's first lexical recall (loading every
term vector from Redis) passed 11.9 GB of its own on 2026-11-27 before it was stopped: run the 1M size
only with ~20 GB free.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _backends
import _corpus
from core import format_table, load_average, machine_info, summarize_ns, time_each
from lessonbank import LessonBank
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.settings import Settings
from lessonbank.text import keywords

SEED = 20261127
NAMESPACE = "default"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "redis_scale.json"
WARMUP = 20
SAMPLE_PER_KIND = 200
PAIRED = 150_000
VECTOR_KINDS = frozenset({"vec", "vechash", "vecseq", "vecctr"})


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def used_memory(bank: LessonBank) -> int:
    return int(bank.store.r.info("memory")["used_memory"])  # type: ignore[attr-defined]


def key_memory(bank: LessonBank) -> dict[str, dict[str, int]]:
    """This bank's keys by kind (the part after the namespace): count and estimated bytes."""
    r, base = bank.store.r, bank.store.db.base  # type: ignore[attr-defined]
    prefix = base[: -len("lb:")]
    counts: Counter[str] = Counter()
    samples: dict[str, list[str]] = {}
    rng = random.Random(SEED)
    for key in r.scan_iter(match=prefix.replace("*", "\\*") + "*", count=10_000):
        rest = key[len(base) :].split(":")
        kind = rest[1] if len(rest) > 1 and rest[0] else (rest[-1] if rest else key)
        if kind in VECTOR_KINDS and len(rest) > 2:
            kind += ":" + rest[2]  # each model's apart: the lexical term vectors and an embedder's
        counts[kind] += 1
        seen = samples.setdefault(kind, [])
        if len(seen) < SAMPLE_PER_KIND:
            seen.append(key)
        elif rng.random() < SAMPLE_PER_KIND / counts[kind]:
            seen[rng.randrange(SAMPLE_PER_KIND)] = key
    out = {}
    for kind, keys in samples.items():
        sizes = [r.memory_usage(key, samples=0) or 0 for key in keys]
        out[kind] = {"keys": counts[kind], "bytes": round(sum(sizes) / len(sizes) * counts[kind])}
    return dict(sorted(out.items(), key=lambda item: -item[1]["bytes"]))


def make_lessons(source: _corpus.Source, count: int) -> list[dict[str, Any]]:
    """``count`` distinct corpus lessons. The corpus holds ~170k (situation, correction) pairs; past
    ``PAIRED`` lessons, a paired lesson is written again with a third sentence of the corpus added
    (each (lesson, sentence) pair once), as a longer lesson about the same task."""
    paired = _corpus.make_lessons(source, min(count, PAIRED), SEED)
    lessons, used = list(paired), set()
    rng = random.Random(SEED)
    pool = source.lesson_sentences
    while len(lessons) < count:
        index, sentence = rng.randrange(len(paired)), rng.randrange(len(pool))
        if (index, sentence) in used or pool[sentence].text in paired[index]["content"]:
            continue
        used.add((index, sentence))
        lessons.append({**paired[index], "content": f"{paired[index]['content']} {pool[sentence].text}"})
    return lessons


def open_bank(url: str, home: Path) -> LessonBank:
    return LessonBank(url, namespace=NAMESPACE, settings=Settings(home=home), worker=False)


def measure_client(url: str, home: Path, queries: int) -> dict[str, Any]:
    """Run in a process of its own (``--measure``): recall, search and writes on a fresh client."""
    source = _corpus.load_source(SEED)
    texts = _corpus.make_queries(source, queries + WARMUP, SEED)
    out: dict[str, Any] = {}
    with open_bank(url, home) as bank:
        start = time.perf_counter()
        bank.recall(texts[0], k=5, mode="lexical")
        out["first_recall_s"] = round(time.perf_counter() - start, 2)
        out["lexical"] = summarize_ns(time_each(lambda q: bank.recall(q, k=5, mode="lexical"), texts, WARMUP))
        store, query = bank.store, LessonQuery(NAMESPACE)
        out["store_search"] = summarize_ns(
            time_each(lambda q: store.search(query, keywords(q)[:32], 20), texts, WARMUP)
        )
        stored = store.list_lessons(query, limit=queries // 2)
        rng = random.Random(SEED)
        contents = [f"{x.content.rstrip('.')}!" for x in stored]  # retyped: the check should catch them
        contents += [f"{rng.choice(texts)} (note {i})" for i in range(queries - len(contents))]
        caught = 0

        def write(text: str) -> None:
            nonlocal caught
            result = store.write_lesson(Lesson(content=text, namespace=NAMESPACE))
            caught += result.action != "added"

        out["write_lesson"] = summarize_ns(time_each(write, contents, 0))
        out["write_lesson"]["near_duplicates_caught"] = caught
        out["write_lesson"]["retyped_copies"] = len(stored)
    out["client_peak_rss"] = peak_rss()
    return out


def measured(url: str, home: Path, queries: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--measure", url, "--home", str(home), "--queries", str(queries)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(sizes: Sequence[int], queries: int, breakdown: bool) -> list[dict[str, Any]]:
    source = _corpus.load_source(SEED)
    top = max(sizes)
    print(f"making {top:,} lessons ...", file=sys.stderr)
    lessons = make_lessons(source, top)
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="lessonbank-redis-scale-") as tmp,
        _backends.fresh_url("redis", Path(tmp)) as url,
    ):
        home = Path(tmp) / "home"
        done = 0
        with open_bank(url, home) as bank:
            empty = used_memory(bank)
        for size in sorted(sizes):
            print(f"redis: {size:,} lessons: import ...", file=sys.stderr)
            load = load_average()
            with open_bank(url, home) as bank:
                start = time.perf_counter()
                counts = bank.import_lessons(lessons[done:size])
                seconds = time.perf_counter() - start
                memory: dict[str, Any] = {"used_memory_growth": used_memory(bank) - empty}
                if breakdown:
                    memory["keys"] = key_memory(bank)
            done = size
            print(f"redis: {size:,} lessons: recall ...", file=sys.stderr)
            row = {
                "lessons": size,
                "import": {
                    **counts,
                    "seconds": round(seconds, 1),
                    "lessons_per_s": round(counts["added"] / seconds),
                },
                "load_before_import": load,
                "redis_memory": memory,
                **measured(url, home, queries),
                "load_after": load_average(),
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    return rows


def report(rows: Sequence[dict[str, Any]]) -> str:
    header = ["lessons", "import/s", "first recall s", "lexical p50/p99 ms", "store search p50/p99 ms",
              "write p50/p99 ms", "Redis MB", "client peak MB", "load"]  # fmt: skip
    table = [
        [
            f"{row['lessons']:,}",
            f"{row['import']['lessons_per_s']:,}",
            f"{row['first_recall_s']}",
            f"{row['lexical']['p50_ms']:.1f} / {row['lexical']['p99_ms']:.1f}",
            f"{row['store_search']['p50_ms']:.1f} / {row['store_search']['p99_ms']:.1f}",
            f"{row['write_lesson']['p50_ms']:.1f} / {row['write_lesson']['p99_ms']:.1f}",
            f"{row['redis_memory']['used_memory_growth'] / 1e6:,.0f}",
            f"{row['client_peak_rss'] / 1e6:,.0f}",
            f"{row['load_before_import'][0]}",
        ]
        for row in rows
    ]
    lines = [format_table(header, table)]
    for row in rows:
        keys = row["redis_memory"].get("keys")
        if keys:
            parts = ", ".join(
                f"{kind} {v['keys']:,} keys {v['bytes'] / 1e6:,.0f} MB" for kind, v in keys.items()
            )
            lines.append(f"{row['lessons']:,}: {parts}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-breakdown", action="store_true", help="skip the per-kind key memory")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure_client(args.measure, args.home, args.queries)))
        return 0
    missing = _backends.available("redis")
    if missing:
        print(missing, file=sys.stderr)
        return 1
    rows = run([int(s) for s in args.sizes.split(",")], args.queries, not args.no_breakdown)
    print(report(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "when": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": machine_info(),
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
