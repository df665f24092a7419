"""Pair-level figures of the consolidation pre-pass (``prepass.find_candidates``) on the labelled pairs of
``tests/data/lesson_pairs.jsonl`` (built by ``bench/_pairdata.py``: two documentations of one check,
successive reflections on one problem, documented alternative rules, ruff's sibling rules, hand-written).

For each half (``tune``: the thresholds of ``services/consolidation/paraphrase.py`` were chosen on it;
``held``: never looked at while tuning) every distinct text of the half is one lesson of one bank (one
scope), and the pre-pass runs once on that bank. Reported:

- **paraphrase recall**: labelled paraphrase pairs that end in one cluster (also per source);
- **paraphrase precision**: of the labelled pairs that end in one cluster, the share labelled paraphrase
  (``same-problem`` and ``mismatch`` pairs left out: not known to be one lesson or two);
  and **bank precision**: of all pairs joined in a cluster, the share whose two texts belong to one item
  (one rule code, one hand-written pair, one audited reflection pair; a text and its retype are one item;
  texts of different items joined count as wrong, also two rules that give the same advice, e.g. D206 /
  W191); pairs of two reflections on one problem are left out and counted (``joined_unknown``);
- **same problem merged**: the share of ``same-problem`` pairs (successive reflections) in one cluster,
  apart: most are two diagnoses (the label audit), so neither recall nor a loss;
- **contradiction precision / recall**: of every pair the pre-pass proposes as a contradiction, the share
  labelled contradiction; of the labelled contradictions, the share proposed;
- **distinct merged**: labelled distinct pairs that end in one cluster (target 0);
- **discovery**: labelled paraphrase pairs joined or offered to the LLM phase to confirm
  (``services/consolidation/offers.py``: each lesson's few likeliest guarded pairs not joined; a pair
  whose lessons' clusters are offered counts), the most a confirming model could merge; the pairs
  offered, and of them the labelled distinct and contradiction pairs (a model must refuse those).

    .venv/bin/python bench/consolidation_pairs.py                   # words only (no embedder)
    .venv/bin/python bench/consolidation_pairs.py --embedder minilm   # with MiniLM vectors (cached)
    PYTHONPATH=/tmp/cand .venv/bin/python bench/consolidation_pairs.py --embedder cand:paraphrase-l3
                                                                     # a candidate of bench/_candidate_embedders.py
    .venv/bin/python bench/consolidation_pairs.py --sweep             # the tuning half over the scorer's
                                                                     # join / member probabilities
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import combinations
from pathlib import Path
from typing import Any

import _pairdata
from lessonbank.models import Lesson
from lessonbank.services.consolidation import paraphrase, scorer
from lessonbank.services.consolidation.prepass import COSINE, find_candidates
from lessonbank.text import same_lesson

RESULTS = Path(__file__).resolve().parent / "results"
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def bank_of(records: Sequence[Mapping[str, Any]]) -> tuple[list[Lesson], dict[str, str], dict[str, str]]:
    """The half's distinct texts as lessons; text → lesson id; lesson id → item (the key its text
    belongs to: one rule, task or hand-written pair; each side of a distinct or contradiction pair its own)."""
    ids: dict[str, str] = {}
    items: dict[str, str] = {}
    for record in records:
        for side in ("a", "b"):
            text = record[side]
            if text not in ids:
                ids[text] = f"l{len(ids):04d}"
                items[ids[text]] = item_of(record, side)
    for record in records:  # a text in two paraphrase pairs (an audited reflection) joins their items
        if record["label"] == "paraphrase":
            _join(items, items[ids[record["b"]]], items[ids[record["a"]]])
    # A text retyped (the same lesson: one rule's summary as pycodestyle and ruff print it) is one item.
    heads: list[str] = []
    for text, lesson_id in ids.items():
        head = next((h for h in heads if same_lesson(h, text)), None)
        if head is None:
            heads.append(text)
        else:
            _join(items, items[lesson_id], items[ids[head]])
    lessons = [Lesson(id=i, content=text, created_at=NOW - timedelta(days=1)) for text, i in ids.items()]
    return lessons, ids, items


def _join(items: dict[str, str], old: str, new: str) -> None:
    if old != new:
        for key, value in items.items():
            if value == old:
                items[key] = new


def item_of(record: Mapping[str, Any], side: str) -> str:
    """What the text documents: the rule code or task of a paraphrase pair, each sibling's own rule
    code (``E701/E702`` → ``E701`` for ``a``), each side of anything else apart. A text of a
    ``same-problem`` or ``mismatch`` pair is its own item of its pair's problem (``task~text hash``):
    whether two of them are one lesson is not known, so joining them is counted apart (:func:`unknown`)."""
    if record["label"] == "paraphrase":
        return str(record["key"])
    if record["source"] == "ruff-siblings":
        return str(record["key"]).split("/")[0 if side == "a" else 1]
    if record["label"] in UNKNOWN_LABELS:
        return f"{record['key']}~{hashlib.sha256(record[side].encode()).hexdigest()[:10]}"
    return f"{record['key']}:{side}"


UNKNOWN_LABELS = ("same-problem", "mismatch")


def unknown(first: str, second: str) -> bool:
    """Two items of one problem, at least one of a pair not known to be one lesson: joining them is
    neither right nor wrong."""
    return first != second and "~" in first + second and first.split("~")[0] == second.split("~")[0]


def measure(
    records: Sequence[Mapping[str, Any]], vectors: Mapping[str, Any] | None, cosine: float
) -> dict[str, Any]:
    lessons, ids, items = bank_of(records)
    by_text = {lesson.content: lesson.id for lesson in lessons}
    lesson_vectors = (
        {by_text[text]: vector for text, vector in vectors.items() if text in by_text} if vectors else None
    )
    found = find_candidates(lessons, NOW, vectors=lesson_vectors, cosine=cosine)
    cluster_of = {member: n for n, cluster in enumerate(found.clusters) for member in cluster}
    unit = {member: cluster[0] for cluster in found.clusters for member in cluster}

    def units(a: str, b: str) -> tuple[str, str]:
        one, other = unit.get(a, a), unit.get(b, b)
        return (one, other) if one < other else (other, one)

    offered = {units(o.a, o.b) for o in found.offers}

    def discovered(record: Mapping[str, Any]) -> bool:
        return together(record) or units(ids[record["a"]], ids[record["b"]]) in offered

    joined = {(a, b) for cluster in found.clusters for a, b in combinations(sorted(cluster), 2)}
    flagged = set(found.contradictions)

    def together(record: Mapping[str, Any]) -> bool:
        a, b = ids[record["a"]], ids[record["b"]]
        return a in cluster_of and cluster_of.get(a) == cluster_of.get(b)

    def pair_of(record: Mapping[str, Any]) -> tuple[str, str]:
        a, b = ids[record["a"]], ids[record["b"]]
        return (a, b) if a < b else (b, a)

    by_label: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        by_label[record["label"]].append(record)
    paraphrases = by_label["paraphrase"]
    merged_labelled = [record for record in records if together(record)]
    per_source: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for record in paraphrases:
        per_source[record["source"]][0] += together(record)
        per_source[record["source"]][1] += 1
    contradictions = {pair_of(record) for record in by_label["contradiction"]}
    known = [(a, b) for a, b in joined if not unknown(items[a], items[b])]
    same_problem = by_label["same-problem"]
    return {
        "lessons": len(lessons),
        "pairs": {label: len(found_records) for label, found_records in sorted(by_label.items())},
        "paraphrase_recall": _share(sum(together(r) for r in paraphrases), len(paraphrases)),
        "paraphrase_recall_by_source": {s: _share(*counts) for s, counts in sorted(per_source.items())},
        "paraphrase_precision": _share(
            sum(r["label"] == "paraphrase" for r in merged_labelled),
            sum(r["label"] not in UNKNOWN_LABELS for r in merged_labelled),
        ),
        "bank_precision": _share(sum(items[a] == items[b] for a, b in known), len(known)),
        "joined_pairs": len(joined),
        "joined_unknown": len(joined) - len(known),
        "same_problem_merged": _share(sum(together(r) for r in same_problem), len(same_problem)),
        "contradiction_precision": _share(len(flagged & contradictions), len(flagged)),
        "contradiction_recall": _share(len(flagged & contradictions), len(contradictions)),
        "contradictions_proposed": len(flagged),
        "distinct_merged": sum(together(r) for r in by_label["distinct"]),
        "discovery": _share(sum(discovered(r) for r in paraphrases), len(paraphrases)),
        "offered_pairs": len(found.offers),
        "offered_distinct": sum(discovered(r) and not together(r) for r in by_label["distinct"]),
        "offered_contradictions": sum(discovered(r) and not together(r) for r in by_label["contradiction"]),
        "counts": found.counts,
    }


def _share(hits: int, total: int) -> float | None:
    return round(hits / total, 3) if total else None


def vectors_for(records: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    import _candidate_embedders
    import _vectorcache

    inner = _candidate_embedders.resolve(name)
    if inner is None:
        return {}
    embedder = _vectorcache.CachedEmbedder(inner, _vectorcache.DEFAULT_PATH)
    texts = sorted({record[side] for record in records for side in ("a", "b")})
    return dict(zip(texts, embedder.embed_documents(texts), strict=True))


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


ROWS = (
    "lessons",
    "paraphrase_recall",
    "paraphrase_precision",
    "bank_precision",
    "joined_pairs",
    "joined_unknown",
    "same_problem_merged",
    "contradiction_precision",
    "contradiction_recall",
    "contradictions_proposed",
    "distinct_merged",
    "discovery",
    "offered_pairs",
    "offered_distinct",
    "offered_contradictions",
)


def table(results: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [f"{'':28} {'tune':>8} {'held':>8}"]
    lines += [f"{row:28} {_fmt(results['tune'][row]):>8} {_fmt(results['held'][row]):>8}" for row in ROWS]
    sources = sorted(
        set(results["tune"]["paraphrase_recall_by_source"])
        | set(results["held"]["paraphrase_recall_by_source"])
    )
    for source in sources:
        cells = [_fmt(results[half]["paraphrase_recall_by_source"].get(source)) for half in ("tune", "held")]
        lines.append(f"{'  recall ' + source:28} {cells[0]:>8} {cells[1]:>8}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--embedder", default="none", help="none, minilm, static, hash, cand:NAME (vectors cached)"
    )
    parser.add_argument("--cosine", type=float, default=COSINE)
    parser.add_argument(
        "--sweep", action="store_true", help="the tuning half over thresholds (cosine, with --embedder)"
    )
    args = parser.parse_args(argv)
    records = _pairdata.load()
    vectors = vectors_for(records, args.embedder) if args.embedder != "none" else None
    halves = {half: [r for r in records if r["half"] == half] for half in ("tune", "held")}
    if args.sweep:  # the scorer's join and member probabilities, on the tuning half only
        name = "VECTOR" if vectors else "LEXICAL"
        fitted = getattr(scorer, name)
        for join in (0.7, 0.8, 0.85, 0.9, 0.95):
            for member in (0.1, 0.2, 0.3, 0.45, 0.6, 0.75):
                if member > join:
                    continue
                setattr(scorer, name, replace(fitted, join=join, member=member))
                got = measure(halves["tune"], vectors, args.cosine)
                print(join, member, *(f"{k}={_fmt(got[k])}" for k in ROWS[1:]))
        return 0
    results = {half: measure(found, vectors, args.cosine) for half, found in halves.items()}
    model = scorer.VECTOR if vectors else scorer.LEXICAL
    print(
        f"embedder: {args.embedder}  cosine: {args.cosine}  join: {model.join}  member: {model.member}  "
        f"contradiction: {paraphrase.CONTRADICTION}"
    )
    print(table(results))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"consolidation_pairs-{args.embedder.replace(':', '_')}.json"
    out.write_text(
        json.dumps({"embedder": args.embedder, "cosine": args.cosine, "results": results}, indent=2)
    )
    print(f"-> {out.relative_to(RESULTS.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
