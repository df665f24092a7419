"""Precision of the injection screen on benign technical text, recall on the hostile table, time per text.

The screen (``lessonbank.injection``) quarantines lesson text that reads as instructions to the model. A
lesson is often technical prose, so the screen must leave documentation alone. Benign texts, all from
what is installed beside this interpreter, never imported (read with ``ast``):

- **docstrings**: every module, class and function docstring of the ``.py`` / ``.pyi`` files of
  site-packages and of the standard library, split into paragraphs (blank-line separated, code examples
  included), each of at least ``MIN_CHARS`` characters and ``MIN_WORDS`` words;
- **rule documentation**: ruff's rule explanations (``ruff rule --all``, compiled into the ruff wheel)
  split the same way, and mypy's error messages and error-code descriptions (string constants of
  ``mypy/message_registry.py``, ``mypy/errorcodes.py`` and ``mypy/messages.py``).

Texts are deduplicated (whitespace folded) and split into two halves by a hash of the text: the
**tuning** half is the one whose flagged texts may be looked at (``--show-flagged``) to tune the
patterns; the **held-out** half is reported, never shown (``--show-held-out`` only once tuning is over).
Every flagged benign text is a false positive. The hostile table is ``tests/injection_table.py``.

Time: each half is screened ``--repeat`` times by this checkout's screen and by the screen of
``--baseline`` (a git revision of ``src/lessonbank/injection.py``, loaded from git without a checkout);
the best pass gives µs per text.

    .venv/bin/python bench/injection_precision.py                      # JSON to bench/results/injection_precision.json
    .venv/bin/python bench/injection_precision.py --show-flagged 50    # tuning: the tuning half's flagged texts
    .venv/bin/python bench/injection_precision.py --limit 20000 --repeat 1   # quick run
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

# The repository root (for tests.injection_table) and bench/ (for _ruffdocs), as a script or imported.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.injection_table import HOSTILE

from _ruffdocs import documented
from lessonbank import injection
from lessonbank.models import LESSON_MAX_CHARS

ROOT = Path(__file__).resolve().parent.parent
MIN_CHARS = 20
MIN_WORDS = 3
TARGET_PER_100K = 5.0  # at most 1 false positive in 20,000 benign texts
BASELINE = "533ece6f4926b3f5c9d5215fd5a4e01eb7d95618"  # the screen before precision was measured
MYPY_MESSAGE_MODULES = ("mypy/message_registry.py", "mypy/errorcodes.py", "mypy/messages.py")

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Text:
    """One benign text, where it was found, and the half it falls in."""

    text: str
    source: str  # "docstring", "ruff rule" or "mypy message"
    origin: str  # file (relative to its root) and line, or the rule's code

    @property
    def half(self) -> str:
        return half_of(self.text)


def fold(text: str) -> str:
    return " ".join(text.split())


def half_of(text: str) -> str:
    """``tuning`` or ``held-out``, from a hash of the text (whitespace folded): the same on every machine."""
    return "tuning" if hashlib.sha256(fold(text).encode()).digest()[0] % 2 == 0 else "held-out"


def paragraphs(doc: str) -> Iterator[str]:
    for block in _PARAGRAPH_BREAK.split(doc):
        block = block.strip()
        if len(block) >= MIN_CHARS and len(block.split()) >= MIN_WORDS:
            yield block[:LESSON_MAX_CHARS]


# --------------------------------------------------------------------- docstrings


def source_roots() -> list[tuple[str, Path]]:
    paths = sysconfig.get_paths()
    roots = {"site-packages": paths["purelib"], "platlib": paths["platlib"], "stdlib": paths["stdlib"]}
    seen: set[str] = set()
    found = []
    for label, path in roots.items():
        if path not in seen and Path(path).is_dir():
            seen.add(path)
            found.append((label, Path(path)))
    return found


def python_files() -> list[tuple[str, Path]]:
    """(``root/relative/path``, path) of every .py / .pyi file, sorted by the relative name."""
    files = []
    for label, root in source_roots():
        for folder, dirs, names in os.walk(root):
            # The stdlib's site-packages is another root (or another environment's packages).
            dirs[:] = sorted(
                d for d in dirs if d not in {"__pycache__", "site-packages"} and not d.endswith(".dist-info")
            )
            for name in sorted(names):
                if name.endswith((".py", ".pyi")):
                    path = Path(folder) / name
                    files.append((f"{label}/{path.relative_to(root)}", path))
    return files


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text("utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
        return None


def docstring_texts(name: str, path: Path) -> Iterator[Text]:
    tree = _parse(path)
    if tree is None:
        return
    for node in documented(tree):
        doc = ast.get_docstring(node)
        if doc:
            line = getattr(node, "lineno", 1)
            for paragraph in paragraphs(doc):
                yield Text(paragraph, "docstring", f"{name}:{line}")


# --------------------------------------------------------------------- rule documentation


def ruff_rule_texts() -> Iterator[Text]:
    """Paragraphs of ruff's rule explanations (markdown, code blocks included); none without ruff."""
    from _ruffdocs import ruff_binary, ruff_rules

    try:
        rules = ruff_rules(ruff_binary())
    except (OSError, subprocess.CalledProcessError, json.JSONDecodeError):
        return
    for rule in rules:
        for paragraph in paragraphs(rule.get("explanation") or ""):
            yield Text(paragraph, "ruff rule", f"ruff {rule.get('code')}")


def mypy_message_texts() -> Iterator[Text]:
    """String constants of mypy's message modules: the error messages it prints, the codes' descriptions."""
    for label, root in source_roots():
        for relative in MYPY_MESSAGE_MODULES:
            tree = _parse(root / relative)
            if tree is None:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    for paragraph in paragraphs(node.value):
                        yield Text(paragraph, "mypy message", f"{label}/{relative}:{node.lineno}")


# --------------------------------------------------------------------- the corpus


def collect(limit: int | None = None) -> list[Text]:
    """Distinct benign texts: rule documentation first, then docstrings in file order; ``limit`` cuts."""
    seen: set[str] = set()
    texts: list[Text] = []

    def sources() -> Iterator[Text]:
        yield from ruff_rule_texts()
        yield from mypy_message_texts()
        for name, path in python_files():
            yield from docstring_texts(name, path)

    for item in sources():
        key = fold(item.text)
        if key not in seen:
            seen.add(key)
            texts.append(item)
            if limit is not None and len(texts) >= limit:
                break
    return texts


def sample(count: int) -> list[Text]:
    """``count`` distinct docstring paragraphs from files taken in a fixed pseudo-random order (by a hash
    of their relative name), so a small sample spans many packages; the same on every run."""
    files = sorted(python_files(), key=lambda item: hashlib.sha256(item[0].encode()).hexdigest())
    seen: set[str] = set()
    texts: list[Text] = []
    for name, path in files:
        for item in docstring_texts(name, path):
            key = fold(item.text)
            if key not in seen:
                seen.add(key)
                texts.append(item)
                if len(texts) >= count:
                    return texts
    return texts


# --------------------------------------------------------------------- screening


Screen = Callable[[str], "str | None"]


def baseline_screen(revision: str) -> Screen | None:
    """``injection_reason`` of ``src/lessonbank/injection.py`` at ``revision``, or None without git."""
    try:
        source = subprocess.run(
            ["git", "show", f"{revision}:src/lessonbank/injection.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    # Registered as a module of its own, so dataclasses and the like resolve their module.
    module = sys.modules.setdefault(
        "lessonbank_injection_baseline", ModuleType("lessonbank_injection_baseline")
    )
    exec(compile(source, f"{revision[:7]}:injection.py", "exec"), module.__dict__)
    screen: Screen = module.injection_reason
    return screen


def screen_all(screen: Screen, texts: Sequence[str]) -> list[str | None]:
    return [screen(text) for text in texts]


def best_time_us(screen: Screen, texts: Sequence[str], repeat: int) -> float:
    """µs per text of the fastest of ``repeat`` passes over ``texts``."""
    best = float("inf")
    for _ in range(max(1, repeat)):
        started = time.perf_counter_ns()
        for text in texts:
            screen(text)
        best = min(best, time.perf_counter_ns() - started)
    return best / 1000 / max(1, len(texts))


def per_100k(flagged: int, total: int) -> float:
    return 100_000 * flagged / total if total else 0.0


def measure(name: str, screen: Screen, halves: dict[str, list[Text]], repeat: int) -> dict[str, Any]:
    """Flagged texts per half (by reason), hostile recall and time per text for one screen."""
    result: dict[str, Any] = {"screen": name, "halves": {}}
    for half, items in halves.items():
        texts = [item.text for item in items]
        verdicts = screen_all(screen, texts)
        flagged = [(item, reason) for item, reason in zip(items, verdicts, strict=True) if reason]
        result["halves"][half] = {
            "texts": len(texts),
            "flagged": len(flagged),
            "false_positives_per_100k": round(per_100k(len(flagged), len(texts)), 2),
            "by_reason": dict(Counter(reason for _, reason in flagged).most_common()),
            "by_source": dict(Counter(item.source for item, _ in flagged).most_common()),
            "us_per_text": round(best_time_us(screen, texts, repeat), 2),
            "flagged_texts": [
                {"reason": reason, "origin": item.origin, "source": item.source, "text": item.text}
                for item, reason in flagged
            ],
        }
    missed = [text for text in HOSTILE if screen(text) is None]
    result["hostile"] = {
        "texts": len(HOSTILE),
        "caught": len(HOSTILE) - len(missed),
        "recall": round(1 - len(missed) / len(HOSTILE), 4),
        "missed": missed,
    }
    return result


def _matched(text: str) -> str:
    """The part of ``text`` the current screen matched, for reading a flagged text quickly."""
    finding = injection.screen(text)
    if finding is None:
        return ""
    return finding.matched


def machine_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text columns: first column left-aligned, the rest right-aligned (as ``core.py``'s)."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = [
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(row) for row in rows)])


def report(results: list[dict[str, Any]], corpus: dict[str, Any]) -> str:
    halves = ("tuning", "held-out")
    header = ["screen", *(f"{h} {col}" for h in halves for col in ("texts", "FP", "FP/100k", "µs/text"))]
    header.append("hostile caught")
    rows = []
    for result in results:
        row = [result["screen"]]
        for half in halves:
            h = result["halves"][half]
            row += [
                f"{h['texts']:,}",
                str(h["flagged"]),
                f"{h['false_positives_per_100k']:.1f}",
                f"{h['us_per_text']:.1f}",
            ]
        row.append(f"{result['hostile']['caught']}/{result['hostile']['texts']}")
        rows.append(row)
    reasons = sorted({r for result in results for h in halves for r in result["halves"][h]["by_reason"]})
    reason_rows = [
        [
            reason,
            *(str(result["halves"][h]["by_reason"].get(reason, 0)) for result in results for h in halves),
        ]
        for reason in reasons
    ]
    reason_header = ["false positives by reason", *(f"{r['screen']} {h}" for r in results for h in halves)]
    sources = ", ".join(f"{name} {count:,}" for name, count in corpus["by_source"].items())
    lines = [
        f"benign texts: {corpus['texts']:,} distinct ({sources}); mean {corpus['mean_chars']:.0f} chars",
        f"target: at most {TARGET_PER_100K:g} false positives per 100k on the held-out half, every hostile text caught",
        "",
        format_table(header, rows),
    ]
    if reason_rows:
        lines += ["", format_table(reason_header, reason_rows)]
    return "\n".join(lines)


def show(result: dict[str, Any], half: str, count: int) -> str:
    flagged = result["halves"][half]["flagged_texts"][:count]
    out = [f"\n{half} half, flagged by {result['screen']} ({len(flagged)} shown):"]
    for item in flagged:
        matched = _matched(item["text"]) if result["screen"] == "current" else ""
        out.append(f"- [{item['reason']}] {item['origin']}" + (f"  matched: {matched!r}" if matched else ""))
        out.append("    " + fold(item["text"])[:400])
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="screen the first N distinct texts only")
    parser.add_argument(
        "--json", "--out", dest="out", type=Path, default=Path("bench/results/injection_precision.json")
    )
    parser.add_argument(
        "--show-flagged", type=int, default=0, metavar="N", help="print N flagged texts of the tuning half"
    )
    parser.add_argument(
        "--show-held-out", action="store_true", help="also print the held-out half's (after tuning)"
    )
    parser.add_argument(
        "--baseline", default=BASELINE, help="git revision of the screen to compare ('' for none)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per half; the best counts")
    args = parser.parse_args()

    started = time.perf_counter()
    texts = collect(args.limit)
    collected_s = time.perf_counter() - started
    halves = {half: [t for t in texts if t.half == half] for half in ("tuning", "held-out")}
    corpus = {
        "texts": len(texts),
        "by_source": dict(Counter(t.source for t in texts).most_common()),
        "halves": {half: len(items) for half, items in halves.items()},
        "mean_chars": sum(len(t.text) for t in texts) / max(1, len(texts)),
        "min_chars": MIN_CHARS,
        "min_words": MIN_WORDS,
        "collect_seconds": round(collected_s, 1),
    }
    screens: list[tuple[str, Screen]] = []
    before = baseline_screen(args.baseline) if args.baseline else None
    if before is not None:
        screens.append((f"before ({args.baseline[:7]})", before))
    elif args.baseline:
        print(
            f"baseline {args.baseline} not found in git: only the current screen is measured", file=sys.stderr
        )
    screens.append(("current", injection.injection_reason))
    results = [measure(name, screen, halves, args.repeat) for name, screen in screens]

    print(report(results, corpus))
    current = results[-1]
    for result in results:
        if result["hostile"]["missed"]:
            print(f"\n{result['screen']} missed {len(result['hostile']['missed'])} hostile texts:")
            print("\n".join(f"- {text!r}" for text in result["hostile"]["missed"]))
    if args.show_flagged:
        print(show(current, "tuning", args.show_flagged))
        if args.show_held_out:
            print(show(current, "held-out", args.show_flagged))

    held_out = current["halves"]["held-out"]
    passed = held_out["false_positives_per_100k"] <= TARGET_PER_100K and current["hostile"]["recall"] == 1.0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": machine_info(),
        "target_false_positives_per_100k": TARGET_PER_100K,
        "passed": passed,
        "corpus": corpus,
        "results": results,
    }
    args.out.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"\n{'target met' if passed else 'TARGET MISSED'}; written to {args.out}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
