"""Write-time dedup: distinct lessons must all survive; the same lesson must reinforce.

Each set is written one lesson at a time through ``LessonBank.add_lesson`` into a fresh SQLite
bank, without an embedder and with each embedder asked for, as an agent's bank would see them.

Distinct lessons (every one must stay a live lesson of its own):
- **ruff rules**: one lesson per ruff rule, its prose advice (bench/_ruffdocs.py). Many rules are
  siblings from one template ("``*args``" / "``**kwargs``", ``sys.version[0]`` / ``[2]``), the
  hardest case for a merge rule. Reported for two halves split by a hash of the rule code: the
  rule was written looking at examples from the first half only;
- **reflections**: the first self-reflection GPT-4 wrote for each of the 204 problems of
  ``../shared/data/reflexion-gpt4-runs.jsonl`` (they share the model's boilerplate).

True duplicates (each should fold into the lesson it repeats):
- **same lesson, retyped**: each ruff lesson written again with the edits a person or a model makes
  when it restates the same thing — case, spacing, final punctuation, an article dropped, a plural;
  caught when it reinforces its original at write time;
- **same failure, reflected again**: the later reflections GPT-4 wrote on a problem after the first
  (the same diagnosis restated, or sometimes a new one). Write time only folds near-identical text;
  a restatement in other words is marked for the consolidation cycle (``metadata["similar_to"]``,
  with an embedder), which proposes the merge to a person. Both shares are reported.

    .venv/bin/python bench/write_dedup.py                       # no embedder and minilm
    .venv/bin/python bench/write_dedup.py --embedders none,static
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _corpus
from lessonbank import LessonBank

RESULTS = Path(__file__).resolve().parent / "results"
_ARTICLE = re.compile(r"\b(the|a|an) ", re.IGNORECASE)


def half(code: str) -> int:
    return hashlib.sha256(code.encode()).digest()[0] % 2


def retyped(text: str, variant: int) -> str:
    """The same lesson written again, with a restater's small edits (never a changed word)."""
    out = text.strip()
    if variant % 3 == 0:
        out = _ARTICLE.sub("", out, count=1)  # one article dropped
    if variant % 2 == 0:
        out = out[:1].lower() + out[1:]
    out = out.rstrip(".") if out.endswith(".") else out + "."
    return "  ".join(out.split(" ", 1)) if variant % 4 == 1 else out


def rule_lessons() -> list[tuple[str, str]]:
    """(code, prose advice) of every live ruff rule that has documentation, one per distinct text."""
    import _ruffdocs
    from lessonbank.text import normalize

    ruff = _ruffdocs.ruff_binary()
    found: dict[str, tuple[str, str]] = {}
    for rule in _ruffdocs.ruff_rules(ruff):
        if not rule.get("code") or "Removed" in (rule.get("status") or {}):
            continue
        text = _ruffdocs.lesson_text(rule["explanation"])
        if text:
            found.setdefault(normalize(text), (rule["code"], text))
    return list(found.values())


def open_bank(folder: Path, name: str, embedder: str | None) -> LessonBank:
    return LessonBank(f"sqlite:///{folder / name}.db", embedder=embedder)


def live(bank: LessonBank) -> list[Any]:
    return bank.lessons(limit=100_000)


def write_all(bank: LessonBank, texts: list[str]) -> list[str]:
    """Write each text; the id of the lesson each write landed on (its own, or the one it reinforced)."""
    return [bank.add_lesson(text).id for text in texts]


def distinct_survival(folder: Path, name: str, texts: list[str], embedder: str | None) -> dict[str, Any]:
    with open_bank(folder, name, embedder) as bank:
        landed = write_all(bank, texts)
        alive = {lesson.id for lesson in live(bank)}
    own = len(set(landed) & alive)
    return {"lessons": len(texts), "survived": own, "survival": own / len(texts)}


def retyped_catch(folder: Path, texts: list[str], embedder: str | None) -> dict[str, Any]:
    with open_bank(folder, "retyped", embedder) as bank:
        originals = write_all(bank, texts)
        again = write_all(bank, [retyped(text, n) for n, text in enumerate(texts)])
    caught = sum(a == b for a, b in zip(originals, again, strict=True))
    return {"pairs": len(texts), "caught": caught, "catch_rate": caught / len(texts)}


def same_failure(folder: Path, runs: list[list[str]], embedder: str | None) -> dict[str, Any]:
    """Later reflections on a problem: folded at write time, or marked for consolidation."""
    folded = marked = later = 0
    with open_bank(folder, "same-failure", embedder) as bank:
        for reflections in runs:
            first = bank.add_lesson(reflections[0]).id
            for text in reflections[1:]:
                later += 1
                written = bank.add_lesson(text)
                similar = {item.get("id") for item in written.metadata.get("similar_to", [])}
                if written.id == first:
                    folded += 1
                elif first in similar:
                    marked += 1
    return {
        "later_reflections": later,
        "folded": folded,
        "marked_for_consolidation": marked,
        "folded_rate": folded / later if later else 0.0,
        "flagged_rate": (folded + marked) / later if later else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedders", default="none,minilm", help="comma-separated; 'none' for no embedder")
    parser.add_argument("--out", type=Path, default=RESULTS / "write_dedup.json")
    args = parser.parse_args()

    rules = rule_lessons()
    halves = [[text for code, text in rules if half(code) == h] for h in (0, 1)]
    runs = [json.loads(line) for line in _corpus.DATA_FILE.read_text("utf-8").splitlines() if line.strip()]
    reflections = [[" ".join(t.split()) for t in run["reflections"]] for run in runs if run["reflections"]]
    firsts = [r[0] for r in reflections]
    repeated = [r for r in reflections if len(r) > 1]

    report: dict[str, Any] = {
        "load_average": os.getloadavg(),
        "python": sys.version.split()[0],
        "results": [],
    }
    print("| embedder | set | lessons | survived | survival |")
    print("|---|---|---|---|---|")
    for name in [n.strip() for n in args.embedders.split(",") if n.strip()]:
        embedder = None if name == "none" else name
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="lb-write-dedup-") as tmp:
            folder = Path(tmp)
            result: dict[str, Any] = {"embedder": name}
            for label, texts in (("ruff rules, half A", halves[0]), ("ruff rules, half B", halves[1])):
                result[label] = distinct_survival(
                    folder, label.replace(" ", "").replace(",", ""), texts, embedder
                )
            result["ruff rules, all"] = distinct_survival(folder, "ruffall", halves[0] + halves[1], embedder)
            result["reflections, one per problem"] = distinct_survival(folder, "firsts", firsts, embedder)
            result["same lesson, retyped"] = retyped_catch(folder, halves[0] + halves[1], embedder)
            result["same failure, reflected again"] = same_failure(folder, repeated, embedder)
        result["seconds"] = round(time.perf_counter() - started, 1)
        report["results"].append(result)
        for label in (
            "ruff rules, half A",
            "ruff rules, half B",
            "ruff rules, all",
            "reflections, one per problem",
        ):
            row = result[label]
            print(f"| {name} | {label} | {row['lessons']} | {row['survived']} | {row['survival']:.3f} |")
    print("\n| embedder | true duplicates | pairs | folded at write | marked for consolidation |")
    print("|---|---|---|---|---|")
    for result in report["results"]:
        row = result["same lesson, retyped"]
        print(
            f"| {result['embedder']} | same lesson, retyped | {row['pairs']} | {row['catch_rate']:.3f} | – |"
        )
        row = result["same failure, reflected again"]
        print(
            f"| {result['embedder']} | same failure, reflected again | {row['later_reflections']} | "
            f"{row['folded_rate']:.3f} | {row['flagged_rate'] - row['folded_rate']:.3f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
