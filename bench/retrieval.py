"""Retrieval benchmark: does recall bring the right lesson back? Quality and latency per mode and embedder.

Dataset (``_ruffdocs.py``): ruff's own rule documentation, labelled by ruff. A lesson is a rule's prose
advice, its provenance (``learned_from``) the rule's bad example, and the query what ruff prints on that
example: ``message+code`` (the diagnostic message and the offending lines) or ``code`` (the lines alone).
The expected answer is the lesson of the rule the diagnostic came from. Two more domains are built the
same way from other tools' rule documentation (``--domains``): refurb's checks (``_refurbdocs.py``,
Python) and sqlfluff's rules (``_sqlfluffdocs.py``, SQL). Every quality figure is also reported on the
held-out half of the cases (the odd ones; constants are tuned on the even ones of the first domain), and
the cold case (code-only queries on a bank without provenance) gets its own table per domain.

Quality: recall@1, recall@5 and MRR@10 of ``recall(query, k=10, mode=...)`` for every case, per mode
(lexical, and vector and hybrid per embedder), with provenance (lessons imported with ``learned_from``) and
without, on the rule bank alone and on the rule bank padded to 10k lessons with distractors (docstring
paragraphs of the standard library and the installed packages: other real prose, with the source they
document as their provenance).

Latency: ``recall(query, k=5, mode=...)`` p50/p99 over the ``message+code`` queries (after warm-up) on banks
of 1k, 10k and 100k lessons (rules + distractors, with provenance). The query's embedding is inside the
timing. Import time (which embeds the lessons when an embedder is set) is reported per bank.

Run from the repository root::

    .venv/bin/python bench/retrieval.py                                  # default embedders, 1k/10k/100k
    .venv/bin/python bench/retrieval.py --embedders hash,minilm --sizes 1000,10000
    .venv/bin/python bench/retrieval.py --quick                          # smoke run
    .venv/bin/python bench/retrieval.py --bank-cache bench/results/banks # keep embedded banks for the next run

Prints markdown tables and writes JSON (default ``bench/results/retrieval.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Siblings (_ruffdocs, core) resolve both as a script and as ``bench.retrieval`` imported by the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _feedback_replay
import _ruffdocs
from _vectorcache import CachedEmbedder
from core import load_average, machine_info, rank_metrics, summarize_ns, time_each
from lessonbank import LessonBank, Settings
from lessonbank.retrieval.embedders import Embedder, make_embedder
from lessonbank.text import keywords

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "retrieval.json"
DEFAULT_SIZES = (1_000, 10_000, 100_000)
DISTRACTOR_SIZE = 10_000  # quality is also measured on a bank of this many lessons
CANDIDATE_EMBEDDERS = ("hash", "minilm", "static")
VARIANTS = ("message+code", "code")
# Rule documentation with bad examples from three tools, labelled mechanically by each tool. The first
# domain gets every section (latency, references); the others are measured for quality.
DOMAINS = {"ruff": "_ruffdocs", "refurb": "_refurbdocs", "sqlfluff": "_sqlfluffdocs"}
QUALITY_K = 10
LATENCY_K = 5
LATENCY_QUERIES = 300
WARMUP_QUERIES = 20
NAMESPACE = "bench"
RULES_AGENT = "rule-docs"
REFERENCE_SIZES = (10_000, 100_000)
REFERENCE_MAX = 200_000  # lexical recall is compared with bm25s and the exhaustive scorer here


# --------------------------------------------------------------------- banks


def open_bank(url: str, embedder: Embedder | None, home: Path) -> LessonBank:
    return LessonBank(url, namespace=NAMESPACE, settings=Settings(home=home), worker=False, embedder=embedder)


# "hybrid-rrf": hybrid recall with reciprocal-rank fusion instead of the bank's weighted sum of
# normalised BM25 and cosine; measured for quality only, to keep checking the fusion the bank uses.
ALTERNATIVE_FUSION = "rrf"
OTHER_FUSION = f"hybrid-{ALTERNATIVE_FUSION}"


def recall_ids(bank: LessonBank, query: str, k: int, mode: str) -> list[str]:
    if not query.strip():
        return []
    if mode == OTHER_FUSION:
        fusion, bank.retriever.fusion = bank.retriever.fusion, ALTERNATIVE_FUSION
        try:
            return [hit.lesson.id for hit in bank.recall(query, k=k, mode="hybrid")]
        finally:
            bank.retriever.fusion = fusion
    return [hit.lesson.id for hit in bank.recall(query, k=k, mode=mode)]


def usable_embedders(
    names: Sequence[str], workdir: Path, vector_cache: Path | None
) -> tuple[dict[str, Embedder], dict[str, str]]:
    """The embedders that load here (tried on a scratch bank), and why the others do not."""
    ok: dict[str, Embedder] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            embedder = make_embedder(name)
            assert embedder is not None, f"{name!r} names no embedder"
            if vector_cache is not None:
                embedder = CachedEmbedder(embedder, vector_cache)
            bank = open_bank(f"sqlite:///{workdir / f'probe-{name}.db'}", embedder, workdir / "home")
            try:
                bank.import_lessons([{"content": "probe lesson for the embedder check"}])
                bank.recall("probe", k=1, mode="vector")
            finally:
                bank.close()
            if isinstance(embedder, CachedEmbedder):
                embedder.take_counts()  # the probe's work is not the first bank's
            ok[name] = embedder
        except Exception as exc:  # any failure means "not usable here"; the reason is reported
            skipped[name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return ok, skipped


def lessons_for(
    dataset: dict[str, Any], distractors: list[dict[str, Any]], size: int | None, provenance: bool
) -> list[dict[str, Any]]:
    """The rule lessons, padded with distractors up to ``size`` (None: rules alone)."""
    # Rule lessons carry an agent of their own: the filtered-recall check asks for them alone (about
    # 1% of a 100k bank). Padding gets ids, so the references can name every lesson.
    rules = [{**lesson, "agent": RULES_AGENT} for lesson in dataset["lessons"]]
    pad = [] if size is None else distractors[: max(0, size - len(rules))]
    chosen = rules + [{**lesson, "id": f"pad-{n}"} for n, lesson in enumerate(pad)]
    if size is not None and len(chosen) < size:
        chosen += remixed(distractors, size - len(chosen))
    if not provenance:
        chosen = [{**lesson, "learned_from": None} for lesson in chosen]
    return chosen


def remixed(distractors: Sequence[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """``count`` more distractors past the real ones (for banks of a million): each the first half of one
    paragraph's words and the second half of another's, so words keep their real frequencies."""
    n = len(distractors)
    out = []
    for i in range(count):
        first, second = distractors[i % n], distractors[(i + 1 + (i // n) * 7919) % n]
        head, tail = first["content"].split(), second["content"].split()
        content = " ".join(head[: len(head) // 2] + tail[len(tail) // 2 :])
        out.append({**first, "content": content, "id": f"mix-{i}"})
    return out


def build_bank(
    lessons: list[dict[str, Any]], embedder: Embedder | None, workdir: Path, cache: Path | None, home: Path
) -> tuple[LessonBank, dict[str, Any]]:
    """A bank holding ``lessons``: reused from ``cache`` when an identical one was built before."""
    digest = hashlib.sha256(json.dumps(lessons, sort_keys=True).encode()).hexdigest()[:16]
    name = f"{embedder.name if embedder else 'none'}-{len(lessons)}-{digest}.db"
    folder = cache if cache is not None else workdir
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    info: dict[str, Any] = {
        "lessons": len(lessons),
        "db": str(path) if cache else None,
        "path": str(path),
        "reused": path.exists(),
    }
    bank = open_bank(f"sqlite:///{path}", embedder, home)
    if info["reused"]:
        # A run stopped mid-import leaves a bank short of lessons (start again) or of vectors (catch up).
        if sum(bank.stats()["lessons"].values()) != len(lessons):
            bank.close()
            for leftover in folder.glob(f"{name}*"):
                leftover.unlink()
            return build_bank(lessons, embedder, workdir, cache, home)
        if embedder is not None:
            start = time.perf_counter()
            info["embed_missing"] = {
                "embedded": bank.embed_missing(),
                "seconds": round(time.perf_counter() - start, 3),
            }
            if isinstance(embedder, CachedEmbedder):
                info["embedding"] = embedder.take_counts()
        return bank, info
    start = time.perf_counter()
    counts = bank.import_lessons(lessons)
    info["import"] = {**counts, "seconds": round(time.perf_counter() - start, 3)}
    if embedder is not None:
        # Import embeds as it writes; this catches what it left (none expected) and times it.
        start = time.perf_counter()
        info["embed_missing"] = {
            "embedded": bank.embed_missing(),
            "seconds": round(time.perf_counter() - start, 3),
        }
    info["import"]["lessons_per_s"] = round(len(lessons) / max(info["import"]["seconds"], 1e-9), 1)
    if isinstance(embedder, CachedEmbedder):
        # How much of the import was the model's own work, and how much came from the vector cache.
        info["embedding"] = embedder.take_counts()
    return bank, info


# --------------------------------------------------------------------- quality


def quality(bank: LessonBank, cases: Sequence[dict[str, Any]], mode: str) -> dict[str, dict[str, Any]]:
    """recall@1, recall@5 and MRR@10 per query variant, over every case and over the held-out half (the
    odd cases; constants are tuned on the even ones); a query with no answer in the top 10 scores 0."""
    out: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        ranks = []
        for case in cases:
            ids = recall_ids(bank, case["queries"][variant], QUALITY_K, mode)
            ranks.append(ids.index(case["expected"]) + 1 if case["expected"] in ids else None)
        out[variant] = {
            **rank_metrics(ranks),
            "held-out": rank_metrics(ranks[1::2]),
            # Per rule: the answer's rank in the top 10, or null; for reading failures, not for the tables.
            "ranks": {case["rule"]: rank for case, rank in zip(cases, ranks, strict=True)},
        }
    return out


def leakage(dataset: dict[str, Any], cases: Sequence[dict[str, Any]]) -> dict[str, float]:
    """How much of each query already sits in its answer: keyword overlap with the lesson and provenance."""
    by_id = {lesson["id"]: lesson for lesson in dataset["lessons"]}
    out: dict[str, float] = {
        "rule_name_words_in_message": sum(c["name_in_message"] for c in cases) / max(len(cases), 1)
    }
    for variant in VARIANTS:
        content, provenance = [], []
        for case in cases:
            query = set(keywords(case["queries"][variant]))
            lesson = by_id[case["expected"]]
            if query:
                content.append(len(query & set(keywords(lesson["content"]))) / len(query))
                provenance.append(len(query & set(keywords(lesson["learned_from"] or ""))) / len(query))
        out[f"{variant}: query words in lesson"] = sum(content) / max(len(content), 1)
        out[f"{variant}: query words in learned_from"] = sum(provenance) / max(len(provenance), 1)
    return out


# --------------------------------------------------------------------- the run


def load_domains(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Domain name → dataset: ``--dataset`` stands for the first domain when given."""
    import importlib

    found: dict[str, dict[str, Any]] = {}
    for number, name in enumerate(args.domains):
        if number == 0 and args.dataset:
            found[name] = json.loads(args.dataset.read_text("utf-8"))
        else:
            found[name] = importlib.import_module(DOMAINS[name]).load_dataset(args.cache_dir)
    return found


def dataset_summary(dataset: dict[str, Any], cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "source": dataset.get("source") or f"ruff {dataset['ruff_version']} rule documentation",
        "rules": dataset["rules"],
        "rules_without_example": dataset["rules_without_example"],
        "rules_with_example": dataset["rules_with_example"],
        "dropped_no_diagnostic": len(dataset["dropped_no_diagnostic"]),
        "dropped_rules": dataset["dropped_no_diagnostic"],
        "cases": len(cases),
        "lessons": len(dataset["lessons"]),
        "leakage": leakage(dataset, cases),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    cache_dir: Path = args.cache_dir
    domains = load_domains(args)
    first = args.domains[0]
    dataset = domains[first]
    cases = spread(dataset["cases"], args.cases)
    domain_cases = {name: spread(data["cases"], args.cases) for name, data in domains.items()}
    sizes: list[int] = args.sizes
    distractor_size: int = args.distractor_size
    needed = max([*sizes, distractor_size]) - len(dataset["lessons"])
    print(
        f"dataset: {len(dataset['lessons'])} lessons, {len(cases)} cases; {needed:,} distractors ...",
        file=sys.stderr,
    )
    # One list of distractors for every domain (it excludes the first domain's lessons).
    distractors = _ruffdocs.load_distractors(
        max(needed, 0), [lesson["content"] for lesson in dataset["lessons"]], cache_dir
    )
    results: dict[str, Any] = {
        "benchmark": "retrieval",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {
            "sizes": sizes,
            "distractor_size": distractor_size,
            "latency_queries": args.queries,
            "warmup_queries": args.warmup,
            "quality_k": QUALITY_K,
            "latency_k": LATENCY_K,
            "bank_cache": str(args.bank_cache) if args.bank_cache else None,
            "domains": args.domains,
        },
        "dataset": {**dataset_summary(dataset, cases), "distractors_available": len(distractors)},
        "domains": {name: dataset_summary(data, domain_cases[name]) for name, data in domains.items()},
        "quality": [],
        "latency": [],
        "lexical_reference": [],
        "feedback": [],
        "banks": [],
    }
    with tempfile.TemporaryDirectory(prefix="lessonbank-retrieval-") as tmp:
        workdir = Path(tmp)
        home = workdir / "home"
        vector_cache = None if args.no_vector_cache else cache_dir / "vectors.sqlite"
        embedders, skipped = usable_embedders(args.embedders, workdir, vector_cache)
        results["embedders"] = {
            "used": list(embedders),
            "names": {spec: embedder.name for spec, embedder in embedders.items()},
            "skipped": skipped,
        }
        # Lexical recall does not depend on the embedder: measured once, on banks without one.
        plans: list[tuple[str | None, tuple[str, ...]]] = [(None, ("lexical",))]
        plans += [(name, ("vector", "hybrid", OTHER_FUSION)) for name in embedders]
        # recall@5 on the rules-alone bank: the filtered check's reference (filled by its bank)
        rules_bank: dict[str, float] = {}
        for embedder_name, modes in plans:
            embedder = embedders.get(embedder_name or "")
            for domain, data in domains.items():
                main_domain = domain == first
                plan = bank_plan(sizes if main_domain else [], distractor_size)
                for size, provenance in plan:
                    lessons = lessons_for(data, distractors, size, provenance)
                    label = (
                        f"{domain}, {embedder_name or 'no embedder'}, {len(lessons):,} lessons, "
                        f"provenance {'on' if provenance else 'off'}"
                    )
                    print(f"{label}: import ...", file=sys.stderr)
                    bank, info = build_bank(lessons, embedder, workdir, args.bank_cache, home)
                    results["banks"].append(
                        {"domain": domain, "embedder": embedder_name, "provenance": provenance, **info}
                    )
                    try:
                        for mode in modes:
                            if size is None or size == distractor_size:
                                print(f"{label}: quality, {mode} ...", file=sys.stderr)
                                results["quality"].append(
                                    {
                                        "domain": domain,
                                        "embedder": embedder_name,
                                        "mode": mode,
                                        "provenance": provenance,
                                        "lessons": len(lessons),
                                        "distractors": len(lessons) - len(data["lessons"]),
                                        "metrics": quality(bank, domain_cases[domain], mode),
                                    }
                                )
                            if not main_domain:
                                continue
                            measure_main(bank, lessons, info, (embedder_name, mode, size, provenance), args,
                                         cases, results, rules_bank)  # fmt: skip
                    finally:
                        bank.close()
                    if size == distractor_size and not provenance and args.feedback:
                        mode = "lexical" if embedder is None else "hybrid"
                        print(f"{label}: feedback replay, {mode} ...", file=sys.stderr)
                        row = _feedback_replay.replay(
                            Path(info["path"]), NAMESPACE, embedder, domain_cases[domain], mode, home
                        )
                        results["feedback"].append({"domain": domain, "embedder": embedder_name, **row})
                    if args.bank_cache is None:
                        for leftover in workdir.glob("*.db*"):  # the bank, its WAL and its index snapshot
                            if leftover.is_dir():
                                shutil.rmtree(leftover)
                            else:
                                leftover.unlink()
    results["load_average_at_end"] = load_average()
    return results


def measure_main(
    bank: LessonBank,
    lessons: list[dict[str, Any]],
    info: dict[str, Any],
    where: tuple[str | None, str, int | None, bool],
    args: argparse.Namespace,
    cases: Sequence[dict[str, Any]],
    results: dict[str, Any],
    rules_bank: dict[str, float],
) -> None:
    """The first domain's other sections on one bank and mode: references, the slice check, latency."""
    embedder_name, mode, size, provenance = where
    if mode == "lexical" and provenance and size in args.reference_sizes:
        print(f"{len(lessons):,} lessons: lexical references (bm25s, exhaustive) ...", file=sys.stderr)
        results["lexical_reference"].append(
            lexical_reference(bank, lessons, cases, args, rules_alone=rules_bank)
        )
    if mode == "lexical" and size is None and provenance:
        rules_bank.update(slice_recall(bank, cases))
    if size in args.sizes and provenance and mode != OTHER_FUSION:
        print(f"{len(lessons):,} lessons: latency, {mode} ...", file=sys.stderr)
        results["latency"].append(
            {
                "embedder": embedder_name,
                "mode": mode,
                "lessons": len(lessons),
                "import": info.get("import"),
                **latency(bank, cases, mode, args.queries, args.warmup),
                "load_average_after": load_average(),
            }
        )


def spread(cases: list[dict[str, Any]], count: int | None) -> list[dict[str, Any]]:
    """``count`` cases taken evenly across the list (which is in rule order, so every linter is sampled)."""
    if not count or count >= len(cases):
        return cases
    return [cases[i * len(cases) // count] for i in range(count)]


def bank_plan(sizes: Sequence[int], distractor_size: int) -> list[tuple[int | None, bool]]:
    """Which banks to build: (size or None for the rules alone, provenance). Quality needs the rule bank and
    the distractor-size bank, each with and without provenance; latency needs every size, with provenance."""
    plan: list[tuple[int | None, bool]] = [
        (None, True),
        (None, False),
        (distractor_size, True),
        (distractor_size, False),
    ]
    plan += [(size, True) for size in sizes if size != distractor_size]
    return plan


def latency(
    bank: LessonBank, cases: Sequence[dict[str, Any]], mode: str, count: int, warmup: int
) -> dict[str, Any]:
    queries = [case["queries"]["message+code"] for case in cases]
    inputs = [queries[i % len(queries)] for i in range(count + warmup)]
    # Earlier phases embedded these same queries: start from an empty query cache, so every timed
    # query pays for its embedding, as a new task does.
    embedder = bank.embedder
    cache = getattr(getattr(embedder, "inner", embedder), "query_cache", None)
    if cache is not None:
        cache.clear()
    samples = time_each(lambda q: recall_ids(bank, q, LATENCY_K, mode), inputs, warmup)
    return {"k": LATENCY_K, **summarize_ns(samples)}


def slice_recall(
    bank: LessonBank, cases: Sequence[dict[str, Any]], agent: str | None = None
) -> dict[str, float]:
    """recall@5 of the BM25 top 5 per query variant, filtered to ``agent``'s lessons when given (BM25
    alone: the blend's use counts differ between banks that served different queries before)."""
    from lessonbank.ports import LessonQuery

    query = LessonQuery(NAMESPACE, agent=agent)
    out = {}
    for variant in VARIANTS:
        found = 0
        for case in cases:
            hits = bank.retriever.lexical(case["queries"][variant], query, LATENCY_K)
            found += case["expected"] in [hit.lesson_id for hit in hits]
        out[variant] = found / len(cases)
    return out


def long_queries(cases: Sequence[dict[str, Any]], words: int) -> list[str]:
    """Queries of ``words`` distinct keywords, made of consecutive cases' code and messages."""
    out, current = [], []
    for case in cases:
        current += [w for w in keywords(case["queries"]["message+code"]) if w not in current]
        if len(current) >= words:
            out.append(" ".join(current[:words]))
            current = []
    return out or [" ".join(current)]  # a dataset too small for one: every word it has


def lexical_reference(
    bank: LessonBank,
    lessons: list[dict[str, Any]],
    cases: Sequence[dict[str, Any]],
    args: argparse.Namespace,
    *,
    rules_alone: dict[str, float],
) -> dict[str, Any]:
    """The bank's lexical recall beside bm25s and the exhaustive scorer on the same lessons and queries:
    recall@5, agreement with the exact top 5, latency, index size; and the 1%-slice filter check."""
    from _lexical_reference import Bm25sReference, Exhaustive, overlap_with_exact, query_of
    from lessonbank.models import LESSON_STATUSES
    from lessonbank.ports import LessonQuery
    from lessonbank.retrieval.lexical_index import LexicalIndex
    from lessonbank.stores.lexical import LEXICAL_SPACE

    # The lessons as stored (redacted, some quarantined): every one counts in the figures, only the
    # live ones may be recalled, by the bank and by the references alike.
    every = LessonQuery(NAMESPACE, statuses=LESSON_STATUSES, live_only=False)
    stored = bank.store.list_lessons(every, limit=len(lessons) + 1)
    fields = [{"content": s.content, "tags": s.tags, "learned_from": s.learned_from} for s in stored]
    ids = [s.id for s in stored]
    live = [s.status == "active" for s in stored]
    # The references are plain Python (exhaustive) and a second in-memory index (bm25s): past
    # REFERENCE_MAX lessons only the bank is timed.
    full = len(lessons) <= REFERENCE_MAX
    exhaustive = Exhaustive(fields, ids) if full else None
    reference = Bm25sReference(fields, ids, live) if full else None
    allowed = {lesson_id for lesson_id, ok in zip(ids, live, strict=True) if ok}
    query = LessonQuery(NAMESPACE)
    row: dict[str, Any] = {"lessons": len(lessons), "quality": {}, "latency": {}}
    for variant in VARIANTS if exhaustive is not None and reference is not None else ():
        counts = {"recall (blended)": 0, "bm25 top 5": 0, "exhaustive": 0, "bm25s": 0}
        held_out = {"held-out bm25 top 5": 0, "held-out bm25s": 0}  # the odd cases: BM25's constants
        agreement = []  # were chosen on the even ones
        for number, case in enumerate(cases):
            text, expected = case["queries"][variant], case["expected"]
            ours = [c.lesson_id for c in bank.retriever.lexical(text, query, LATENCY_K)]
            scores = exhaustive.scores(query_of(text))
            exact = sorted(((i, v) for i, v in scores.items() if i in allowed), key=lambda item: -item[1])
            exact = exact[:LATENCY_K]
            agreement.append(overlap_with_exact(ours, exact, scores))
            counts["recall (blended)"] += expected in recall_ids(bank, text, LATENCY_K, "lexical")
            counts["bm25 top 5"] += expected in ours
            counts["exhaustive"] += expected in [lesson_id for lesson_id, _ in exact]
            counts["bm25s"] += expected in reference.top_ids(text, LATENCY_K)
            if number % 2:
                held_out["held-out bm25 top 5"] += expected in ours
                held_out["held-out bm25s"] += expected in reference.top_ids(text, LATENCY_K)
        row["quality"][variant] = {name: found / len(cases) for name, found in counts.items()}
        row["quality"][variant] |= {name: found / len(cases[1::2]) for name, found in held_out.items()}
        row["quality"][variant]["top-5 agreement with exhaustive"] = sum(agreement) / len(agreement)
        row["quality"][variant]["worst query agreement"] = min(agreement)
    queries = [case["queries"]["message+code"] for case in cases]
    inputs = [queries[i % len(queries)] for i in range(args.queries + args.warmup)]
    row["latency"]["lessonbank"] = summarize_ns(
        time_each(lambda q: recall_ids(bank, q, LATENCY_K, "lexical"), inputs, args.warmup)
    )
    longest = long_queries(cases, 64)
    long_inputs = [longest[i % len(longest)] for i in range(args.queries + args.warmup)]
    row["latency"]["lessonbank, 64 words"] = summarize_ns(
        time_each(lambda q: recall_ids(bank, q, LATENCY_K, "lexical"), long_inputs, args.warmup)
    )
    row["pruning"] = pruned_against_exhaustive(bank, [*queries, *longest])
    if reference is not None:
        row["latency"]["bm25s"] = summarize_ns(
            time_each(lambda q: reference.top_ids(q, LATENCY_K), inputs, args.warmup)
        )
        row["latency"]["bm25s, 64 words"] = summarize_ns(
            time_each(lambda q: reference.top_ids(q, LATENCY_K), long_inputs, args.warmup)
        )
    index = bank.retriever.lexical_index(NAMESPACE)
    start = time.perf_counter()
    LexicalIndex(bank.store, NAMESPACE).sync()  # what a new process pays on its first recall
    load_s = time.perf_counter() - start
    conn = bank.store.dialect.connection()  # type: ignore[attr-defined]
    pages = dict(
        conn.execute(
            "SELECT CASE WHEN name LIKE 'lessons_fts%' THEN 'fts5' WHEN name LIKE '%vectors%' THEN 'vectors' "
            "ELSE 'other' END, sum(pgsize) FROM dbstat GROUP BY 1"
        ).fetchall()
    )
    term_bytes = conn.execute(
        "SELECT sum(length(vector)) FROM lesson_vectors WHERE model = ?", (LEXICAL_SPACE,)
    ).fetchone()[0]
    row["index"] = {
        "memory_mb": round(index.memory_bytes() / 2**20, 1) if index is not None else None,
        "term_vectors_mb": round((term_bytes or 0) / 2**20, 1),
        "vector_table_on_disk_mb": round(pages.get("vectors", 0) / 2**20, 1),
        "fts5_on_disk_mb": round(pages.get("fts5", 0) / 2**20, 1),
        "file_mb": round(sum(pages.values()) / 2**20, 1),
        "index_load_s": round(load_s, 2),
        "bm25s_index_s": round(reference.index_seconds, 2) if reference is not None else None,
    }
    row["filtered_slice"] = {
        "share": sum(1 for lesson in lessons if lesson.get("agent") == RULES_AGENT) / len(lessons),
        "filtered, this bank": slice_recall(bank, cases, RULES_AGENT),
        "slice alone": rules_alone,
    }
    return row


# --------------------------------------------------------------------- report


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _mode_label(row: dict[str, Any]) -> str:
    return row["mode"] if row["embedder"] is None else f"{row['mode']} ({row['embedder']})"


def report(results: dict[str, Any]) -> str:
    data = results["dataset"]
    parts = [
        f"Dataset: {data['source']}: {data['rules']} rules, {data['rules_with_example']} with a Python example, "
        f"{data['dropped_no_diagnostic']} dropped (ruff reports nothing on its own example), "
        f"{data['cases']} cases over {data['lessons']} lessons.",
        markdown_table(
            ["leakage (mean share)", "value"], [[k, f"{v:.2f}"] for k, v in data["leakage"].items()]
        ),
    ]
    for domain in dict.fromkeys(row.get("domain", "ruff") for row in results["quality"]):
        rows_of_domain = [row for row in results["quality"] if row.get("domain", "ruff") == domain]
        for lessons in sorted({row["lessons"] for row in rows_of_domain}):
            rows = [row for row in rows_of_domain if row["lessons"] == lessons]
            distractors = rows[0]["distractors"]
            title = f"Quality, {domain}, {lessons:,} lessons" + (
                f" ({distractors:,} distractors)" if distractors else " (rules alone)"
            )
            header = ["mode", "provenance"]
            for variant in VARIANTS:
                header += [f"{variant} R@1", "R@5", "MRR@10"]
            body = []
            for row in rows:
                cells = [_mode_label(row), "on" if row["provenance"] else "off"]
                for variant in VARIANTS:
                    m = row["metrics"][variant]
                    cells += [f"{m['recall@1']:.3f}", f"{m['recall@5']:.3f}", f"{m['mrr@10']:.3f}"]
                body.append(cells)
            parts.append(f"{title}\n\n" + markdown_table(header, body))
    parts += cold_case_report(results)
    parts += feedback_report(results.get("feedback", []))
    if results["latency"]:
        sizes = sorted({row["lessons"] for row in results["latency"]})
        labels = list(dict.fromkeys(_mode_label(row) for row in results["latency"]))
        body = []
        for label in labels:
            cells = [label]
            for size in sizes:
                row = next(
                    (r for r in results["latency"] if _mode_label(r) == label and r["lessons"] == size), None
                )
                cells.append(f"{row['p50_ms']:.2f} / {row['p99_ms']:.2f}" if row else "")
            body.append(cells)
        header = ["recall(k=5) p50 / p99 ms", *(f"{size:,}" for size in sizes)]
        parts.append("Latency (query embedding included)\n\n" + markdown_table(header, body))
    parts += reference_report(results.get("lexical_reference", []))
    imports = [b for b in results["banks"] if b.get("import")]
    if imports:
        body = [
            [
                b["embedder"] or "none",
                f"{b['lessons']:,}",
                "on" if b["provenance"] else "off",
                f"{b['import']['seconds']:.1f}",
                f"{b['import']['lessons_per_s']:,.0f}",
                str(b.get("embedding", {}).get("computed", "")),
                str(b.get("embedding", {}).get("from_cache", "")),
                str(b.get("embedding", {}).get("computed_per_s", "")),
            ]
            for b in imports
        ]
        parts.append(
            "Import (embeds when an embedder is set)\n\n"
            + markdown_table(
                [
                    "embedder",
                    "lessons",
                    "provenance",
                    "seconds",
                    "lessons/s",
                    "embedded",
                    "cached",
                    "embedded/s",
                ],
                body,
            )
        )
    if results["embedders"]["skipped"]:
        parts.append(
            "Skipped embedders: " + "; ".join(f"{k}: {v}" for k, v in results["embedders"]["skipped"].items())
        )
    return "\n\n".join(parts)


def cold_case_report(results: dict[str, Any]) -> list[str]:
    """Code-only queries on the distractor-size bank without provenance, per domain: every case and the
    held-out half."""
    size = results["config"]["distractor_size"]
    rows = [
        r for r in results["quality"] if not r["provenance"] and r["distractors"] and r["lessons"] == size
    ]
    if not rows:
        return []
    body = []
    for row in rows:
        every, held = row["metrics"]["code"], row["metrics"]["code"]["held-out"]
        body.append([row.get("domain", "ruff"), _mode_label(row), str(held["cases"]),
                     *(f"{held[m]:.3f}" for m in ("recall@1", "recall@5", "mrr@10")),
                     f"{every['recall@5']:.3f}"])  # fmt: skip
    header = ["domain", "mode", "held-out cases", "R@1", "R@5", "MRR@10", "R@5, every case"]
    return [f"Cold case: code-only queries, provenance off, {size:,} lessons (held-out half)\n\n"
            + markdown_table(header, body)]  # fmt: skip


def feedback_report(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Before and after replaying feedback, on queries the feedback never saw."""
    if not rows:
        return []
    body = []
    for row in rows:
        for part, figures in row["figures"].items():
            before, after = figures["before"], figures["after"]
            control = figures["attribution only"]
            body.append([row["domain"], _mode_label(row), part, str(before["cases"]),
                         *(f"{before[m]:.3f} → {control[m]:.3f} → {after[m]:.3f}" for m in ("recall@1", "recall@5", "mrr@10"))])  # fmt: skip
    header = ["domain", "mode", "scored on", "queries", "R@1", "R@5", "MRR@10"]
    episodes = ", ".join(
        f"{r['domain']} {r['mode']}: {r['successes']}/{r['feedback_episodes']}" for r in rows
    )
    return [f"Feedback replay, code-only queries, provenance off: before → outcome attribution only → with "
            f"learning from use (successful feedback episodes: {episodes})\n\n"
            + markdown_table(header, body)]  # fmt: skip


def pruned_against_exhaustive(bank: LessonBank, texts: Sequence[str]) -> dict[str, Any]:
    """The index's pruned top 5 beside its exhaustive scorer's for every query, through the bank's
    filters: how many differ (ids, scores or order; it must be none), and each one's latency."""
    from lessonbank.codeterms import query_words
    from lessonbank.ports import LessonQuery
    from lessonbank.retrieval.hybrid import MAX_QUERY_TERMS

    index = bank.retriever.lexical_index(NAMESPACE)
    if index is None:
        return {"queries": 0, "top 5 differ": None}
    query = LessonQuery(NAMESPACE)
    index.sync()  # loaded and up to date before the first timed search
    differ, samples = 0, {"pruned": [], "exhaustive": []}
    for text in dict.fromkeys(texts):
        terms = query_words(text, MAX_QUERY_TERMS)  # as the retriever passes them
        found = {}
        for mode, exhaustive in (("pruned", False), ("exhaustive", True)):
            start = time.perf_counter_ns()
            hits = index.search(terms, LATENCY_K, lambda ids: bank.store.candidates(query, ids), query,
                                exhaustive=exhaustive)  # fmt: skip
            samples[mode].append(time.perf_counter_ns() - start)
            found[mode] = [(c.lesson_id, c.relevance) for c in hits]
        differ += found["pruned"] != found["exhaustive"]
    return {"queries": len(samples["pruned"]), "top 5 differ": differ,
            **{f"{mode} index search": summarize_ns(values) for mode, values in samples.items()}}  # fmt: skip


def reference_report(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Lexical recall beside bm25s and the exhaustive scorer, per bank size."""
    if not rows:
        return []
    measures = ["recall (blended)", "bm25 top 5", "exhaustive", "bm25s", "held-out bm25 top 5", "held-out bm25s",
                "top-5 agreement with exhaustive", "worst query agreement"]  # fmt: skip
    body = []
    for row in rows:
        for variant, figures in row["quality"].items():
            body.append([f"{row['lessons']:,}", variant, *(f"{figures[m]:.3f}" for m in measures)])
    parts = ["Lexical recall@5 beside the references (same lessons, same queries)\n\n"
             + markdown_table(["lessons", "query", *measures], body)]  # fmt: skip
    body = []
    for row in rows:
        for name, figures in row["latency"].items():
            body.append([f"{row['lessons']:,}", name, f"{figures['p50_ms']:.2f}", f"{figures['p99_ms']:.2f}"])
    parts.append("Lexical latency, k=5\n\n" + markdown_table(["lessons", "system", "p50 ms", "p99 ms"], body))
    body = [[f"{row['lessons']:,}", str(row["pruning"]["queries"]), str(row["pruning"]["top 5 differ"]),
             *(f"{row['pruning'][f'{mode} index search'][f'p{q}_ms']:.2f}" for mode in ("pruned", "exhaustive") for q in (50, 99))]
            for row in rows if row.get("pruning", {}).get("queries")]  # fmt: skip
    parts.append("Pruned top 5 against the exhaustive scorer (same index, same filters)\n\n"
                 + markdown_table(["lessons", "queries", "top 5 differ", "pruned p50 ms", "pruned p99 ms",
                                   "exhaustive p50 ms", "exhaustive p99 ms"], body))  # fmt: skip
    body = [[f"{row['lessons']:,}", *(str(v) for v in row["index"].values())] for row in rows]
    parts.append("Lexical index size\n\n" + markdown_table(["lessons", *rows[0]["index"]], body))
    body = []
    for row in rows:
        data = row["filtered_slice"]
        for variant in VARIANTS:
            body.append([f"{row['lessons']:,}", f"{data['share']:.2%}", variant,
                         f"{data['filtered, this bank'][variant]:.3f}", f"{data['slice alone'].get(variant, float('nan')):.3f}"])  # fmt: skip
    parts.append("Filtered recall@5 on the rule lessons' slice\n\n"
                 + markdown_table(["lessons", "slice", "query", "filtered in this bank", "slice alone"], body))  # fmt: skip
    return parts


# --------------------------------------------------------------------- entry point


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--embedders",
        default=None,
        help=f"comma-separated, of {', '.join(CANDIDATE_EMBEDDERS)} (default: those installed)",
    )
    parser.add_argument("--sizes", default=None, help="latency bank sizes (default 1000,10000,100000)")
    parser.add_argument(
        "--distractor-size",
        type=int,
        default=None,
        help=f"bank size for quality with distractors (default {DISTRACTOR_SIZE})",
    )
    parser.add_argument(
        "--queries",
        type=int,
        default=None,
        help=f"timed queries per mode and size (default {LATENCY_QUERIES})",
    )
    parser.add_argument("--cases", type=int, default=None, help="use only N cases, spread over all rules")
    parser.add_argument(
        "--domains",
        default=None,
        help=f"comma-separated, of {', '.join(DOMAINS)}; the first gets latency and the references "
        "(default: all; with --quick or --dataset: the first only)",
    )
    parser.add_argument(
        "--reference-sizes",
        default=None,
        help="bank sizes where lexical recall is compared with bm25s and the exhaustive scorer "
        "(default 10000,100000; none to skip)",
    )
    parser.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="a dataset JSON (default: built from the installed ruff, cached)",
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=_ruffdocs.CACHE_DIR, help="dataset and distractor cache"
    )
    parser.add_argument(
        "--no-vector-cache",
        action="store_true",
        help="embed every lesson again instead of reusing vectors cached in --cache-dir",
    )
    parser.add_argument(
        "--bank-cache",
        type=Path,
        default=None,
        help="keep built banks (and their vectors) here and reuse them",
    )
    parser.add_argument(
        "--no-feedback",
        dest="feedback",
        action="store_false",
        help="skip the feedback replay (on a copy of each domain's bank without provenance)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON output (default {DEFAULT_OUT})")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 500-lesson banks, 100 cases, 50 timed queries"
    )
    args = parser.parse_args(argv)
    args.embedders = (
        [e.strip() for e in args.embedders.split(",") if e.strip()]
        if args.embedders is not None
        else list(CANDIDATE_EMBEDDERS)
    )
    quick_size = 1_000 if args.quick else None
    if args.sizes:
        args.sizes = [int(part.replace("_", "")) for part in args.sizes.split(",") if part.strip()]
    else:
        args.sizes = [quick_size] if quick_size else list(DEFAULT_SIZES)
    args.distractor_size = args.distractor_size or quick_size or DISTRACTOR_SIZE
    if args.reference_sizes == "none":
        args.reference_sizes = []
    elif args.reference_sizes:
        args.reference_sizes = [
            int(part.replace("_", "")) for part in args.reference_sizes.split(",") if part.strip()
        ]
    else:
        args.reference_sizes = [quick_size] if quick_size else list(REFERENCE_SIZES)
    args.queries = args.queries or (50 if args.quick else LATENCY_QUERIES)
    args.warmup = 5 if args.quick else WARMUP_QUERIES
    if args.quick and args.cases is None:
        args.cases = 100
    if args.domains:
        args.domains = [d.strip() for d in args.domains.split(",") if d.strip()]
        unknown = [d for d in args.domains if d not in DOMAINS]
        if unknown or not args.domains:
            parser.error(f"unknown domain(s) {unknown}; use {', '.join(DOMAINS)}")
    else:
        args.domains = [next(iter(DOMAINS))] if args.quick or args.dataset else list(DOMAINS)
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(report(results))
    print(f"\nJSON: {args.out}")
    return results


if __name__ == "__main__":
    main()
