"""Recall at scale on every store: one bank grown to 10k, 100k and 1M lessons, measured at each size.

    .venv/bin/python bench/scale.py                                     # sqlite,postgres to 1M; redis to 100k
    .venv/bin/python bench/scale.py --backends sqlite --sizes 10000,100000 --queries 100

The lessons are the retrieval benchmark's (bench/retrieval.py): the ruff rule lessons, with their
provenance, padded with docstring distractors (remixed past the real ones). Each backend runs in a
process of its own (its memory figures are its own) and grows one bank: at each size it reports

- import: lessons/s of ``import_lessons`` without an embedder (vectors are written after, timed
  apart: embedding is the model's cost, not the store's);
- the first recall of a fresh process (loading the in-process indexes), then recall p50/p99 of the
  ruff queries (message and code), lexical and hybrid, the query's embedding included;
- hybrid recall@5 with the vector index's two-step search (sign bits, then exact re-rank) and with an
  exact scan of every vector, on the same bank;
- memory: the client process's own (anonymous) and mapped-file resident sizes, and each index's
  (measured in a process of its own that opens the bank and recalls, as an agent's would).

Prints a table and writes JSON (default ``bench/results/scale.json``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _backends
import _ruffdocs
import retrieval
from _vectorcache import CachedEmbedder
from core import format_table, load_average, machine_info, summarize_ns, time_each
from lessonbank.retrieval import vector
from lessonbank.retrieval.embedders import make_embedder

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "scale.json"
DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
REDIS_MAX = 100_000  # a million 1 KB lessons hold ~80M token entries: more memory than Redis is given here
K = 5
WARMUP = 20


def process_memory() -> dict[str, int]:
    """This process's resident memory, split as Linux does: its own (anonymous) and mapped files."""
    out: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[name] = int(value.split()[0]) * 1024
    return out


def recall5(bank: Any, cases: Sequence[dict[str, Any]], variant: str) -> float:
    found = sum(
        case["expected"] in retrieval.recall_ids(bank, case["queries"][variant], K, "hybrid")
        for case in cases
    )
    return found / max(len(cases), 1)


def measure(bank: Any, cases: Sequence[dict[str, Any]], queries: int, embedder: Any) -> dict[str, Any]:
    """Latency, quality and memory of one bank at one size (a fresh bank object: indexes load first)."""
    out: dict[str, Any] = {}
    texts = [case["queries"]["message+code"] for case in cases]
    inputs = [texts[i % len(texts)] for i in range(queries + WARMUP)]
    for mode in ("lexical", "hybrid"):
        start = time.perf_counter()
        retrieval.recall_ids(bank, texts[0], K, mode)
        first = time.perf_counter() - start
        cache = getattr(embedder, "query_cache", None)
        if mode == "hybrid" and cache is not None:
            cache.clear()  # every timed query pays for its embedding, as a new task does
        samples = time_each(lambda q, m=mode: retrieval.recall_ids(bank, q, K, m), inputs, WARMUP)
        out[mode] = {"first_recall_s": round(first, 3), **summarize_ns(samples)}
    out["recall@5"] = {}
    for label, binary_from in (("two-step", vector.BINARY_FROM), ("exact", sys.maxsize)):
        saved, vector.BINARY_FROM = vector.BINARY_FROM, binary_from
        try:
            out["recall@5"][label] = {
                variant: recall5(bank, cases, variant) for variant in retrieval.VARIANTS
            }
        finally:
            vector.BINARY_FROM = saved
    indexes = bank.retriever
    vectors = next(iter(indexes._indexes.values()), None)
    lexical = indexes.lexical_index(retrieval.NAMESPACE)
    gc.collect()
    out["memory"] = {
        "process": process_memory(),
        "vector_index": vectors.memory() if vectors is not None else None,
        "lexical_index": lexical.memory_bytes() if lexical is not None else None,
    }
    out["load_average_after"] = load_average()
    return out


def measured(url: str, home: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``measure`` in a process of its own, a client as an agent would run one: it opens the bank,
    loads the indexes and recalls; its memory is the client's, not this one's (which holds the data)."""
    command = [sys.executable, __file__, "--measure", url, "--home", str(home), "--embedder", args.embedder,
               "--cases", str(args.cases), "--queries", str(args.queries), "--cache-dir", str(args.cache_dir)]  # fmt: skip
    if args.dataset:
        command += ["--dataset", str(args.dataset)]
    # LESSONBANK_HOME too: a server store's index snapshot goes to its cache folder, not the user's.
    env = {**os.environ, "LESSONBANK_HOME": str(home)}
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True, env=env)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def dataset_of(args: argparse.Namespace) -> dict[str, Any]:
    if args.dataset:
        loaded: dict[str, Any] = json.loads(args.dataset.read_text("utf-8"))
        return loaded
    return _ruffdocs.load_dataset(args.cache_dir)


def embedders_of(args: argparse.Namespace) -> tuple[Any, CachedEmbedder]:
    """The embedder, and it with its document vectors cached across runs."""
    inner = make_embedder(args.embedder)
    assert inner is not None, f"{args.embedder!r} names no embedder"
    return inner, CachedEmbedder(inner, args.cache_dir / "vectors.sqlite")


def measure_client(args: argparse.Namespace) -> dict[str, Any]:
    cases = retrieval.spread(dataset_of(args)["cases"], args.cases)
    inner, embedder = embedders_of(args)
    before = process_memory()
    with retrieval.open_bank(args.measure, embedder, args.home) as bank:
        result = measure(bank, cases, args.queries, inner)
    result["memory"]["process_before_open"] = before
    return result


def run_backend(args: argparse.Namespace) -> dict[str, Any]:
    """One backend, in this process: grow the bank through every size and measure at each."""
    dataset = dataset_of(args)
    top = max(args.sizes)
    distractors = _ruffdocs.load_distractors(
        top, [lesson["content"] for lesson in dataset["lessons"]], args.cache_dir
    )
    lessons = retrieval.lessons_for(dataset, distractors, top, provenance=True)
    _, embedder = embedders_of(args)
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="lessonbank-scale-") as tmp,
        _backends.fresh_url(args.backend, Path(tmp)) as url,
    ):
        home = Path(tmp) / "home"
        done = 0
        for size in sorted(args.sizes):
            print(f"{args.backend}: {size:,} lessons: import ...", file=sys.stderr)
            with retrieval.open_bank(url, None, home) as bank:
                start = time.perf_counter()
                counts = bank.import_lessons(lessons[done:size])
                seconds = time.perf_counter() - start
            with retrieval.open_bank(url, embedder, home) as bank:
                start = time.perf_counter()
                embedded = bank.embed_missing()
                embed_s = time.perf_counter() - start
            done = size
            print(f"{args.backend}: {size:,} lessons: recall ...", file=sys.stderr)
            row = {
                "backend": args.backend,
                "lessons": size,
                "import": {
                    **counts,
                    "seconds": round(seconds, 2),
                    "lessons_per_s": round(counts["added"] / seconds),
                },
                "vectors": {"written": embedded, "seconds": round(embed_s, 2), **embedder.take_counts()},
                **measured(url, home, args),
            }
            rows.append(row)
            print(
                json.dumps({k: row[k] for k in ("lessons", "import", "lexical", "hybrid", "recall@5")}),
                file=sys.stderr,
            )
    return {"backend": args.backend, "rows": rows}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="sqlite,postgres,redis")
    parser.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES))
    parser.add_argument("--redis-max", type=int, default=REDIS_MAX, help="largest Redis bank")
    parser.add_argument("--embedder", default="static", help="the embedder of hybrid recall (default static)")
    parser.add_argument("--cases", type=int, default=200, help="ruff cases for quality and latency queries")
    parser.add_argument("--queries", type=int, default=300, help="timed recalls per mode and size")
    parser.add_argument("--cache-dir", type=Path, default=_ruffdocs.CACHE_DIR)
    parser.add_argument("--dataset", type=Path, default=None, help="a dataset JSON (default: ruff's, cached)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--backend", help=argparse.SUPPRESS)  # the child process's one backend
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # a client process: the bank's URL
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sizes = [int(part.replace("_", "")) for part in args.sizes.split(",") if part.strip()]
    if args.measure:
        print(json.dumps(measure_client(args)))
        return 0
    if args.backend:
        print(json.dumps(run_backend(args)))
        return 0
    results: dict[str, Any] = {
        "benchmark": "scale",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {
            k: v for k, v in vars(args).items() if k not in ("out", "backend", "cache_dir", "dataset")
        },
        "backends": [],
        "skipped": {},
    }
    for backend in args.backends.split(","):
        reason = _backends.available(backend)
        if reason is not None:
            results["skipped"][backend] = reason
            continue
        sizes = [s for s in args.sizes if backend != "redis" or s <= args.redis_max]
        command = [sys.executable, __file__, "--backend", backend, "--sizes", ",".join(map(str, sizes)),
                   "--embedder", args.embedder, "--cases", str(args.cases), "--queries", str(args.queries),
                   "--cache-dir", str(args.cache_dir)]  # fmt: skip
        if args.dataset:
            command += ["--dataset", str(args.dataset)]
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0:
            results["skipped"][backend] = f"exited with {done.returncode}"
            continue
        results["backends"].append(json.loads(done.stdout.strip().splitlines()[-1]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(report(results))
    print(f"JSON: {args.out}")
    return 0


def report(results: dict[str, Any]) -> str:
    rows = []
    for backend in results["backends"]:
        for row in backend["rows"]:
            memory = row["memory"]
            vectors = memory["vector_index"] or {}
            rows.append(
                [
                    row["backend"],
                    f"{row['lessons']:,}",
                    f"{row['import']['lessons_per_s']:,}",
                    f"{row['lexical']['p50_ms']:.1f} / {row['lexical']['p99_ms']:.1f}",
                    f"{row['hybrid']['p50_ms']:.1f} / {row['hybrid']['p99_ms']:.1f}",
                    f"{row['lexical']['first_recall_s']:.1f} / {row['hybrid']['first_recall_s']:.1f}",
                    " / ".join(
                        f"{row['recall@5']['two-step'][v]:.3f} vs {row['recall@5']['exact'][v]:.3f}"
                        for v in retrieval.VARIANTS
                    ),
                    f"{memory['process'].get('RssAnon', 0) / 2**20:,.0f} / {memory['process'].get('RssFile', 0) / 2**20:,.0f}",
                    f"{vectors.get('resident', 0) / 2**20:,.0f} / {vectors.get('matrix', 0) / 2**20:,.0f}",
                    f"{(memory['lexical_index'] or 0) / 2**20:,.0f}",
                ]
            )
    header = [
        "store", "lessons", "import/s", "lexical p50/p99 ms", "hybrid p50/p99 ms", "first recall s (lex/hyb)",
        "hybrid R@5 two-step vs exact (msg+code / code)", "process MB (own / mapped)",
        "vector index MB (resident / matrix)", "lexical index MB",
    ]  # fmt: skip
    lines = [format_table(header, rows)]
    if results["skipped"]:
        lines.append("Skipped: " + "; ".join(f"{k}: {v}" for k, v in results["skipped"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
