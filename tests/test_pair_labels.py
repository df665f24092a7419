"""The labels of ``tests/data/lesson_pairs.jsonl`` and how the consolidation benchmarks count them: two
successive reflections on one problem are ``same-problem`` (neither a duplicate nor a distinct pair) unless
the label audit read them as one lesson; each half holds at least 100 documented paraphrase pairs."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
PAIRS = Path(__file__).parent / "data" / "lesson_pairs.jsonl"
sys.path.insert(0, str(BENCH))  # the benchmarks import their siblings by name

import consolidation_pairs  # noqa: E402


def records() -> list[dict[str, str]]:
    return [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]


def test_reflections_are_one_problem_unless_the_audit_read_one_lesson() -> None:
    reflections = [record for record in records() if record["source"] == "reflections"]
    labels = Counter(record["label"] for record in reflections)
    assert set(labels) == {"same-problem", "paraphrase"} and labels["same-problem"] > 100
    assert all(record.get("audit") == "right" for record in reflections if record["label"] == "paraphrase")
    audited = [record for record in records() if "audit" in record]
    assert len(audited) == 40 and {record["half"] for record in audited} == {"held"}
    mismatched = [record["key"] for record in records() if record["label"] == "mismatch"]
    assert sorted(mismatched) == ["E262", "E266"]


def test_each_half_holds_at_least_100_documented_paraphrase_pairs() -> None:
    documented = Counter(
        record["half"]
        for record in records()
        if record["label"] == "paraphrase" and record["source"] not in ("reflections", "hand")
    )
    assert documented["tune"] >= 100 and documented["held"] >= 100


def test_joining_two_reflections_on_one_problem_is_neither_right_nor_wrong() -> None:
    pairs = [
        {"a": "first", "b": "second", "label": "same-problem", "source": "reflections", "key": "task-1"},
        {"a": "second", "b": "third", "label": "paraphrase", "source": "reflections", "key": "task-1"},
        {"a": "fourth", "b": "fifth", "label": "same-problem", "source": "reflections", "key": "task-2"},
        {"a": "sixth", "b": "seventh", "label": "paraphrase", "source": "pylint", "key": "PLC0414"},
    ]
    _, ids, items = consolidation_pairs.bank_of(pairs)
    item = {text: items[lesson_id] for text, lesson_id in ids.items()}
    assert item["second"] == item["third"]  # a pair read as one lesson is one item
    assert item["first"] != item["second"] and consolidation_pairs.unknown(item["first"], item["second"])
    assert consolidation_pairs.unknown(item["first"], item["third"])
    assert not consolidation_pairs.unknown(item["first"], item["fourth"])  # another problem: wrong if joined
    assert item["sixth"] == item["seventh"] and not consolidation_pairs.unknown(item["sixth"], item["fourth"])
