"""Where the relevance floor sits: recall@5 with and without it, and unrelated queries answered with nothing.

A lesson found by its vector alone (no query word matched it) is dropped when its cosine is below the
retriever's ``vector_floor``. Per domain of ``retrieval.py`` (ruff, refurb, sqlfluff: rule lessons with
their provenance) and per embedder, for each floor: hybrid recall@5 over both query variants on the
tuning half of the cases (the even ones) and on the held-out half (the odd ones), and how many of a set of
off-topic queries (cooking, sports, travel, ...; the same split) come back empty. The floor is chosen
on the tuning halves (:func:`choose`), then reported on the held-out halves.

    .venv/bin/python bench/relevance_floor.py                         # minilm; every domain
    .venv/bin/python bench/relevance_floor.py --embedders minilm,static --floors 0,0.1,0.2,0.3

Prints markdown tables and writes JSON (default ``bench/results/relevance_floor.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _ruffdocs
from core import machine_info
from lessonbank import LessonBank
from lessonbank.retrieval.embedders.base import QueryCache
from retrieval import DOMAINS, VARIANTS, build_bank, lessons_for, load_domains, usable_embedders

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "relevance_floor.json"
NO_FLOOR = -1.0  # every cosine passes
FLOORS = (NO_FLOOR, 0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
K = 5
QUERY_CACHE = 16_384

# Tasks nobody would ask a linter's lessons about: each should come back empty.
OFF_TOPIC = (
    "bake a chocolate cake for a birthday",
    "how long should I boil an egg for a soft yolk",
    "recipe for a vegetarian lasagna with spinach",
    "best way to season a cast iron pan",
    "make sourdough starter from scratch",
    "what wine goes with grilled salmon",
    "how to brew pour over coffee at home",
    "marinate chicken thighs overnight for the barbecue",
    "who won the football world cup in 2014",
    "train for a first marathon in sixteen weeks",
    "rules of cricket for beginners",
    "improve my tennis backhand slice",
    "how many players are on a basketball team",
    "stretching routine after a long bike ride",
    "pick a good pair of hiking boots for the alps",
    "best time of year to visit japan for cherry blossoms",
    "pack light for a two week trip to italy",
    "cheap flights from london to lisbon in may",
    "what to see in three days in barcelona",
    "do I need a visa to travel to brazil",
    "book a hotel near the beach in croatia",
    "prune tomato plants in the greenhouse",
    "when to plant tulip bulbs in autumn",
    "get rid of aphids on roses naturally",
    "learn to play the guitar chords for a folk song",
    "tune a piano at home",
    "write a birthday card for my grandmother",
    "plan a surprise party for a friend",
    "how to knit a scarf for winter",
    "choose a name for a golden retriever puppy",
    "house plants that survive low light",
    "how to fold a fitted sheet",
    "remove a red wine stain from a carpet",
    "save money on the weekly grocery shop",
    "what is a good savings rate for retirement",
    "how to change a flat tyre on a bicycle",
    "paint a bedroom wall without streaks",
    "meditation for better sleep at night",
    "the history of the roman empire in short",
    "why is the sky blue at noon and red at sunset",
)


def recall_at_5(bank: LessonBank, cases: Sequence[dict[str, Any]]) -> float:
    found = total = 0
    for case in cases:
        for variant in VARIANTS:
            query = case["queries"][variant]
            total += 1
            if query.strip():
                found += case["expected"] in [hit.lesson.id for hit in bank.recall(query, k=K, mode="hybrid")]
    return found / max(total, 1)


def empty(bank: LessonBank, queries: Sequence[str]) -> int:
    return sum(not bank.recall(query, k=K, mode="hybrid") for query in queries)


def measure(
    bank: LessonBank, cases: Sequence[dict[str, Any]], floors: Sequence[float]
) -> list[dict[str, Any]]:
    rows = []
    for floor in floors:
        bank.retriever.vector_floor = floor
        rows.append(
            {
                "floor": None if floor == NO_FLOOR else floor,
                "tuning recall@5": recall_at_5(bank, cases[0::2]),
                "held-out recall@5": recall_at_5(bank, cases[1::2]),
                "tuning off-topic empty": empty(bank, OFF_TOPIC[0::2]),
                "held-out off-topic empty": empty(bank, OFF_TOPIC[1::2]),
            }
        )
        print(f"  floor {floor}: {rows[-1]}", file=sys.stderr)
    return rows


def choose(by_domain: dict[str, list[dict[str, Any]]], tolerance: float) -> float | None:
    """On the tuning halves: among the floors whose recall@5 is within ``tolerance`` of no floor on every
    domain, the lowest that leaves as many off-topic queries empty as any of them (a higher floor
    empties no more and would only drop more paraphrases, which share no word with their lesson)."""
    rows = list(by_domain.values())
    allowed = [
        index
        for index in range(len(rows[0]))
        if all(r[index]["tuning recall@5"] >= r[0]["tuning recall@5"] - tolerance for r in rows)
    ]
    emptied = {index: sum(r[index]["tuning off-topic empty"] for r in rows) for index in allowed}
    best = max(emptied.values(), default=0)
    chosen = min((index for index in allowed if emptied[index] == best), default=0)
    return rows[0][chosen]["floor"]


def report(results: dict[str, Any]) -> str:
    lines = []
    for name, per_embedder in results["embedders"].items():
        chosen = per_embedder["chosen"]
        lines.append(f"\n### {name}: chosen floor {chosen} (tolerance {results['tolerance']})\n")
        lines.append(
            "| domain | floor | tuning recall@5 | held-out recall@5 | off-topic empty (tuning) | off-topic empty (held-out) |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|")
        for domain, rows in per_embedder["domains"].items():
            for row in rows:
                floor = "none" if row["floor"] is None else f"{row['floor']:.2f}"
                mark = " **(chosen)**" if row["floor"] == chosen and chosen is not None else ""
                lines.append(
                    f"| {domain} | {floor}{mark} | {row['tuning recall@5']:.3f} | {row['held-out recall@5']:.3f} "
                    f"| {row['tuning off-topic empty']}/{len(OFF_TOPIC[0::2])} "
                    f"| {row['held-out off-topic empty']}/{len(OFF_TOPIC[1::2])} |"
                )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--embedders", default="minilm", help="comma-separated (default minilm)")
    parser.add_argument("--domains", default=",".join(DOMAINS), help=f"of {', '.join(DOMAINS)}")
    parser.add_argument(
        "--floors", default=None, help="comma-separated cosines (default: a sweep, 'none' first)"
    )
    parser.add_argument(
        "--tolerance", type=float, default=0.005, help="recall@5 a floor may cost (tuning half)"
    )
    parser.add_argument("--cache-dir", type=Path, default=_ruffdocs.CACHE_DIR)
    parser.add_argument("--bank-cache", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    args.dataset = None
    floors = (
        [NO_FLOOR, *(float(f) for f in args.floors.split(",") if f.strip())] if args.floors else list(FLOORS)
    )
    domains = load_domains(args)
    results: dict[str, Any] = {
        "benchmark": "relevance_floor",
        "machine": machine_info(),
        "tolerance": args.tolerance,
        "off_topic": list(OFF_TOPIC),
        "embedders": {},
    }
    with tempfile.TemporaryDirectory(prefix="lb-floor-") as tmp:
        workdir = Path(tmp)
        names = [e.strip() for e in args.embedders.split(",") if e.strip()]
        embedders, skipped = usable_embedders(names, workdir, args.cache_dir / "vectors.sqlite")
        results["skipped"] = skipped
        for name, embedder in embedders.items():
            inner = getattr(embedder, "inner", embedder)
            if hasattr(inner, "query_cache"):  # each query is embedded once, not once per floor
                inner.query_cache = QueryCache(QUERY_CACHE)
            by_domain: dict[str, list[dict[str, Any]]] = {}
            for domain, dataset in domains.items():
                print(f"{name} / {domain}: {len(dataset['cases'])} cases", file=sys.stderr)
                lessons = lessons_for(dataset, [], None, provenance=True)
                bank, _ = build_bank(lessons, embedder, workdir, args.bank_cache, workdir / "home")
                try:
                    by_domain[domain] = measure(bank, dataset["cases"], floors)
                finally:
                    bank.close()
            results["embedders"][name] = {"domains": by_domain, "chosen": choose(by_domain, args.tolerance)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(report(results))
    print(f"\nJSON: {args.out}")
    return results


if __name__ == "__main__":
    main()
