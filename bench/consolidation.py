"""A consolidation cycle on real reflections, and on a bank of 100k lessons.

1. **Reflections**: every self-reflection GPT-4 wrote in ``../shared/data/reflexion-gpt4-runs.jsonl``
   becomes a lesson (the problem it was written for kept in its metadata, never shown to the cycle),
   written one at a time through ``add_lesson`` so the write path's marks are set as in use. One cycle
   runs and its proposal is approved whole. Reported: lessons before and after, merges, and the share
   of merges that join reflections of one problem (every cross-problem merge is listed with its texts
   to be judged by a person). A second cycle on the unchanged bank must propose nothing.
2. **100k lessons** (bench/_corpus.py, imported in bulk, with 200 new episodes): one cycle's wall time
   and the process's peak memory, without a model and with :class:`GreedyModel`, a stand-in for the
   most verbose model possible: every reply is as long as the call's ``max_tokens`` allows, and its
   usage is counted with the bank's counter (no hosted model is called). The budget must hold:
   input ≤ 30,000 and output ≤ 8,000 tokens, per phase as reported.

    .venv/bin/python bench/consolidation.py                      # no embedder and minilm; 100k
    .venv/bin/python bench/consolidation.py --embedders none --sizes 10000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _corpus
from lessonbank import LessonBank
from lessonbank.llm.base import Completion, Message, Usage
from lessonbank.text import estimate_tokens

RESULTS = Path(__file__).resolve().parent / "results"


def reflections() -> list[tuple[int, str]]:
    runs = [json.loads(line) for line in _corpus.DATA_FILE.read_text("utf-8").splitlines() if line.strip()]
    return [(index, " ".join(text.split())) for index, run in enumerate(runs) for text in run["reflections"]]


def on_reflections(embedder: str | None) -> dict[str, Any]:
    items = reflections()
    with (
        tempfile.TemporaryDirectory(prefix="lb-consolidation-") as tmp,
        LessonBank(f"sqlite:///{tmp}/bank.db", embedder=embedder, worker=False) as bank,
    ):
        problem_of: dict[str, int] = {}
        for problem, text in items:
            problem_of[bank.add_lesson(text).id] = problem
        before = len(bank.lessons(limit=100_000))
        started = time.perf_counter()
        proposal = bank.consolidate()
        seconds = time.perf_counter() - started
        merges = [
            op
            for op in (proposal.operations if proposal else [])
            if op.kind == "merge" and op.status != "dropped"
        ]
        cross = [op for op in merges if len({problem_of.get(i) for i in op.lesson_ids}) > 1]
        cross_texts = [[bank.get_lesson(i).content[:160] for i in op.lesson_ids] for op in cross]
        if proposal is not None:
            bank.approve(proposal.id)
        after = len(bank.lessons(limit=100_000))
        again = bank.consolidate()
    return {
        "embedder": embedder or "none",
        "reflections": len(items),
        "lessons_before": before,
        "lessons_after": after,
        "merges": len(merges),
        "merged_sources": sum(len(op.lesson_ids) for op in merges),
        "same_problem_share": (1 - len(cross) / len(merges)) if merges else None,
        "cross_problem_merges": cross_texts,
        "cycle_seconds": round(seconds, 3),
        "second_cycle_operations": 0 if again is None else len(again.operations),
    }


class GreedyModel:
    """Replies as long as ``max_tokens`` allows (counted with the bank's counter): operation blocks
    naming the lesson ids of its prompt in phase 3, the four sections in phase 4, prose otherwise."""

    model = "bench:greedy"

    async def complete(
        self, messages: list[Message], *, max_tokens: int | None = None, temperature: float | None = None
    ) -> Completion:
        prompt = messages[-1]["content"]
        budget = max_tokens or 500
        if prompt.startswith("Execute the consolidation plan"):
            ids = [word for word in prompt.split() if word.startswith("les_")]
            unit = "---\nOPERATION: CONNECT\nTARGET: {} -> related -> {}\nREASON: same topic\n"
            parts = [unit.format(a, b) for a, b in zip(ids[::2], ids[1::2], strict=False)] or ["NONE"]
        elif prompt.startswith("Rewrite the core memory"):
            parts = [
                "## Identity\nA bench bank.\n## Active Context\n",
                "## Persona\nTerse.\n## Critical Facts\n",
            ]
            parts += [f"- fact {i} about the work in progress\n" for i in range(10_000)]
        else:
            parts = [f"- point {i}: a consideration about the lessons and episodes\n" for i in range(10_000)]
        text = ""
        for part in parts:
            if estimate_tokens(text + part) > budget:
                break
            text += part
        counted_in = sum(estimate_tokens(m["content"]) for m in messages)
        return Completion(text=text, usage=Usage(counted_in, estimate_tokens(text)), model=self.model)


def at_scale(size: int, *, model: bool) -> dict[str, Any]:
    source = _corpus.load_source(7)
    rows = _corpus.make_lessons(source, size, 7)
    with (
        tempfile.TemporaryDirectory(prefix="lb-consolidation-") as tmp,
        LessonBank(f"sqlite:///{tmp}/bank.db", worker=False, llm=GreedyModel() if model else None) as bank,
    ):
        for start in range(0, len(rows), 10_000):
            bank.import_lessons(rows[start : start + 10_000])
        for index in range(200):
            bank.record({"task": rows[index]["content"][:300], "error": f"failure {index}", "agent": "bench"})
        started = time.perf_counter()
        run_before = time.process_time()
        proposal = bank.consolidate(dry_run=not model)  # a dry run calls no model
        seconds = time.perf_counter() - started
        cpu = time.process_time() - run_before
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    phases = [] if proposal is None else proposal.metadata.get("phases", [])
    return {
        "lessons": size,
        "model": GreedyModel.model if model else "none",
        "phases": phases,
        "cycle_seconds": round(seconds, 2),
        "cycle_cpu_seconds": round(cpu, 2),
        "operations": 0 if proposal is None else len(proposal.operations),
        "tokens_in": 0 if proposal is None else proposal.tokens_in,
        "tokens_out": 0 if proposal is None else proposal.tokens_out,
        "peak_rss_mib": round(peak_kib / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedders", default="none,minilm")
    parser.add_argument(
        "--sizes", default="100000", help="bank sizes for the scale run (comma-separated; empty: skip)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "consolidation.json")
    args = parser.parse_args()
    report: dict[str, Any] = {"load_average": os.getloadavg(), "python": sys.version.split()[0]}
    report["reflections"] = [
        on_reflections(None if name == "none" else name) for name in args.embedders.split(",") if name.strip()
    ]
    print("| embedder | reflections | lessons before | after | merges | same-problem share | 2nd cycle ops |")
    print("|---|---|---|---|---|---|---|")
    for row in report["reflections"]:
        share = "–" if row["same_problem_share"] is None else f"{row['same_problem_share']:.3f}"
        print(
            f"| {row['embedder']} | {row['reflections']} | {row['lessons_before']} | {row['lessons_after']} | "
            f"{row['merges']} | {share} | {row['second_cycle_operations']} |"
        )
        for texts in row["cross_problem_merges"]:
            print("  cross-problem merge:", " || ".join(texts))
    report["scale"] = [
        at_scale(int(size), model=model)
        for size in args.sizes.split(",")
        if size.strip()
        for model in (False, True)
    ]
    if report["scale"]:
        print("\n| lessons | model | cycle s | cpu s | operations | tokens in/out | peak RSS MiB |")
        print("|---|---|---|---|---|---|---|")
        for row in report["scale"]:
            print(
                f"| {row['lessons']:,} | {row['model']} | {row['cycle_seconds']} | {row['cycle_cpu_seconds']} | "
                f"{row['operations']} | {row['tokens_in']}/{row['tokens_out']} | {row['peak_rss_mib']} |"
            )
        for row in report["scale"]:
            if row["phases"]:
                print(f"\nphases at {row['lessons']:,} lessons ({row['model']}):")
                print("| phase | tokens in / allowed | tokens out / allowed |\n|---|---|---|")
                for p in row["phases"]:
                    print(
                        f"| {p['phase']} | {p['tokens_in']} / {p['allowed_in']} | {p['tokens_out']} / {p['allowed_out']} |"
                    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
