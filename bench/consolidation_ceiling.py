"""How many of the bank benchmark's duplicate pairs any pre-pass could merge at high precision with a given
similarity: the **guarded ceiling** of each signal, tuned half and held-out half side by side.

The bank is ``bench/consolidation_bank.py``'s (one per half). For a duplicate pair (a, b) and a similarity
S, the pair is **reachable** when the guards of ``paraphrase.relation`` let it through and no lesson c of
another item (a distinct rule, another documented check) that the guards let through with a or b is closer:
S(a, c) > S(a, b) or S(b, c) > S(a, b). Otherwise any threshold that merges a and b also finds a with c (or
b with c) at least as alike: a wrong merge for each right one, so a pre-pass at 95% precision cannot take
that pair by S, whatever its threshold or linkage. The share of reachable pairs bounds the recall of a
pre-pass ranking by S. Pairs of two reflections on one problem are neither counted nor counted against.

Signals: ``dice`` (the weighted term Dice the pre-pass uses), ``cover`` (the larger share of one text's
weighted terms found in the other), ``tfidf`` (cosine of the weighted term vectors), each ``--embedders``
cosine (lessonbank's spec or ``cand:NAME``, ``bench/_candidate_embedders.py``), and the sum of ``dice``
and each cosine. Evaluation only: nothing here is used by the pre-pass.

    .venv/bin/python bench/consolidation_ceiling.py
    PYTHONPATH=/tmp/cand .venv/bin/python bench/consolidation_ceiling.py --embedders minilm \\
        cand:paraphrase-l3 cand:e5-small-q4 cand:minilm-int8
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

import _ruffdocs
from consolidation_bank import build, vectors_of
from consolidation_pairs import unknown
from lessonbank.services.consolidation.paraphrase import Weights, relation
from lessonbank.text import same_lesson


def term_matrices(texts: Sequence[str]) -> dict[str, np.ndarray]:
    """The word similarities of every pair of texts (n × n), with the pre-pass's terms and IDF weights."""
    weights = Weights.of(texts)
    vocabulary: dict[str, int] = {}
    cells: list[tuple[int, int, float]] = []
    for row, text in enumerate(texts):
        for term, weight in weights.vector(text)[0].items():
            cells.append((row, vocabulary.setdefault(term, len(vocabulary)), weight))
    matrix = np.zeros((len(texts), len(vocabulary)))
    for row, column, weight in cells:
        matrix[row, column] = weight
    shared = matrix @ (matrix > 0).T
    totals = matrix.sum(axis=1)
    dice = 2 * shared / np.maximum(totals[:, None] + totals[None, :], 1e-9)
    cover = np.maximum(shared / np.maximum(totals[:, None], 1e-9), shared / np.maximum(totals[None, :], 1e-9))
    unit = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    return {"dice": dice, "cover": cover, "tfidf": unit @ unit.T}


def ceiling(
    similarity: np.ndarray,
    texts: Sequence[str],
    items: Sequence[str],
    duplicates: Sequence[tuple[int, int]],
    guarded: Any,
) -> float:
    """The share of ``duplicates`` reachable by ``similarity`` (see the module docstring)."""
    reachable = 0
    for a, b in duplicates:
        if not guarded(a, b):
            continue
        score = similarity[a, b]
        rivals = (
            (x, int(c))
            for x in (a, b)
            for c in np.flatnonzero(similarity[x] > score)
            if c != x and items[c] != items[x] and not unknown(items[c], items[x])
        )
        reachable += not any(guarded(x, c) for x, c in rivals)
    return reachable / len(duplicates) if duplicates else 0.0


def measure(half: str, embedders: Sequence[str], rules: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    spec = build(half, rules, datetime.now(UTC))
    rows = spec["rows"]
    texts = [row["content"] for row in rows]
    position = {row["id"]: n for n, row in enumerate(rows)}
    items = [spec["items"][row["id"]] for row in rows]
    duplicates = [(position[a], position[b]) for a, b in spec["duplicates"]]
    weights = Weights.of(texts)
    checked: dict[tuple[int, int], bool] = {}

    def guarded(x: int, y: int) -> bool:
        key = (min(x, y), max(x, y))
        if key not in checked:
            one, other = texts[key[0]], texts[key[1]]
            checked[key] = (
                same_lesson(one, other) or relation(one, other, weights, paraphrase=0.0) == "paraphrase"
            )
        return checked[key]

    signals = term_matrices(texts)
    for name in embedders:
        vectors = np.asarray(vectors_of(texts, name), dtype=np.float64)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
        signals[name] = vectors @ vectors.T
        signals[f"dice+{name}"] = signals["dice"] + signals[name]
    found = {"guards let through": sum(guarded(a, b) for a, b in duplicates) / len(duplicates)}
    for name, similarity in signals.items():
        found[name] = ceiling(similarity, texts, items, duplicates, guarded)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedders", nargs="*", default=["minilm"])
    args = parser.parse_args(argv)
    rules = [rule for rule in _ruffdocs.ruff_rules(_ruffdocs.ruff_binary()) if rule.get("code")]
    results = {half: measure(half, args.embedders, rules) for half in ("tune", "held")}
    print(f"{'duplicate pairs reachable by':32} {'tune':>8} {'held':>8}")
    for name in results["tune"]:
        print(f"{name:32} {results['tune'][name]:8.3f} {results['held'][name]:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
