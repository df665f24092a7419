"""Lexical recall latency, pruned against exhaustive, on a skewed (Zipf) vocabulary and on natural text.

    .venv/bin/python bench/lexical_pruning.py --sizes 100000
    .venv/bin/python bench/lexical_pruning.py --sizes 1000000 --texts zipf --queries 200
    .venv/bin/python bench/lexical_pruning.py --index-only --sizes 1000000 --texts natural --hybrid static

Each text and size gets a SQLite bank of its own, filled with ``import_lessons``; a fresh
``LexicalIndex`` loads it, then every query is searched twice on the same index: pruned (the default)
and with ``exhaustive=True``, the reference, each mode over all the queries back to back as a service
answers them (``--interleaved``: each query pruned then exhaustive before the next, the order of the
figures before 2026-11-28, where a pruned search follows a scan that pushed its data out of the
caches). The bench reports p50/p99 of each, the postings the
query's words hold, and how many queries' top 5 (ids, scores and order) differ from the reference:
that count must be 0.

- ``zipf``: lessons of 20-60 words drawn from 100,000 invented words with weight 1/rank (a few words in
  most lessons, most words in few); queries of 8 and of 64 words drawn the same way.
- ``natural``: lessons of two sentences of the real model-written reflections (``../shared/data``,
  see ``_corpus.py``), remixed past the real pairs; queries are held-out sentences and task prompts,
  cut at 64 words as the retriever cuts them.

``--index-only`` skips the bank: the term vectors are made by ``term_vector`` (as the store's write
path makes them) and served to the index by a plain table of rows (``TermVectorTable``), and every
lesson passes the filters. It measures the index alone, and reaches 1M lessons in minutes where the
import would take most of an hour on a busy machine.

``--hybrid EMBEDDER`` (with ``--index-only``) also embeds every lesson with that embedder (default
``static``) and times whole recalls, ``Retriever.recall(text, k=5)`` in lexical and in hybrid mode: the
lexical candidates (a pool of 20, so the 40 best), the query's embedding (never cached), the vector
index's search and the fusion, as a bank's ``recall`` runs them, over the same rows (``IndexOnlyStore``:
every lesson passes the filters, and the lessons returned are built from their texts).

``--half tune`` times the first half of the queries (the pruning's settings were tuned on it at 1M),
``--half report`` the second, held out.

Prints a table and writes JSON (default ``bench/results/lexical_pruning.json``).
"""

from __future__ import annotations

import argparse
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

import _corpus
from core import format_table, load_average, machine_info, summarize_ns
from lessonbank.codeterms import query_words
from lessonbank.models import Lesson
from lessonbank.ports import Candidate, LessonQuery, VectorChanges
from lessonbank.retrieval.embedders import make_embedder
from lessonbank.retrieval.hybrid import Retriever
from lessonbank.retrieval.lexical_index import LexicalIndex
from lessonbank.retrieval.vector import as_bytes
from lessonbank.stores.lexical import LEXICAL_SPACE, query_terms, term_hash, term_vector
from lessonbank.stores.sqlite import SQLiteStore

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "lexical_pruning.json"
NS = "bench"
K = 5
WARMUP = 10
VOCABULARY = 100_000
MAX_QUERY_WORDS = 64
BATCH = 20_000


def invented_words(rng: random.Random, size: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out: set[str] = set()
    while len(out) < size:
        out.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))))
    return sorted(out)


class Zipf:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = invented_words(self.rng, VOCABULARY)
        self.weights = [1.0 / (rank + 1) for rank in range(VOCABULARY)]
        total = 0.0
        self.cumulative = []
        for weight in self.weights:
            total += weight
            self.cumulative.append(total)

    def draw(self, count: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cumulative, k=count)

    def lessons(self, count: int) -> Iterator[str]:
        for _ in range(count):
            yield " ".join(self.draw(self.rng.randint(20, 60)))

    def queries(self, count: int) -> list[str]:
        return [" ".join(self.draw(8 if n % 2 else MAX_QUERY_WORDS)) for n in range(count)]


class Natural:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        source = _corpus.load_source(seed)
        self.sentences = [s.text for s in source.lesson_sentences]
        self.query_texts = _corpus.make_queries(source, 300, seed)

    def lessons(self, count: int) -> Iterator[str]:
        for n in range(count):
            first, second = self.rng.choice(self.sentences), self.rng.choice(self.sentences)
            yield f"{first} {second} (variant {n})"  # distinct content: the bank dedupes exact repeats

    def queries(self, count: int) -> list[str]:
        return [self.query_texts[n % len(self.query_texts)] for n in range(count)]


def halved(queries: list[str], half: str) -> list[str]:
    """The queries timed: every one, the first half (the pruning's settings were tuned on it) or the
    second (held out: the figures to report)."""
    middle = len(queries) // 2
    return queries if half == "all" else queries[:middle] if half == "tune" else queries[middle:]


def fill(store: SQLiteStore, texts: Iterator[str], count: int) -> float:
    """Import ``count`` lessons; lessons/s."""
    start = time.perf_counter()
    now = datetime.now(UTC)
    batch: list[Lesson] = []
    for text in texts:
        batch.append(Lesson(content=text, namespace=NS, created_at=now, updated_at=now))
        if len(batch) == BATCH:
            store.import_lessons(batch)
            batch = []
    if batch:
        store.import_lessons(batch)
    return count / (time.perf_counter() - start)


class TermVectorTable:
    """The two reads an index makes of a store, over term vectors held in a list (``--index-only``)."""

    def __init__(self, texts: Iterator[str]) -> None:
        scope = {"kind": "lesson", "agent": None, "task_type": None, "goal_id": None}
        self.rows = [(f"l{n}", term_vector(text, [], None, scope)) for n, text in enumerate(texts)]

    def vector_changes(self, namespace: str, model: str, after: int) -> VectorChanges:
        assert namespace == NS and model == LEXICAL_SPACE
        return VectorChanges(rows=self.rows if after == 0 else [], seq=1, count=len(self.rows))

    def vector_hashes(self, namespace: str, model: str, lesson_ids: Sequence[str]) -> dict[str, str]:
        return dict.fromkeys(lesson_ids, "")


class IndexOnlyStore(TermVectorTable):
    """What a ``Retriever`` reads of a store, over rows held in lists (``--hybrid``): the term vectors,
    the embedder's vectors of the same texts, the candidates (every lesson passes) and the lessons."""

    term_vectors = True

    def __init__(self, texts: Iterator[str], embedder: Any) -> None:
        self.texts = list(texts)
        super().__init__(iter(self.texts))
        self.model = embedder.name
        self.vector_rows: list[tuple[str, bytes]] = []
        for start in range(0, len(self.texts), BATCH):
            vectors = embedder.embed_documents(self.texts[start : start + BATCH])
            self.vector_rows += [(f"l{start + n}", as_bytes(vector)) for n, vector in enumerate(vectors)]

    def vector_changes(self, namespace: str, model: str, after: int) -> VectorChanges:
        assert namespace == NS and model in (LEXICAL_SPACE, self.model)
        rows = self.rows if model == LEXICAL_SPACE else self.vector_rows
        return VectorChanges(rows=rows if after == 0 else [], seq=1, count=len(rows))

    def candidates(self, query: LessonQuery, ids: Sequence[str]) -> list[Candidate]:
        return every_one(list(ids))

    def get_lessons(self, ids: Sequence[str]) -> list[Lesson]:
        now = datetime.now(UTC)
        return [Lesson(id=i, content=self.texts[int(i[1:])], namespace=NS, created_at=now, updated_at=now)
                for i in ids]  # fmt: skip

    def lessons_missing_vectors(
        self, namespace: str, model: str, limit: int, after: str | None
    ) -> list[Lesson]:
        return []


def measure_recall(store: IndexOnlyStore, embedder: Any, queries: Sequence[str]) -> dict[str, Any]:
    """p50/p99 of whole recalls, lexical and hybrid (the first recall, which loads the indexes, apart)."""
    retriever = Retriever(store, embedder=embedder)  # type: ignore[arg-type]
    scope, now, out = LessonQuery(NS), time.time(), {}
    for mode in ("lexical", "hybrid"):
        start = time.perf_counter()
        retriever.recall(queries[0], scope, k=K, now=now, mode=mode)
        out[f"first {mode} recall s"] = round(time.perf_counter() - start, 2)
        samples, cpu = [], []
        for n, text in enumerate([*queries[:WARMUP], *queries]):
            cache = getattr(embedder, "query_cache", None)
            if cache is not None:
                cache.clear()  # every timed query pays for its embedding, as a new task does
            start_ns, start_cpu = (
                time.perf_counter_ns(),
                time.process_time_ns(),
            )  # the embedding may use a thread
            retriever.recall(text, scope, k=K, now=now, mode=mode)
            if n >= WARMUP:
                samples.append(time.perf_counter_ns() - start_ns)
                cpu.append(time.process_time_ns() - start_cpu)
        out[f"{mode} recall"] = summarize_ns(samples)
        out[f"{mode} recall cpu"] = summarize_ns(cpu)
    out.update(hybrid_parts(retriever, embedder, queries))
    return out


def hybrid_parts(retriever: Retriever, embedder: Any, queries: Sequence[str]) -> dict[str, Any]:
    """Each step of a hybrid recall timed alone (p50/p99 ms): the lexical candidates (pool 20, so the
    pruned search's 40 best), the query's embedding, and the vector index's 40 nearest."""
    scope, index = LessonQuery(NS), retriever.index(NS)
    parts: dict[str, list[int]] = {"part lexical": [], "part embedding": [], "part vector": []}
    for n, text in enumerate([*queries[:WARMUP], *queries]):
        cache = getattr(embedder, "query_cache", None)
        if cache is not None:
            cache.clear()
        marks = [time.perf_counter_ns()]
        retriever.lexical(text, scope, 20)
        marks.append(time.perf_counter_ns())
        vector = embedder.embed_query(text)
        marks.append(time.perf_counter_ns())
        index.search(vector, 40)
        marks.append(time.perf_counter_ns())
        if n >= WARMUP:
            for samples, start, end in zip(parts.values(), marks, marks[1:], strict=False):
                samples.append(end - start)
    return {name: summarize_ns(samples) for name, samples in parts.items()}


def every_one(ids: list[str]) -> list[Candidate]:
    return [Candidate(lesson_id=i, relevance=0.0, access_count=0, confidence=0.5, pinned=False, last_used=0.0)
            for i in ids]  # fmt: skip


def measure(
    index: LexicalIndex, store: SQLiteStore | None, queries: Sequence[str], interleaved: bool = False
) -> dict[str, Any]:
    """Every query searched pruned and exhaustive, timed, and the two top 5s compared.

    By default each mode runs over all the queries back to back, as a recall service answers one
    query after another (pruned first, so nothing the exhaustive scan leaves in memory helps it);
    ``interleaved`` runs each query pruned then exhaustive before the next, the order of this bench's
    earlier figures: a pruned search then follows a scan of every posting of the query before, which
    has pushed its data out of the caches (a ~1-3 ms penalty)."""
    scope = LessonQuery(NS)

    def passing(ids: list[str]) -> Any:
        return store.candidates(scope, ids) if store is not None else every_one(ids)

    terms = [query_words(text, MAX_QUERY_WORDS) for text in queries]
    postings = []
    for words in terms:
        hashes = [term_hash(word) for word in query_terms(words)]
        postings.append(sum(len(index._postings([h])[0][0]) for h in hashes))
    modes = ("pruned", "exhaustive")
    samples: dict[str, list[int]] = {mode: [] for mode in modes}
    # The process's CPU time (every thread of it): less noisy than wall time under load.
    cpu: dict[str, list[int]] = {mode: [] for mode in modes}
    answers: dict[str, list[list[tuple[str, float]]]] = {mode: [] for mode in modes}

    def timed(mode: str, n: int, words: list[str]) -> None:
        start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
        found = index.search(words, K, passing, scope, exhaustive=mode == "exhaustive")
        took, took_cpu = time.perf_counter_ns() - start, time.process_time_ns() - start_cpu
        if n >= WARMUP:
            samples[mode].append(took)
            cpu[mode].append(took_cpu)
            answers[mode].append([(c.lesson_id, c.relevance) for c in found])

    timed_terms = [*terms[:WARMUP], *terms]
    if interleaved:
        for n, words in enumerate(timed_terms):
            for mode in modes:
                timed(mode, n, words)
    else:
        for mode in modes:
            for n, words in enumerate(timed_terms):
                timed(mode, n, words)
    differ = sum(p != e for p, e in zip(answers["pruned"], answers["exhaustive"], strict=True))
    postings.sort()
    return {
        "queries": len(queries),
        "order": "interleaved" if interleaved else "apart",
        "postings_p50": postings[len(postings) // 2],
        "postings_max": postings[-1],
        "pruned": summarize_ns(samples["pruned"]),
        "exhaustive": summarize_ns(samples["exhaustive"]),
        "pruned_cpu": summarize_ns(cpu["pruned"]),
        "exhaustive_cpu": summarize_ns(cpu["exhaustive"]),
        "top5_differ": differ,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {
        "benchmark": "lexical_pruning",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {
            "sizes": args.sizes,
            "texts": args.texts,
            "queries": args.queries,
            "index_only": args.index_only,
            "hybrid": args.hybrid,
            "half": args.half,
            "interleaved": args.interleaved,
        },
        "rows": [],
    }
    for text in args.texts:
        source = Zipf(7) if text == "zipf" else Natural(7)
        queries = halved(source.queries(args.queries), args.half)
        if args.index_only:
            for size in sorted(args.sizes):
                print(f"{text}: {size:,} lessons: term vectors ...", file=sys.stderr)
                if args.hybrid:
                    embedder = make_embedder(args.hybrid)
                    table: TermVectorTable = IndexOnlyStore(source.lessons(size), embedder)
                else:
                    table = TermVectorTable(source.lessons(size))
                index = LexicalIndex(table, NS)  # type: ignore[arg-type]
                row = measured(index, None, queries, text, size, None, args.interleaved)
                del index
                if args.hybrid:
                    print(f"{text}: {size:,} lessons: whole recalls, {args.hybrid} ...", file=sys.stderr)
                    row.update(measure_recall(table, embedder, queries))  # type: ignore[arg-type]
                    row["load_average_after"] = load_average()
                results["rows"].append(row)
                del table
            continue
        with tempfile.TemporaryDirectory(prefix="lessonbank-pruning-") as tmp:
            store = SQLiteStore(Path(tmp) / "bank.db")
            try:
                done = 0
                for size in sorted(args.sizes):
                    print(f"{text}: {size:,} lessons: import ...", file=sys.stderr)
                    rate = fill(store, source.lessons(size - done), size - done)
                    done = size
                    index = LexicalIndex(store, NS)
                    results["rows"].append(
                        measured(index, store, queries, text, size, rate, args.interleaved)
                    )
                    del index
            finally:
                store.close()
    return results


def measured(
    index: LexicalIndex,
    store: SQLiteStore | None,
    queries: Sequence[str],
    text: str,
    size: int,
    rate: float | None,
    interleaved: bool = False,
) -> dict[str, Any]:
    start = time.perf_counter()
    index.sync()
    load_s = time.perf_counter() - start
    print(f"{text}: {size:,} lessons: recall ...", file=sys.stderr)
    row = {"text": text, "lessons": size, "import_per_s": round(rate) if rate else None, "load_s": round(load_s, 2),
           "index_only": store is None, **measure(index, store, queries, interleaved), "load_average_after": load_average()}  # fmt: skip
    print(json.dumps(row), file=sys.stderr)
    return row


def report(results: dict[str, Any]) -> str:
    rows = [
        [
            row["text"],
            f"{row['lessons']:,}",
            f"{row['postings_p50']:,} / {row['postings_max']:,}",
            f"{row['pruned']['p50_ms']:.2f} / {row['pruned']['p99_ms']:.2f}",
            f"{row['exhaustive']['p50_ms']:.2f} / {row['exhaustive']['p99_ms']:.2f}",
            f"{row['pruned_cpu']['p50_ms']:.2f} / {row['pruned_cpu']['p99_ms']:.2f}",
            f"{row['exhaustive_cpu']['p50_ms']:.2f} / {row['exhaustive_cpu']['p99_ms']:.2f}",
            str(row["top5_differ"]),
        ]
        for row in results["rows"]
    ]
    header = ["text", "lessons", "postings p50 / max", "pruned p50/p99 ms", "exhaustive p50/p99 ms",
              "CPU pruned p50/p99 ms", "CPU exhaustive p50/p99 ms", "top 5 differ"]  # fmt: skip
    for line, row in zip(rows, results["rows"], strict=True):
        line.append(f"{row['load_average_after'][0]:.1f}" if row["load_average_after"] else "-")  # 1 minute
        if "hybrid recall" in row:
            line += [f"{row[f'{mode} recall']['p50_ms']:.2f} / {row[f'{mode} recall']['p99_ms']:.2f}"
                     for mode in ("lexical", "hybrid")]  # fmt: skip
    header.append("load after")
    if any("hybrid recall" in row for row in results["rows"]):
        header += ["recall lexical p50/p99 ms", "recall hybrid p50/p99 ms"]
        rows = [line + ["-", "-"] * (len(line) < len(header)) for line in rows]
    return format_table(header, rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--texts", default="zipf,natural")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--half", choices=("all", "tune", "report"), default="all",
                        help="time the first half of the queries (settings are tuned on it) or the second")  # fmt: skip
    parser.add_argument("--index-only", action="store_true", help="term vectors without a bank (see above)")
    parser.add_argument("--hybrid", nargs="?", const="static", default=None,
                        help="with --index-only: also time whole recalls, lexical and hybrid, with this embedder")  # fmt: skip
    parser.add_argument(
        "--interleaved",
        action="store_true",
        help="each query pruned then exhaustive before the next (the earlier figures' order)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.sizes = [int(part.replace("_", "")) for part in args.sizes.split(",") if part.strip()]
    args.texts = [part for part in args.texts.split(",") if part]
    if args.hybrid and not args.index_only:
        parser.error("--hybrid needs --index-only")
    unknown = set(args.texts) - {"zipf", "natural"}
    if unknown:
        parser.error(f"unknown texts: {', '.join(sorted(unknown))} (zipf, natural)")
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(report(results))
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
