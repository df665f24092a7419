"""A label audit of the consolidation benchmarks' held-out half: a random sample (fixed seed) of its
labelled duplicate pairs and of its distinct pairs, printed for a person to read and count wrong labels.

Two kinds of distinct pairs are drawn: labelled ``distinct`` pairs (ruff's sibling rules, hand-written),
and the pairs where a wrong label would cost most in ``consolidation_bank.py`` — a distinct lesson of the
held-out bank with its nearest lesson of another item (weighted term Dice), the pair the pre-pass is most
likely to merge. The sample is drawn independently of any figure (only the seed and the half decide it),
so the count of wrong labels it finds estimates the labels' error rate on that half.

    .venv/bin/python bench/consolidation_audit.py [--seed 20261127] [--duplicates 40] [--distinct 20]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence

import _pairdata
import _ruffdocs
from consolidation_bank import build
from consolidation_pairs import NOW
from lessonbank.services.consolidation.paraphrase import Weights


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20261127)
    parser.add_argument("--half", default="held", choices=("tune", "held"))
    parser.add_argument("--duplicates", type=int, default=40)
    parser.add_argument("--distinct", type=int, default=20)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    records = [record for record in _pairdata.load() if record["half"] == args.half]
    duplicates = [record for record in records if record["label"] == "paraphrase"]
    labelled = [record for record in records if record["label"] == "distinct"]
    print(f"# {args.half} half, seed {args.seed}\n")
    print(f"## duplicate pairs ({args.duplicates} of {len(duplicates)})\n")
    for n, record in enumerate(rng.sample(duplicates, min(args.duplicates, len(duplicates))), 1):
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


if __name__ == "__main__":
    sys.exit(main())
