"""Embedder survey: which embedder whose weights ship inside a PyPI package earns its cost over MiniLM?

For each candidate (``_candidate_embedders.py``; ``none`` is lexical recall alone), in a process of its
own so its memory is its own:

- size: weights on disk and parameters;
- memory: RSS added by loading the model and embedding the queries (after lessonbank and NumPy are
  imported), and the process's peak RSS at the end (banks included);
- speed: ``embed_query`` p50/p99 over distinct queries of the three domains (20 warm-up queries first,
  no query cache), and hybrid ``recall(k=5)`` p50/p99 on the first domain's 10k bank;
- quality: recall@1, recall@5 and MRR@10 of ``recall(k=10)`` in vector and hybrid mode, per domain
  (``bench/retrieval.py``'s ruff, refurb and sqlfluff rule banks padded to 10k lessons with the same
  distractors), for both query variants, over every case and over the held-out half (the odd cases).
  The cold case, code-only queries on a bank without provenance, is the one issue 33 judges on: a
  candidate becomes an option only if it beats MiniLM by at least 0.05 recall@5 (hybrid) there, within
  3 times MiniLM's query embedding time.

The banks, lessons, cases and metrics are ``bench/retrieval.py``'s own functions; document vectors are
kept per embedder name in ``<cache-dir>/survey-vectors.sqlite`` so a second run embeds nothing.

Run from the repository root, with the candidates installed beside the project (see
``_candidate_embedders.py``)::

    PYTHONPATH=/tmp/cand .venv/bin/python bench/embedder_survey.py
    PYTHONPATH=/tmp/cand .venv/bin/python bench/embedder_survey.py --embedders minilm,e5-small-q4 --provenance both

Prints markdown tables and writes JSON (default ``bench/results/embedder_survey.json``).

Result (2026-11-27, 3k-lesson banks, a shared 2-core machine): no candidate earns an extra. Held-out cold
recall@5, hybrid, ruff / refurb / sqlfluff: MiniLM 0.489 / 0.583 / 0.500; multilingual-e5-small 4-bit
0.448 / 0.472 / 0.278 at 3.3x MiniLM's query time; MiniLM int8 the same as MiniLM at the same speed;
paraphrase-MiniLM-L3 0.427 / 0.361 / 0.250; the static models (WordLlama, tokenlearn) below lexical
recall alone (0.420 / 0.417 / 0.278). By shape, a 12-layer 384-wide encoder costs 2x MiniLM's six layers
and a base-size one (768 wide) 6.6x, past the 3x bound; no small 12-layer English model (bge, gte, e5)
ships its weights on PyPI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _ruffdocs
import retrieval
from _vectorcache import CachedEmbedder
from core import load_average, machine_info, summarize_ns, time_each

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "embedder_survey.json"
DEFAULT_EMBEDDERS = (
    "none",
    "minilm",
    "e5-small-q4",
    "minilm-int8",
    "paraphrase-l3",
    "sre-minilm",
    "wordllama",
    "tokenlearn-static",
)
# retrieval.py judges the cold case on 10k lessons; on a small shared machine a candidate 12-layer model
# embeds a few documents a second, so the survey defaults to 3k (every rule lesson, the rest distractors).
BANK_SIZE = 3_000
QUERY_SAMPLES = 300
WARMUP = 20
MARGIN = 0.05  # recall@5 a candidate must add on the held-out cold case (issue 33)
TIME_FACTOR = 3.0  # within this many times MiniLM's query embedding p50


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def survey_one(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every figure for one embedder, measured in this process."""
    import _candidate_embedders

    domains = retrieval.load_domains(args)
    first = args.domains[0]
    dataset = domains[first]
    distractors = _ruffdocs.load_distractors(
        retrieval.DISTRACTOR_SIZE - len(dataset["lessons"]),
        [lesson["content"] for lesson in dataset["lessons"]],
        args.cache_dir,
    )
    row: dict[str, Any] = {"embedder": name, "quality": [], "machine_load_at_start": load_average()}
    queries = list(
        dict.fromkeys(
            case["queries"][variant]
            for data in domains.values()
            for case in data["cases"]
            for variant in retrieval.VARIANTS
            if case["queries"][variant].strip()
        )
    )
    embedder = None
    rss_before = rss_mb()
    if name != "none":
        started = time.perf_counter()
        embedder = _candidate_embedders.make(name)
        embedder.embed_query("warm the model up")
        row["load_s"] = round(time.perf_counter() - started, 3)
        row["name"] = embedder.name
        row["dim"] = embedder.dim
        row["about"] = getattr(embedder, "about", "all-MiniLM-L6-v2 on onnxruntime (lessonbank's MiniLM)")
        row["params"] = getattr(embedder, "params", 22_700_000)
        row["weights_mb"] = round(getattr(embedder, "weights_bytes", 90_868_376) / 2**20, 1)
        spread = [queries[(i * 7919) % len(queries)] for i in range(args.queries + WARMUP)]
        row["embed_query"] = summarize_ns(time_each(embedder.embed_query, spread, WARMUP))
        row["model_rss_mb"] = round(rss_mb() - rss_before, 1)
        embedder = CachedEmbedder(embedder, args.cache_dir / "survey-vectors.sqlite")
    modes = ("lexical",) if embedder is None else ("vector", "hybrid")
    with tempfile.TemporaryDirectory(prefix="lessonbank-survey-") as tmp:
        workdir = Path(tmp)
        home = workdir / "home"
        for domain, data in domains.items():
            cases = data["cases"]
            for provenance in args.provenance:
                lessons = retrieval.lessons_for(data, distractors, args.bank_size, provenance)
                print(
                    f"{name}: {domain}, provenance {'on' if provenance else 'off'}: import ...",
                    file=sys.stderr,
                )
                bank, info = retrieval.build_bank(lessons, embedder, workdir, None, home)
                try:
                    for mode in modes:
                        print(f"{name}: {domain}: quality, {mode} ...", file=sys.stderr)
                        row["quality"].append(
                            {
                                "domain": domain,
                                "mode": mode,
                                "provenance": provenance,
                                "lessons": len(lessons),
                                "metrics": strip_ranks(retrieval.quality(bank, cases, mode)),
                            }
                        )
                    if domain == first and provenance == args.provenance[0]:
                        mode = modes[-1]
                        print(f"{name}: {domain}: latency, {mode} ...", file=sys.stderr)
                        row["recall_latency"] = {
                            "mode": mode,
                            "provenance": provenance,
                            **retrieval.latency(bank, cases, mode, args.queries, WARMUP),
                        }
                    row.setdefault("import", []).append(
                        {
                            "domain": domain,
                            "provenance": provenance,
                            **info.get("import", {}),
                            "embedding": info.get("embedding"),
                        }
                    )
                finally:
                    bank.close()
                for leftover in workdir.glob("*.db*"):  # the bank, its WAL, its index snapshot folder
                    shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    row["peak_rss_mb"] = round(rss_mb("VmHWM"), 1)
    return row


def strip_ranks(metrics: dict[str, Any]) -> dict[str, Any]:
    return {variant: {k: v for k, v in m.items() if k != "ranks"} for variant, m in metrics.items()}


def interleaved_latency(names: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    """``embed_query`` of every embedder on the same queries, taking turns query by query, so that the
    load other processes put on a shared machine falls on all of them alike (their ratio is the figure)."""
    import _candidate_embedders

    domains = retrieval.load_domains(args)
    queries = list(
        dict.fromkeys(
            case["queries"][variant]
            for data in domains.values()
            for case in data["cases"]
            for variant in retrieval.VARIANTS
            if case["queries"][variant].strip()
        )
    )
    spread = [queries[(i * 7919) % len(queries)] for i in range(args.queries + WARMUP)]
    embedders = {name: _candidate_embedders.make(name) for name in names if name != "none"}
    samples: dict[str, list[int]] = {name: [] for name in embedders}
    for number, query in enumerate(spread):
        for name, embedder in embedders.items():
            start = time.perf_counter_ns()
            embedder.embed_query(query)
            if number >= WARMUP:
                samples[name].append(time.perf_counter_ns() - start)
    return {name: summarize_ns(values) for name, values in samples.items()}


def encoder_shapes(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Query latency of BERT encoders by shape alone (random weights, lessonbank's ONNX graph, one
    thread, MiniLM's tokenizer on the same queries): what a 12-layer small model or a base-size model
    (bge-base, e5-base, all-mpnet-base-v2, arctic-embed-m: 12 layers, 768 wide) would cost per query,
    without fetching their weights."""
    import numpy as np
    from tokenizers import Tokenizer

    from lessonbank.retrieval.embedders.bert_onnx import OnnxEncoder
    from lessonbank.retrieval.embedders.minilm import model_dir

    tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    tokenizer.no_padding()
    domains = retrieval.load_domains(args)
    queries = [
        c["queries"]["code"] for d in domains.values() for c in d["cases"] if c["queries"]["code"].strip()
    ]
    lengths = [
        len(tokenizer.encode(queries[(i * 7919) % len(queries)]).ids) for i in range(args.queries + WARMUP)
    ]
    rng = np.random.default_rng(0)
    shapes = {"6 x 384 (MiniLM-L6)": (6, 384), "12 x 384 (bge/e5/gte-small)": (12, 384),
              "12 x 768 (base models)": (12, 768)}  # fmt: skip
    encoders = {}
    for label, (layers, hidden) in shapes.items():
        inner = hidden * 4

        def w(*shape: int) -> Any:
            return (rng.standard_normal(shape) * 0.02).astype(np.float32)

        weights = [
            {
                "qkv_w": w(hidden, 3 * hidden),
                "qkv_b": w(3 * hidden),
                "out_w": w(hidden, hidden),
                "out_b": w(hidden),
                "ln1_w": np.ones(hidden, np.float32),
                "ln1_b": w(hidden),
                "ff1_w": w(hidden, inner),
                "ff1_b": w(inner),
                "ff2_w": w(inner, hidden),
                "ff2_b": w(hidden),
                "ln2_w": np.ones(hidden, np.float32),
                "ln2_b": w(hidden),
            }
            for _ in range(layers)
        ]
        encoders[label] = OnnxEncoder(weights, hidden=hidden, heads=12, eps=1e-12)
    # The shapes take turns query by query, so a busy machine slows them alike.
    samples: dict[str, list[int]] = {label: [] for label in shapes}
    for number, length in enumerate(lengths):
        for label, encoder in encoders.items():
            hidden = shapes[label][1]
            x = rng.standard_normal((1, length, hidden)).astype(np.float32)
            bias = np.zeros((1, 1, 1, length), np.float32)
            start = time.perf_counter_ns()
            encoder.run(x, bias)
            if number >= WARMUP:
                samples[label].append(time.perf_counter_ns() - start)
    return [{"shape": label, **summarize_ns(values)} for label, values in samples.items()]


# --------------------------------------------------------------------- report


def cold(row: dict[str, Any], domain: str, mode: str) -> dict[str, Any] | None:
    for q in row["quality"]:
        if q["domain"] == domain and q["mode"] == mode and not q["provenance"]:
            metrics: dict[str, Any] = q["metrics"]["code"]
            return metrics
    return None


def verdicts(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 33's rule per candidate on the held-out cold case in hybrid mode: recall@5 gain over MiniLM
    per domain, and its mean over the domains (each domain counts once, whatever its number of cases),
    which must reach ``MARGIN``; query time from the interleaved timing when it ran, else each process's."""
    rows = {row["embedder"]: row for row in results["embedders"] if "error" not in row}
    base = rows.get("minilm")
    if base is None or "embed_query" not in base:
        return {}
    interleaved = results.get("interleaved_embed_query", {})
    out = {}
    for name, row in rows.items():
        if name in ("minilm", "none"):
            continue
        gains = {}
        for domain in results["config"]["domains"]:
            mine, theirs = cold(row, domain, "hybrid"), cold(base, domain, "hybrid")
            if mine and theirs:
                gains[domain] = round(mine["held-out"]["recall@5"] - theirs["held-out"]["recall@5"], 3)
        if name in interleaved and "minilm" in interleaved:
            ratio = interleaved[name]["p50_ms"] / interleaved["minilm"]["p50_ms"]
        else:
            ratio = row["embed_query"]["p50_ms"] / base["embed_query"]["p50_ms"]
        mean = sum(gains.values()) / len(gains) if gains else float("nan")
        out[name] = {
            "held_out_cold_recall5_gain": gains,
            "mean_gain": round(mean, 3),
            "query_time_ratio": round(ratio, 2),
            "wins": bool(gains) and mean >= MARGIN and ratio <= TIME_FACTOR,
        }
    return out


def report(results: dict[str, Any]) -> str:
    from retrieval import markdown_table

    rows = [row for row in results["embedders"] if "error" not in row]
    parts = []
    body = []
    for row in rows:
        if row["embedder"] == "none":
            continue
        eq, rl = row["embed_query"], row.get("recall_latency", {})
        body.append(
            [
                row["embedder"],
                row["about"],
                str(row["dim"]),
                f"{row['params'] / 1e6:.1f}M" if row.get("params") else "?",
                f"{row['weights_mb']}",
                f"{eq['p50_ms']:.2f} / {eq['p99_ms']:.2f}",
                f"{rl['p50_ms']:.2f} / {rl['p99_ms']:.2f}" if rl else "",
                f"{row['model_rss_mb']}",
                f"{row['peak_rss_mb']}",
            ]
        )
    parts.append(
        "Cost\n\n"
        + markdown_table(
            [
                "embedder",
                "what",
                "dim",
                "params",
                "weights MB",
                "embed_query p50 / p99 ms",
                f"hybrid recall p50 / p99 ms ({results['config']['bank_size']:,})",
                "model RSS MB",
                "peak RSS MB",
            ],
            body,
        )
    )
    for domain in results["config"]["domains"]:
        body = []
        for row in rows:
            for q in row["quality"]:
                if q["domain"] != domain:
                    continue
                cells = [row["embedder"], q["mode"], "on" if q["provenance"] else "off"]
                for variant in retrieval.VARIANTS:
                    m = q["metrics"][variant]
                    cells += [
                        f"{m['recall@5']:.3f}",
                        f"{m['held-out']['recall@5']:.3f}",
                        f"{m['mrr@10']:.3f}",
                    ]
                body.append(cells)
        header = ["embedder", "mode", "provenance"]
        for variant in retrieval.VARIANTS:
            header += [f"{variant} R@5", "held-out R@5", "MRR@10"]
        parts.append(
            f"Quality, {domain}, {results['config']['bank_size']:,} lessons\n\n"
            + markdown_table(header, body)
        )
    body = []
    for name, verdict in results.get("verdicts", {}).items():
        gains = ", ".join(f"{d} {g:+.3f}" for d, g in verdict["held_out_cold_recall5_gain"].items())
        body.append(
            [
                name,
                gains,
                f"{verdict['mean_gain']:+.3f}",
                f"{verdict['query_time_ratio']:.2f}×",
                "yes" if verdict["wins"] else "no",
            ]
        )
    if body:
        parts.append(
            f"Issue 33's rule: held-out cold recall@5 (hybrid) gain over MiniLM, mean over domains ≥ {MARGIN}, "
            f"query time ≤ {TIME_FACTOR:g}× MiniLM's\n\n"
            + markdown_table(
                ["candidate", "gain per domain", "mean gain", "query time", "earns an extra"], body
            )
        )
    if results.get("interleaved_embed_query"):
        body = [
            [n, f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}"]
            for n, r in results["interleaved_embed_query"].items()
        ]
        parts.append(
            "embed_query, all embedders taking turns on the same queries\n\n"
            + markdown_table(["embedder", "p50 ms", "p99 ms"], body)
        )
    if results.get("encoder_shapes"):
        body = [[r["shape"], f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}"] for r in results["encoder_shapes"]]
        parts.append(
            "Encoder layers alone by shape (random weights, one thread, the queries' token counts)\n\n"
            + markdown_table(["layers x width", "p50 ms", "p99 ms"], body)
        )
    errors = [f"{row['embedder']}: {row['error']}" for row in results["embedders"] if "error" in row]
    if errors:
        parts.append("Not measured: " + "; ".join(errors))
    return "\n\n".join(parts)


# --------------------------------------------------------------------- entry point


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--embedders", default=",".join(DEFAULT_EMBEDDERS), help="comma-separated candidates")
    parser.add_argument("--domains", default=",".join(retrieval.DOMAINS), help="comma-separated domains")
    parser.add_argument(
        "--provenance",
        choices=("off", "on", "both"),
        default="off",
        help="banks without provenance (the cold case, default), with it, or both",
    )
    parser.add_argument(
        "--bank-size", type=int, default=BANK_SIZE, help=f"lessons per bank (default {BANK_SIZE})"
    )
    parser.add_argument("--queries", type=int, default=QUERY_SAMPLES, help="timed queries")
    parser.add_argument("--cache-dir", type=Path, default=_ruffdocs.CACHE_DIR)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--interleaved", action="store_true", help="also time embed_query of all embedders taking turns"
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="*",
        default=[],
        help="survey JSON files whose embedders are not measured again",
    )
    parser.add_argument("--shapes", action="store_true", help="also time encoder shapes (small, base)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a child process: one embedder
    args = parser.parse_args(argv)
    args.domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    unknown = [d for d in args.domains if d not in retrieval.DOMAINS]
    if unknown:
        parser.error(f"unknown domain(s) {unknown}; use {', '.join(retrieval.DOMAINS)}")
    args.provenance = {"off": [False], "on": [True], "both": [False, True]}[args.provenance]
    args.embedders = [e.strip() for e in args.embedders.split(",") if e.strip()]
    args.dataset = None  # what retrieval.load_domains reads
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.one:
        try:
            row = survey_one(args.one, args)
        except Exception as exc:  # reported in the table as "not measured", with the reason
            row = {"embedder": args.one, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}
        args.out.write_text(json.dumps(row, indent=2) + "\n", "utf-8")
        return row
    results: dict[str, Any] = {
        "benchmark": "embedder_survey",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {
            "domains": args.domains,
            "bank_size": args.bank_size,
            "queries": args.queries,
            "provenance": args.provenance,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        },
        "embedders": [],
    }
    forwarded = [
        "--domains",
        ",".join(args.domains),
        "--queries",
        str(args.queries),
        "--bank-size",
        str(args.bank_size),
        "--cache-dir",
        str(args.cache_dir),
    ]
    forwarded += ["--provenance", {(False,): "off", (True,): "on"}.get(tuple(args.provenance), "both")]
    for earlier in args.merge:
        # Rows of earlier runs (same options), e.g. embedders measured side by side in several processes.
        rows = json.loads(earlier.read_text("utf-8"))["embedders"]
        results["embedders"] += [row for row in rows if "error" not in row]
    measured = {row["embedder"] for row in results["embedders"] if "error" not in row}
    with tempfile.TemporaryDirectory(prefix="lessonbank-survey-parts-") as tmp:
        for name in (name for name in args.embedders if name not in measured):
            part = Path(tmp) / f"{name}.json"
            command = [sys.executable, __file__, "--one", name, "--out", str(part), *forwarded]
            done = subprocess.run(command, check=False)
            if part.exists():
                results["embedders"].append(json.loads(part.read_text("utf-8")))
            else:
                results["embedders"].append({"embedder": name, "error": f"exit status {done.returncode}"})
    if args.interleaved:
        print("interleaved embed_query latency ...", file=sys.stderr)
        results["interleaved_embed_query"] = interleaved_latency(args.embedders, args)
    results["verdicts"] = verdicts(results)
    if args.shapes:
        results["encoder_shapes"] = encoder_shapes(args)
    results["load_average_at_end"] = load_average()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(report(results))
    print(f"\nJSON: {args.out}")
    return results


if __name__ == "__main__":
    main()
