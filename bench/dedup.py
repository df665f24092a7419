"""Where to set the vector dedup threshold (``Settings.dedup_cosine``), measured on real text.

Pairs that may merge: the self-reflections GPT-4 wrote after successive failed attempts at the same
problem (``../shared/data/reflexion-gpt4-runs.jsonl``, 60 problems with two or more): often the
model restating one diagnosis, sometimes a new one, so no rule should merge them all.

Lessons that must never merge:
- every reflection against every reflection written for *another* problem (a hard set: they share the
  model's boilerplate, "The implementation is incorrect because ...");
- every ruff rule's advice (bench/_ruffdocs.py) against every other rule's: many rules are siblings
  from one template ("whitespace after keywords" / "before keywords"), the hardest case there is.

For each threshold the table gives, for cosine alone and for the rule the bank applies (the store's
word-for-word check, or cosine with the polarity and template guards of ``lessonbank.retrieval.dedup``),
the share of same-problem pairs merged and the share of lessons that would wrongly merge with another.

    .venv/bin/python bench/dedup.py --embedders minilm,static,hash
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

import _corpus
from lessonbank.ports import NEAR_DUPLICATE_JACCARD
from lessonbank.retrieval.dedup import verdict_for
from lessonbank.retrieval.embedders import make_embedder
from lessonbank.text import jaccard, words

RESULTS = Path(__file__).resolve().parent / "results"
THRESHOLDS = [0.80, 0.82, 0.84, 0.86, 0.88, 0.90, 0.92, 0.94, 0.96, 0.98]


def merges(
    texts: list[str], vectors: np.ndarray, a: int, b: int, threshold: float
) -> tuple[bool, bool, bool]:
    """Whether text ``a`` would merge into ``b``: by cosine alone, by the bank's vector rule
    (:func:`lessonbank.retrieval.dedup.verdict_for`: cosine with the polarity and template guards),
    and by the store's word-for-word rule (token Jaccard ≥ 0.85, independent of the threshold)."""
    cosine = float(vectors[a] @ vectors[b])
    return (
        cosine >= threshold,
        verdict_for(texts[a], texts[b], cosine, threshold) == "duplicate",
        jaccard(words(texts[a]), words(texts[b])) >= NEAR_DUPLICATE_JACCARD,
    )


def false_merges(texts: list[str], vectors: np.ndarray, groups: list[int], threshold: float) -> list[float]:
    """Share of texts that would merge with a text of another group, per rule of :func:`merges`."""
    group = np.asarray(groups)
    hits = [0, 0, 0]
    for i in range(len(texts)):
        verdicts = [
            merges(texts, vectors, i, j, threshold) for j in range(len(texts)) if group[j] != group[i]
        ]
        for rule in range(3):
            hits[rule] += any(v[rule] for v in verdicts)
    return [count / len(texts) for count in hits]


def measure(name: str) -> dict[str, Any]:
    embedder = make_embedder(name)
    assert embedder is not None
    runs = [json.loads(line) for line in _corpus.DATA_FILE.read_text("utf-8").splitlines() if line.strip()]
    texts: list[str] = []
    groups: list[int] = []
    for index, run in enumerate(runs):
        for reflection in run["reflections"]:
            texts.append(" ".join(reflection.split()))
            groups.append(index)
    started = time.perf_counter()
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    pairs = [
        (a, b)
        for group in sorted(set(groups))
        for a, b in combinations([i for i, g in enumerate(groups) if g == group], 2)
    ]
    rules: list[str] = []
    try:
        import _ruffdocs

        rules = [lesson["content"] for lesson in _ruffdocs.load_dataset()["lessons"]]
    except Exception as exc:  # ruff docs need the dev group's ruff; the reflection sets still stand
        print(f"ruff rule negatives skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
    rule_vectors = np.asarray(embedder.embed_documents(rules), dtype=np.float32) if rules else None
    embed_s = time.perf_counter() - started

    rows = []
    for threshold in THRESHOLDS:
        verdicts = [merges(texts, vectors, a, b, threshold) for a, b in pairs]
        ruff = None
        if rule_vectors is not None:
            ruff = false_merges(rules, rule_vectors, list(range(len(rules))), threshold)
        rows.append(
            {
                "threshold": threshold,
                "pairs_merged": [float(np.mean([v[rule] for v in verdicts])) for rule in range(3)],
                "false_merges_reflections": false_merges(texts, vectors, groups, threshold),
                "false_merges_rules": ruff,
            }
        )
    return {
        "embedder": embedder.name,
        "pairs": len(pairs),
        "reflections": len(texts),
        "rules": len(rules),
        "rows": rows,
        "embed_seconds": round(embed_s, 1),
    }


def cell(values: list[float] | None) -> str:
    return "–" if values is None else f"{values[0]:.1%} / {values[1]:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedders", default="minilm,static,hash")
    args = parser.parse_args()
    report: dict[str, Any] = {"load_average": os.getloadavg(), "results": []}
    for name in [n.strip() for n in args.embedders.split(",") if n.strip()]:
        result = measure(name)
        report["results"].append(result)
        print(
            f"\n{result['embedder']}: {result['pairs']} pairs of one problem's reflections, "
            f"{result['reflections']} reflections, {result['rules']} ruff rules. "
            "Each cell: cosine alone / the vector rule (cosine with the polarity and template guards)."
        )
        print(
            "| cosine ≥ | same-problem pairs merged | false merges, reflections | false merges, ruff rules |"
        )
        print("|---|---|---|---|")
        for row in result["rows"]:
            print(
                f"| {row['threshold']:.2f} | {cell(row['pairs_merged'])} | "
                f"{cell(row['false_merges_reflections'])} | {cell(row['false_merges_rules'])} |"
            )
        first = result["rows"][0]
        ruff_words = first["false_merges_rules"]
        print(
            f"The store's word-for-word rule (token Jaccard ≥ {NEAR_DUPLICATE_JACCARD}): "
            f"same-problem pairs merged {first['pairs_merged'][2]:.1%}; false merges "
            f"{first['false_merges_reflections'][2]:.1%} (reflections), "
            + ("–" if ruff_words is None else f"{ruff_words[2]:.1%}")
            + " (ruff rules)"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "dedup.json").write_text(json.dumps(report, indent=2))
    print(f"\nwrote {RESULTS / 'dedup.json'}")


if __name__ == "__main__":
    main()
