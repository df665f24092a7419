"""The consolidation pre-pass (``services/consolidation/prepass.find_candidates``): which clusters of near
duplicates it proposes on real text, and what it costs on 10k and 100k lessons.

Clusters on real text:
- **ruff rules**: one lesson per ruff rule, its prose advice (``write_dedup.rule_lessons()``: 950 distinct
  texts). Every text is a rule of its own, many of them siblings from one template ("whitespace *after*
  keywords" / "*before* keywords"): the ideal is 0 clusters;
- **reflections**: every self-reflection GPT-4 wrote in ``../shared/data/reflexion-gpt4-runs.jsonl``.
  Reflections of the same problem are the true duplicates (often one diagnosis restated, sometimes a
  new one): a cluster inside one problem is right, a cluster that joins two problems is wrong. Reported:
  clusters, those joining problems, and the share of same-problem pairs that end in one cluster.

Each set is run through the pre-pass without vectors (the same lesson retyped only), with each
embedder's vectors at cosine 0.92 (the default), 0.94 and 0.96 (the sibling guard applied), and through the word rule the pre-pass
does *not* use — token Jaccard ≥ 0.6 within blocks that share one of a lesson's 3 rarest keywords — to
show what it would propose.

Cost: ``find_candidates`` on 10k and 100k lessons from the real-text corpus (``_corpus.make_lessons``),
one scope (the worst case: every lesson is compared with every other), with 1% retyped copies and 1%
decayed lessons planted; without vectors, and with 384-d float32 vectors (random, each retyped copy
near its original). Seconds per call (wall and CPU: on a shared machine the CPU seconds are the
comparable figure), and the peak memory the call allocates (tracemalloc, run again apart from the timed
call; the lessons and vectors handed in are not counted: 100k × 384 float32 is 153.6 MB of input).
The corpus remixes reflections' sentences (a situation and a correction, each pair once), so the cost
table also says how many clusters join lessons whose sentences differ, and how many of those join
lessons written about other problems (:func:`remix_quality`).

    .venv/bin/python bench/consolidation_prepass.py                     # minilm vectors, 10k and 100k
    .venv/bin/python bench/consolidation_prepass.py --embedders none --sizes 10000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

import _corpus
from lessonbank.models import Lesson
from lessonbank.retrieval.embedders import make_embedder
from lessonbank.services.consolidation.prepass import Candidates, find_candidates
from lessonbank.text import jaccard, keywords, words

RESULTS = Path(__file__).resolve().parent / "results"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
DIM = 384
RARE_KEYWORDS = 3
JACCARD = 0.6
COSINES = (0.92, 0.94, 0.96)  # 0.92 is find_candidates' default (write-time dedup's)
MAX_BLOCK = 500  # a keyword shared by more lessons than this is not rare: no block


def lessons_of(texts: Sequence[str]) -> list[Lesson]:
    return [
        Lesson(id=f"l{n:06d}", content=text, created_at=NOW - timedelta(days=1))
        for n, text in enumerate(texts)
    ]


def jaccard_clusters(lessons: Sequence[Lesson]) -> list[list[str]]:
    """The rejected word rule: token Jaccard ≥ 0.6 between lessons sharing one of their rarest keywords."""
    terms = {lesson.id: keywords(lesson.content) for lesson in lessons}
    frequency = Counter(term for found in terms.values() for term in found)
    blocks: dict[str, list[str]] = defaultdict(list)
    for lesson_id, found in terms.items():
        for term in sorted(found, key=lambda t: (frequency[t], t))[:RARE_KEYWORDS]:
            blocks[term].append(lesson_id)
    tokens = {lesson.id: set(words(lesson.content)) for lesson in lessons}
    parent = {lesson.id: lesson.id for lesson in lessons}

    def find(item: str) -> str:
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    for members in blocks.values():
        if len(members) > MAX_BLOCK:
            continue
        for a, b in combinations(members, 2):
            if jaccard(tokens[a], tokens[b]) >= JACCARD:
                parent[find(a)] = find(b)
    groups: dict[str, list[str]] = defaultdict(list)
    for lesson_id in parent:
        groups[find(lesson_id)].append(lesson_id)
    return [sorted(group) for group in groups.values() if len(group) > 1]


def score_clusters(clusters: list[list[str]], group_of: dict[str, int] | None) -> dict[str, Any]:
    """Clusters, and for grouped texts those joining two groups and the same-group pairs joined."""
    row: dict[str, Any] = {"clusters": len(clusters), "lessons_in_clusters": sum(len(c) for c in clusters)}
    if group_of is None:
        return row
    sizes = Counter(group_of.values())
    true_pairs = sum(n * (n - 1) // 2 for n in sizes.values())
    joined = sum(1 for cluster in clusters for a, b in combinations(cluster, 2) if group_of[a] == group_of[b])
    row["joining_problems"] = sum(len({group_of[i] for i in cluster}) > 1 for cluster in clusters)
    row["same_problem_pairs"] = true_pairs
    row["same_problem_pairs_joined"] = joined
    return row


def quality(embedders: list[str]) -> list[dict[str, Any]]:
    runs = [json.loads(line) for line in _corpus.DATA_FILE.read_text("utf-8").splitlines() if line.strip()]
    reflections = [(n, " ".join(text.split())) for n, run in enumerate(runs) for text in run["reflections"]]
    sets: list[tuple[str, list[str], list[int] | None]] = [
        ("reflections", [text for _, text in reflections], [n for n, _ in reflections])
    ]
    try:
        from write_dedup import rule_lessons

        sets.insert(0, ("ruff rules", [text for _, text in rule_lessons()], None))
    except Exception as exc:  # the ruff rule texts need the dev group's ruff
        print(f"ruff rules skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
    rows = []
    for name, texts, groups in sets:
        lessons = lessons_of(texts)
        group_of = (
            None if groups is None else {lesson.id: g for lesson, g in zip(lessons, groups, strict=True)}
        )
        rule_rows: list[tuple[str, list[list[str]]]] = [
            ("jaccard >= 0.6 in rare-keyword blocks (not used)", jaccard_clusters(lessons)),
            ("pre-pass, no vectors", find_candidates(lessons, NOW).clusters),
        ]
        for embedder_name in embedders:
            embedder = make_embedder(embedder_name)
            assert embedder is not None
            matrix = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
            vectors = {lesson.id: matrix[n] for n, lesson in enumerate(lessons)}
            for cosine in COSINES:
                found = find_candidates(lessons, NOW, vectors=vectors, cosine=cosine)
                rule_rows.append((f"pre-pass, {embedder.name} vectors at {cosine}", found.clusters))
        for rule, clusters in rule_rows:
            rows.append(
                {"set": name, "lessons": len(texts), "rule": rule, **score_clusters(clusters, group_of)}
            )
    return rows


def retype(text: str) -> str:
    out = text[:1].lower() + text[1:]
    return out.rstrip(".") if out.endswith(".") else out + "."


Remix = dict[str, tuple[frozenset[str], frozenset[int]]]


def corpus(size: int, seed: int = 7) -> tuple[list[Lesson], dict[str, np.ndarray], Remix]:
    """``size`` lessons of one scope (1% retyped copies, 1% decayed), a vector for each, and what each
    lesson is made of (:func:`remixed`)."""
    rng = random.Random(seed)
    planted = size // 100
    source = _corpus.load_source(seed)
    made = _corpus.make_lessons(source, size - planted, seed)
    tasks_of: dict[str, set[int]] = defaultdict(set)
    for sentence in source.lesson_sentences:
        tasks_of[sentence.text].add(sentence.task)
    lessons = [
        Lesson(
            id=f"l{n:06d}",
            content=item["content"],
            tags=item["tags"],
            task_type=item["task_type"],
            created_at=NOW - timedelta(days=300 if n % 100 == 50 else rng.randint(0, 20)),
            importance=0.1 if n % 100 == 50 else 0.5,
        )
        for n, item in enumerate(made)
    ]
    generator = np.random.default_rng(seed)
    matrix = generator.standard_normal((size, DIM), dtype=np.float32)
    for k in range(planted):
        original = lessons[(k * 97) % len(made)]
        copy = original.model_copy(update={"id": f"c{k:06d}", "content": retype(original.content)})
        lessons.append(copy)
        matrix[len(made) + k] = matrix[int(original.id[1:])] + 0.05 * generator.standard_normal(
            DIM, dtype=np.float32
        )
    made_of = {lesson.id: remixed(lesson.content, tasks_of) for lesson in lessons[: len(made)]}
    for k in range(planted):
        made_of[f"c{k:06d}"] = made_of[lessons[(k * 97) % len(made)].id]
    return lessons, {lesson.id: matrix[n] for n, lesson in enumerate(lessons)}, made_of


def remixed(content: str, tasks_of: Mapping[str, set[int]]) -> tuple[frozenset[str], frozenset[int]]:
    """A corpus lesson's two sentences (situation, correction) and the tasks (problems) they were written
    about. ``_corpus`` writes each (situation, correction) pair once, so two lessons are one lesson only
    when their sentences are the same (a retyped copy, or the two sentences in the other order); two
    lessons of the same problems whose sentences differ are two diagnoses of one problem (what the
    labelled set's successive reflections are); lessons of different problems are two lessons."""
    for n in range(1, len(content)):
        if content[n - 1] in ".!?" and content[n] == " ":
            first, second = content[:n], content[n + 1 :]
            if first in tasks_of and second in tasks_of:
                tasks = frozenset(tasks_of[first]) | frozenset(tasks_of[second])
                return frozenset((first, second)), tasks
    return frozenset((content,)), frozenset()


def remix_quality(clusters: Sequence[Sequence[str]], made_of: Remix) -> dict[str, int]:
    """Clusters of the remixed corpus joining lessons whose sentences differ, and of those, the ones
    joining lessons written about different problems (wrong whatever the convention)."""
    other_sentences = [c for c in clusters if len({made_of[i][0] for i in c}) > 1]
    other_problems = [c for c in other_sentences if len({made_of[i][1] for i in c}) > 1]
    return {"joining_other_sentences": len(other_sentences), "joining_other_problems": len(other_problems)}


def measure(call: Callable[[], Candidates]) -> tuple[float, float, float, Candidates]:
    """Seconds of one call and the CPU seconds it used (the same work on a loaded machine: the machine's
    other work stretches the first, hardly the second), then the peak MB another call allocates."""
    started, cpu = time.perf_counter(), time.process_time()
    found = call()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    tracemalloc.start()
    call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, cpu, peak / 1e6, found


def cost(sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        lessons, vectors, made_of = corpus(size)
        for mode in ("words", "vectors"):
            given = vectors if mode == "vectors" else None
            seconds, cpu, peak_mb, found = measure(
                lambda given=given, lessons=lessons: find_candidates(lessons, NOW, vectors=given)
            )
            rows.append(
                {
                    "lessons": size,
                    "mode": mode,
                    "seconds": round(seconds, 2),
                    "cpu_seconds": round(cpu, 2),
                    "peak_mb": round(peak_mb, 1),
                    "clusters": len(found.clusters),
                    "archive": len(found.archive),
                    **remix_quality(found.clusters, made_of),
                    "counts": found.counts,
                }
            )
            print(
                f"  {size} {mode}: {seconds:.2f} s ({cpu:.2f} s CPU), {peak_mb:.1f} MB",
                file=sys.stderr,
                flush=True,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--embedders", default="minilm", help="comma-separated, for the clusters; 'none' for none"
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--out", type=Path, default=RESULTS / "consolidation_prepass.json")
    args = parser.parse_args()
    embedders = [name for name in args.embedders.split(",") if name.strip() and name != "none"]
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]

    clusters = quality(embedders)
    print(
        "| set | lessons | rule | clusters | lessons in them | joining problems | same-problem pairs joined |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in clusters:
        joined = (
            f"{row['same_problem_pairs_joined']} / {row['same_problem_pairs']}"
            if "same_problem_pairs" in row
            else "–"
        )
        print(
            f"| {row['set']} | {row['lessons']} | {row['rule']} | {row['clusters']} | "
            f"{row['lessons_in_clusters']} | {row.get('joining_problems', '–')} | {joined} |"
        )
    timings = cost(sizes)
    print(
        "\n| lessons | vectors | seconds | CPU seconds | peak MB | clusters | other sentences | other problems "
        "| archive | pairs (marks / words / vectors) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in timings:
        counts = row["counts"]
        print(
            f"| {row['lessons']} | {'384-d' if row['mode'] == 'vectors' else 'none'} | {row['seconds']:.2f} | "
            f"{row['cpu_seconds']:.2f} | {row['peak_mb']:.1f} | {row['clusters']} | "
            f"{row['joining_other_sentences']} | {row['joining_other_problems']} | {row['archive']} | "
            f"{counts['marks']} / {counts['words']} / {counts['vectors']} |"
        )
    report = {
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "clusters": clusters,
        "cost": timings,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
