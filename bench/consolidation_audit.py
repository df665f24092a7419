"""A label audit of the consolidation benchmarks' held-out half: a random sample (fixed seed) of its
labelled duplicate pairs and of its distinct pairs, printed for a person to read and count wrong labels.

Two kinds of distinct pairs are drawn: labelled ``distinct`` pairs (ruff's sibling rules, hand-written),
and the pairs where a wrong label would cost most in ``consolidation_bank.py`` — a distinct lesson of the
held-out bank with its nearest lesson of another item (weighted term Dice), the pair the pre-pass is most
likely to merge. The sample is drawn independently of any figure (only the seed and the half decide it),
so the count of wrong labels it finds estimates the labels' error rate on that half.

    .venv/bin/python bench/consolidation_audit.py [--seed 20261127] [--duplicates 40] [--distinct 20]
    .venv/bin/python bench/consolidation_audit.py --score [--embedder minilm]

Read on 2026-11-27 (held half, the default seed and sizes): :data:`VERDICTS`. A duplicate pair's label
is wrong when the two texts are not one lesson: two diagnoses of one problem that differ or contradict
each other ("it wrongly excludes 100" / "it wrongly includes 100"), a text that is no diagnosis ("the
explanation is incomplete ..."), or a rule's message against a paragraph of ruff's that states something
else (a definition, a quotation of PEP 8). A distinct pair's label is wrong when the two texts give one
advice. ``--score`` runs the pre-pass on the half's bank (``consolidation_pairs.measure``'s bank) and
says how many sampled pairs of each verdict it merged: recall on the labels a person confirmed, and
merges of pairs whose label was wrong.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import _pairdata
import _ruffdocs
from consolidation_bank import build
from consolidation_pairs import NOW, bank_of, vectors_for
from lessonbank.services.consolidation.paraphrase import Weights
from lessonbank.services.consolidation.prepass import find_candidates

# The duplicate sample's verdicts, in its order, and the fingerprint of the sample they were given to.
# D01-D40: 19 wrong (17 of 27 reflection pairs, 2 of 13 documentation pairs), 2 borderline, 19 right.
# Both distinct samples (L01-L20 labelled, N01-N20 nearest of another item): 0 wrong. The N sample was read on
# the bank before more documentation sources joined the pairs (their rules left the distinct filler), so
# the N sample drawn today is another one, not read.
FINGERPRINT = "c50b5447c522a0d0"
SEED = 20261127
VERDICTS = (
    "right",
    "right",
    "right",
    "wrong",
    "wrong",
    "right",
    "wrong",
    "wrong",
    "borderline",
    "right",  # D01-D10
    "right",
    "right",
    "wrong",
    "wrong",
    "right",
    "right",
    "right",
    "right",
    "right",
    "right",  # D11-D20
    "right",
    "right",
    "right",
    "wrong",
    "wrong",
    "wrong",
    "wrong",
    "wrong",
    "wrong",
    "wrong",  # D21-D30
    "wrong",
    "wrong",
    "wrong",
    "wrong",
    "wrong",
    "right",
    "right",
    "wrong",
    "right",
    "borderline",  # D31-D40
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--half", default="held", choices=("tune", "held"))
    parser.add_argument("--duplicates", type=int, default=40)
    parser.add_argument("--distinct", type=int, default=20)
    parser.add_argument("--score", action="store_true", help="the pre-pass's merges by verdict")
    parser.add_argument("--embedder", default="none", help="with --score: none, minilm, static")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    everything = _pairdata.load()
    records = [record for record in everything if record["half"] == args.half]
    labelled = [record for record in records if record["label"] == "distinct"]
    sample = _pairdata.audit_sample(everything, rng, args.duplicates, args.half)
    duplicates = [
        r
        for r in records
        if r["label"] in _pairdata.DUPLICATE_LABELS and r["source"] in _pairdata.AUDITED_SOURCES
    ]
    if args.score:
        return score(records, sample, args.embedder)
    print(f"# {args.half} half, seed {args.seed}, fingerprint {fingerprint(sample)}\n")
    print(f"## duplicate pairs ({args.duplicates} of {len(duplicates)})\n")
    for n, record in enumerate(sample, 1):
        print(f"D{n:02d} [{record['source']} {record['key']}]\n  a: {record['a']}\n  b: {record['b']}\n")
    print(f"## labelled distinct pairs ({args.distinct} of {len(labelled)})\n")
    for n, record in enumerate(rng.sample(labelled, min(args.distinct, len(labelled))), 1):
        print(f"L{n:02d} [{record['source']} {record['key']}]\n  a: {record['a']}\n  b: {record['b']}\n")
    rules = [rule for rule in _ruffdocs.ruff_rules(_ruffdocs.ruff_binary()) if rule.get("code")]
    bank = build(args.half, rules, NOW)
    items: dict[str, str] = bank["items"]
    text = {row["id"]: row["content"] for row in bank["rows"]}
    weights = Weights.of(text.values())
    filler = sorted(i for i in text if i.startswith("les_r") and i not in bank["stale"])
    print(
        f"## distinct lessons with their nearest lesson of another item ({args.distinct} of {len(filler)})\n"
    )
    for n, lesson_id in enumerate(rng.sample(filler, min(args.distinct, len(filler))), 1):
        near = max(
            (other for other in text if items[other] != items[lesson_id]),
            key=lambda other: (weights.likeness(text[lesson_id], text[other]), other),
        )
        likeness = weights.likeness(text[lesson_id], text[near])
        print(
            f"N{n:02d} [{items[lesson_id]} / {items[near]}, Dice {likeness:.2f}]\n"
            f"  a: {text[lesson_id]}\n  b: {text[near]}\n"
        )
    return 0


def fingerprint(sample: Sequence[Mapping[str, Any]]) -> str:
    pairs = json.dumps([[record["a"], record["b"]] for record in sample])
    return hashlib.sha256(pairs.encode()).hexdigest()[:16]


def score(records: Sequence[Mapping[str, Any]], sample: Sequence[Mapping[str, Any]], embedder: str) -> int:
    """How many sampled duplicate pairs of each verdict the pre-pass merges on the half's bank."""
    if fingerprint(sample) != FINGERPRINT or len(sample) != len(VERDICTS):
        print(f"the verdicts were read for sample {FINGERPRINT}, not {fingerprint(sample)}: read it again")
        return 1
    lessons, ids, _ = bank_of(records)
    vectors = vectors_for(records, embedder) if embedder != "none" else None
    by_text = {lesson.content: lesson.id for lesson in lessons}
    lesson_vectors = {by_text[t]: v for t, v in vectors.items() if t in by_text} if vectors else None
    found = find_candidates(lessons, NOW, vectors=lesson_vectors)
    cluster_of = {member: n for n, cluster in enumerate(found.clusters) for member in cluster}
    merged: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for record, verdict in zip(sample, VERDICTS, strict=True):
        a, b = ids[record["a"]], ids[record["b"]]
        total[verdict] += 1
        merged[verdict] += a in cluster_of and cluster_of[a] == cluster_of.get(b)
    print(
        f"embedder {embedder}: " + ", ".join(f"{v} {merged[v]} of {total[v]} merged" for v in sorted(total))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
