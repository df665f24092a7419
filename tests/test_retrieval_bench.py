"""The retrieval benchmark on a handful of real ruff rules: the dataset builder and a --quick harness run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench import _ruffdocs, retrieval

from lessonbank.models import LESSON_MAX_CHARS
from lessonbank.text import keywords

# Rules whose own example ruff flags (an unused import, a mutable default, `== None`, `key in d.keys()`,
# a stub rule written as a .pyi example), and one it cannot flag on a snippet (a missing final newline:
# the markdown block always ends with one).
CODES = ["F401", "B006", "E711", "SIM118", "PYI021", "W292"]


@pytest.fixture(scope="module")
def dataset() -> dict[str, Any]:
    return _ruffdocs.build_dataset(codes=CODES)


def test_cases_come_from_ruffs_own_diagnostics(dataset: dict[str, Any]) -> None:
    by_rule = {case["rule"]: case for case in dataset["cases"]}
    assert dataset["rules"] == len(CODES)
    assert "W292" in dataset["dropped_no_diagnostic"] and "W292" not in by_rule
    assert {"F401", "B006", "E711", "SIM118"} <= set(by_rule)
    assert len(dataset["cases"]) + len(dataset["dropped_no_diagnostic"]) == dataset["rules_with_example"]
    lessons = {lesson["id"]: lesson for lesson in dataset["lessons"]}
    for case in dataset["cases"]:
        lesson = lessons[case["expected"]]
        # The query is ruff's message plus the offending lines, and those lines come from the bad example.
        assert case["queries"]["message+code"] == f"{case['message']}\n{case['lines']}"
        assert case["queries"]["code"] == case["lines"] and case["lines"].strip()
        assert case["lines"].strip() in lesson["learned_from"]
        # The lesson is prose: no code fences, no markdown headings, within the lesson limit.
        assert "```" not in lesson["content"] and "##" not in lesson["content"]
        assert 0 < len(lesson["content"]) <= LESSON_MAX_CHARS
        # Tags name the linter family, never the rule: nothing of the answer's identity leaks through them.
        assert case["rule"].lower() not in lesson["tags"] and case["name"] not in lesson["tags"]
    assert "unused" in by_rule["F401"]["message"].lower()
    assert "def " in lessons[by_rule["B006"]["expected"]]["learned_from"]


@pytest.mark.slow  # walks every .py file of the stdlib and site-packages: 2 s on a quiet machine, 9 s on a busy one
def test_distractors_are_real_prose_with_their_source(tmp_path: Path) -> None:
    found = _ruffdocs.load_distractors(30, exclude=[], cache_dir=tmp_path)
    assert len(found) == 30
    assert len({lesson["content"] for lesson in found}) == 30
    assert all(len(lesson["content"]) >= 80 and "\n" not in lesson["content"] for lesson in found)
    assert any(lesson["learned_from"] and "def " in lesson["learned_from"] for lesson in found)
    # Cached: the same list comes back, cut to the size asked.
    assert _ruffdocs.load_distractors(10, exclude=[], cache_dir=tmp_path) == found[:10]


@pytest.mark.slow
def test_quick_harness_run(dataset: dict[str, Any], tmp_path: Path) -> None:
    data_file = tmp_path / "dataset.json"
    data_file.write_text(json.dumps(dataset), "utf-8")
    out = tmp_path / "retrieval.json"
    argv = ["--quick", "--embedders", "hash", "--dataset", str(data_file), "--cache-dir", str(tmp_path)]
    results = retrieval.main(
        [
            *argv,
            "--sizes",
            "60",
            "--distractor-size",
            "60",
            "--queries",
            "10",
            "--out",
            str(out),
            "--reference-sizes",
            "60",
        ]
    )
    assert json.loads(out.read_text("utf-8"))["dataset"]["cases"] == len(dataset["cases"])
    assert results["machine"]["load_average_at_start"]

    modes = {(row["mode"], row["embedder"]) for row in results["quality"]}
    assert results["embedders"]["used"] == ["hash"]
    assert {("vector", "hash"), ("hybrid", "hash")} <= modes
    assert ("lexical", None) in modes
    for row in results["quality"]:
        assert row["lessons"] in (len(dataset["lessons"]), 60)
        for metrics in row["metrics"].values():
            for name in ("recall@1", "recall@5", "mrr@10"):
                assert 0.0 <= metrics[name] <= 1.0
            assert metrics["recall@1"] <= metrics["recall@5"] <= metrics["found@10"]

    # Lexical recall finds a case whose query repeats the lesson's words, among the distractors too.
    lessons = {lesson["id"]: lesson for lesson in dataset["lessons"]}
    repeats = [
        case
        for case in dataset["cases"]
        if len(set(keywords(case["message"])) & set(keywords(lessons[case["expected"]]["content"]))) >= 2
    ]
    assert repeats
    for row in results["quality"]:
        if row["mode"] == "lexical" and row["provenance"]:
            ranks = row["metrics"]["message+code"]["ranks"]
            assert any(ranks[case["rule"]] == 1 for case in repeats)

    # Each text is embedded once across banks: the padded bank gets the rule lessons' vectors from the cache.
    hash_banks = [bank for bank in results["banks"] if bank["embedder"] == "hash"]
    assert all(b["embedding"]["computed"] + b["embedding"]["from_cache"] == b["lessons"] for b in hash_banks)
    assert any(b["embedding"]["from_cache"] for b in hash_banks)

    sizes = {row["lessons"] for row in results["latency"]}
    assert sizes == {60}
    for row in results["latency"]:
        assert row["n"] == 10 and 0 < row["p50_ms"] <= row["p99_ms"]
    assert "| mode | provenance |" in retrieval.report(results)

    # Beside the references: the bank's BM25 top 5 is the exhaustive scorer's, query for query.
    [reference] = results["lexical_reference"]
    for figures in reference["quality"].values():
        assert figures["top-5 agreement with exhaustive"] == figures["worst query agreement"] == 1.0
        assert 0.0 <= figures["bm25s"] <= 1.0
    assert reference["latency"]["lessonbank, 64 words"]["n"] == 10
    assert reference["filtered_slice"]["filtered, this bank"] == reference["filtered_slice"]["slice alone"]
    assert "beside the references" in retrieval.report(results)
