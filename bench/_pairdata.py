"""A labelled set of lesson pairs for the consolidation pre-pass: paraphrases, contradictions and
distinct lessons that share most words, from text nobody on the team wrote (plus a few written by hand).

Sources (each pair carries its ``source``):

- ``bugbear`` / ``pycodestyle`` / ``pydocstyle``: two independent documentations of one check. The original
  tool's message (from its wheel on PyPI, read without installing it: ``pip download --no-deps``) against
  the first paragraph of ruff's "Why is this bad?" for the same code (``ruff rule --all``). Label
  ``paraphrase``; pairs whose two texts are the same words are left out (ruff often copies a summary);
- ``pylint`` / ``pyflakes`` / ``comprehensions`` / ``simplify`` / ``pep8-naming`` / ``flake8-return`` /
  ``flake8-pie`` / ``bandit``: the same for the other linters ruff implements, read by ``bench/_lintdocs.py``
  (pylint's message description, pyflakes's and the plugins' messages) against the first paragraph of
  ruff's "What it does" (these texts say what is flagged, as that paragraph does, where bugbear's explain
  why). Label ``paraphrase``; the same words, or a message of fewer than three words, are left out;
- ``reflections``: successive self-reflections GPT-4 wrote on one problem (``../shared/data``: same
  ``task_id``). Label ``same-problem``: the same problem diagnosed again, most often a different diagnosis
  ("it wrongly excludes 100" / "it wrongly includes 100"), so not a duplicate and not a distinct pair
  either. The pairs a person read in the label audit (``bench/consolidation_audit.py``, the held half)
  carry its verdict (``audit``); the reflection pairs it found to be one lesson are labelled
  ``paraphrase``, the two documentation pairs it found to state different things ``mismatch``;
- ``ruff-alternative``: rules ruff documents as alternatives of each other ("For an alternative, see
  [D211]": D203/D211, D212/D213, ...), the first sentence of each one's advice. Label ``contradiction``;
- ``ruff-siblings``: the summaries of two different ruff rules that share most words (token Jaccard ≥
  0.6, the same literals or none: "whitespace *before* ..." / "*after* ..."). Label ``distinct``;
- ``hand``: pairs written for the issue's examples (paraphrases, contradictions, distinct siblings such
  as ``*args`` / ``**kwargs``).

Each pair has a ``key`` (the rule code or task id it comes from) and a ``half``: ``tune`` or ``held``,
from a hash of the key (pairs of one rule or one task stay in one half). Thresholds are tuned on
``tune`` only. Written to ``tests/data/lesson_pairs.jsonl`` by ``python bench/_pairdata.py``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from itertools import combinations, pairwise
from pathlib import Path
from typing import Any

import _lintdocs
import _ruffdocs
from lessonbank.text import jaccard, literals, same_lesson, words

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "lesson_pairs.jsonl"
REFLECTIONS = ROOT.parent / "shared" / "data" / "reflexion-gpt4-runs.jsonl"
ORIGINALS = {"flake8-bugbear": "bugbear", "pycodestyle": "pycodestyle", "pydocstyle": "pydocstyle"}
MAX_CHARS = 400  # a lesson-sized text: longer ones are cut at a sentence end
SIBLING_JACCARD = 0.6
MAX_SIBLINGS = 80
MAX_REFLECTION_TASKS = 40

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def half_of(key: str) -> str:
    return "tune" if hashlib.sha256(key.encode()).digest()[0] % 2 == 0 else "held"


def clip(text: str, limit: int = MAX_CHARS) -> str:
    """Whole sentences up to ``limit`` characters (at least the first one)."""
    text = " ".join(text.split())
    kept: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        if kept and len(" ".join([*kept, sentence])) > limit:
            break
        kept.append(sentence)
    return " ".join(kept)[: limit * 2]


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(" ".join(text.split()))[0]


def download(package: str, directory: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(directory), package],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    name = package.replace("-", "_")
    return next(directory.glob(f"{name}-*.whl"))


def original_messages(directory: Path) -> dict[str, tuple[str, str]]:
    """code → (source, message) from the original tools' wheels."""
    found: dict[str, tuple[str, str]] = {}
    with zipfile.ZipFile(download("flake8-bugbear", directory)) as wheel:
        tree = ast.parse(wheel.read("bugbear.py"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Call) and value.keywords:
                    message = value.keywords[0].value
                    if isinstance(message, ast.Constant) and isinstance(message.value, str):
                        code, _, text = message.value.partition(" ")
                        if code == key.value:
                            found[code] = ("bugbear", text)
    with zipfile.ZipFile(download("pycodestyle", directory)) as wheel:
        source = wheel.read("pycodestyle.py").decode()
    for code, text in re.findall(r"\"([EW]\d{3}) ([^\"{}%]+)\"", source):
        found.setdefault(code, ("pycodestyle", text))
    with zipfile.ZipFile(download("pydocstyle", directory)) as wheel:
        source = wheel.read("pydocstyle/violations.py").decode()
    for code, text in re.findall(r"'(D\d{3})',\s*'([^']+)'", source):
        found.setdefault(code, ("pydocstyle", text))
    return found


def other_messages(directory: Path) -> dict[str, tuple[str, str]]:
    """ruff code → (source, text) from the other linters' wheels (``bench/_lintdocs.py``)."""
    found: dict[str, tuple[str, str]] = {}
    flake8 = _lintdocs.sources(download("flake8", directory))
    sources = {
        "pylint": _lintdocs.pylint(_lintdocs.sources(download("pylint", directory))),
        "pyflakes": _lintdocs.pyflakes(_lintdocs.sources(download("pyflakes", directory)), flake8),
    }
    for package, (source, to_ruff) in _lintdocs.PLUGINS.items():
        sources[source] = _lintdocs.plugin(_lintdocs.sources(download(package, directory)), to_ruff)
    for source, messages in sources.items():
        for code, text in messages.items():
            found.setdefault(code, (source, text))
    return found


def why(rule: dict[str, Any]) -> str:
    return first_paragraph(rule, "Why is this bad?")


def what(rule: dict[str, Any]) -> str:
    return first_paragraph(rule, "What it does")


def first_paragraph(rule: dict[str, Any], section: str) -> str:
    body = _ruffdocs.sections(rule["explanation"]).get(section, "")
    paragraphs = _ruffdocs.prose(body).split("\n\n")
    return clip(paragraphs[0]) if paragraphs and paragraphs[0] else ""


def pair(a: str, b: str, label: str, source: str, key: str) -> dict[str, Any]:
    return {"a": a, "b": b, "label": label, "source": source, "key": key, "half": half_of(key)}


def documentation_pairs(
    rules: dict[str, dict[str, Any]],
    originals: dict[str, tuple[str, str]],
    section: Callable[[dict[str, Any]], str] = why,
    min_words: int = 0,
) -> Iterator[dict[str, Any]]:
    for code, (source, message) in sorted(originals.items()):
        rule = rules.get(code)
        if rule is None:
            continue
        theirs, ours = clip(message), section(rule)
        if len(words(theirs)) < min_words:
            continue
        if ours and not same_lesson(theirs, ours) and jaccard(words(theirs), words(ours)) < 0.9:
            yield pair(theirs, ours, "paraphrase", source, code)


def alternative_pairs(rules: dict[str, dict[str, Any]]) -> Iterator[dict[str, Any]]:
    seen: set[tuple[str, str]] = set()
    for code, rule in sorted(rules.items()):
        for other in re.findall(r"For an alternative, see \[(\w+)\]", rule["explanation"]):
            if other not in rules or tuple(sorted((code, other))) in seen:
                continue
            seen.add((min(code, other), max(code, other)))
            key = f"{min(code, other)}/{max(code, other)}"
            a, b = first_sentence(why(rule)), first_sentence(why(rules[other]))
            if a and b and a != b:
                yield pair(a, b, "contradiction", "ruff-alternative", key)
            yield pair(rule["summary"], rules[other]["summary"], "contradiction", "ruff-alternative", key)


def sibling_pairs(rules: dict[str, dict[str, Any]], skip: set[str]) -> Iterator[dict[str, Any]]:
    summaries = {code: rule["summary"] for code, rule in sorted(rules.items()) if code not in skip}
    found = 0
    for (code_a, a), (code_b, b) in combinations(summaries.items(), 2):
        if same_lesson(a, b) or literals(a) != literals(b):
            continue
        if jaccard(words(a), words(b)) >= SIBLING_JACCARD:
            yield pair(a, b, "distinct", "ruff-siblings", f"{code_a}/{code_b}")
            found += 1
            if found >= MAX_SIBLINGS:
                return


def reflection_pairs() -> Iterator[dict[str, Any]]:
    tasks = 0
    for line in REFLECTIONS.read_text().splitlines():
        run = json.loads(line)
        texts = [clip(text) for text in run["reflections"] if text.strip()]
        if len(texts) < 2:
            continue
        for a, b in pairwise(texts):
            if not same_lesson(a, b):
                yield pair(a, b, "paraphrase", "reflections", run["task_id"])
        tasks += 1
        if tasks >= MAX_REFLECTION_TASKS:
            return


HAND: list[tuple[str, str, str, str]] = [
    # (label, a, b, key)
    (
        "paraphrase",
        "Set PIP_INDEX_URL to the internal mirror before pip install in CI",
        "In CI, point PIP_INDEX_URL at the internal mirror before running pip install",
        "hand-pip",
    ),
    ("paraphrase", "Before pushing, run the linter", "Run the linter before pushing", "hand-lint"),
    (
        "paraphrase",
        "use the Edit tool, not a full file rewrite",
        "use the Edit tool rather than rewriting the full file",
        "hand-edit",
    ),
    (
        "paraphrase",
        "Run the full test suite before you commit.",
        "Always run the tests before committing.",
        "hand-tests",
    ),
    (
        "paraphrase",
        "Pin dependency versions in requirements files.",
        "In requirements files, pin the versions of dependencies.",
        "hand-pin",
    ),
    (
        "paraphrase",
        "Never commit secrets to the repository.",
        "Do not commit secrets into the repo.",
        "hand-secrets",
    ),
    (
        "paraphrase",
        "Restart the worker after changing its configuration.",
        "After a configuration change, restart the worker.",
        "hand-restart",
    ),
    (
        "paraphrase",
        "Use pathlib instead of os.path for file paths.",
        "For file paths, prefer pathlib over os.path.",
        "hand-pathlib",
    ),
    (
        "paraphrase",
        "Close database connections when a test ends.",
        "When the test finishes, close its database connections.",
        "hand-close",
    ),
    (
        "paraphrase",
        "Read the error message before editing the code.",
        "Before editing code, read the error message first.",
        "hand-read",
    ),
    (
        "contradiction",
        "Always run the migrations before deploying.",
        "Never run the migrations before deploying.",
        "hand-migrate",
    ),
    (
        "contradiction",
        "Use the Edit tool for large files.",
        "Avoid the Edit tool for large files.",
        "hand-edit-avoid",
    ),
    ("contradiction", "Enable the cache in CI builds.", "Disable the cache in CI builds.", "hand-cache"),
    ("contradiction", "Run the linter before pushing.", "Run the linter after pushing.", "hand-lint-after"),
    ("contradiction", "Retry flaky network calls.", "Do not retry flaky network calls.", "hand-retry"),
    (
        "distinct",
        "Annotate `*args` with the type of one positional argument.",
        "Annotate `**kwargs` with the type of one keyword argument.",
        "hand-args",
    ),
    ("distinct", "Check whitespace after keywords.", "Check whitespace before keywords.", "hand-ws"),
    (
        "distinct",
        "Use one blank line before a class docstring (D203).",
        "Use one blank line before a function docstring (D201).",
        "hand-d2",
    ),
    (
        "distinct",
        "Pin numpy to 1.26 for the ARM builds.",
        "Pin numpy to 2.0 for the ARM builds.",
        "hand-numpy",
    ),
    (
        "distinct",
        "Run the unit tests before committing.",
        "Run the integration tests before committing.",
        "hand-unit",
    ),
    (
        "distinct",
        "The indentation error is in `is_prime`: indent the body.",
        "The indentation error is in `sum_of_digits`: indent the body.",
        "hand-indent",
    ),
    (
        "distinct",
        "Set PIP_INDEX_URL to the internal mirror in CI.",
        "Set UV_INDEX_URL to the internal mirror in CI.",
        "hand-uv",
    ),
]


def build() -> list[dict[str, Any]]:
    rules = {rule["code"]: rule for rule in _ruffdocs.ruff_rules(_ruffdocs.ruff_binary()) if rule.get("code")}
    with tempfile.TemporaryDirectory() as directory:
        originals = original_messages(Path(directory))
        others = other_messages(Path(directory))
    records = list(documentation_pairs(rules, originals))
    records += documentation_pairs(rules, others, what, min_words=3)
    alternatives = list(alternative_pairs(rules))
    records += alternatives
    if "W503" in originals and "W504" in originals:  # pycodestyle's two documented alternatives
        records.append(
            pair(originals["W503"][1], originals["W504"][1], "contradiction", "pycodestyle", "W503/W504")
        )
    skip = {code for record in alternatives for code in record["key"].split("/")}
    records += sibling_pairs(rules, skip)
    records += reflection_pairs()
    records += [pair(a, b, label, "hand", key) for label, a, b, key in HAND]
    relabel(records)
    return records


# The sources of the held half's label audit, and the labels its population had ("paraphrase" then): the
# audit's sample is drawn from them in file order, so a relabelled pair stays in it.
AUDITED_SOURCES = ("bugbear", "pycodestyle", "pydocstyle", "reflections", "hand")
DUPLICATE_LABELS = ("paraphrase", "same-problem", "mismatch")


def audit_sample(
    records: list[dict[str, Any]], rng: random.Random, size: int, half: str = "held"
) -> list[dict[str, Any]]:
    """The label audit's sample of duplicate pairs (``bench/consolidation_audit.py``)."""
    population = [
        record
        for record in records
        if record["half"] == half
        and record["source"] in AUDITED_SOURCES
        and record["label"] in DUPLICATE_LABELS
    ]
    return rng.sample(population, min(size, len(population)))


def relabel(records: list[dict[str, Any]]) -> None:
    """Successive reflections are one problem, not one lesson, unless the audit read them as one lesson;
    a documentation pair the audit found to state something else is a ``mismatch``."""
    from consolidation_audit import FINGERPRINT, SEED, VERDICTS, fingerprint

    for record in records:
        if record["source"] == "reflections":
            record["label"] = "same-problem"
    sample = audit_sample(records, random.Random(SEED), len(VERDICTS))
    if fingerprint(sample) != FINGERPRINT:
        raise SystemExit(f"the audit's verdicts were read for sample {FINGERPRINT}: read it again")
    for record, verdict in zip(sample, VERDICTS, strict=True):
        record["audit"] = verdict
        if verdict == "right":
            record["label"] = "paraphrase"
        elif verdict == "wrong" and record["source"] != "reflections":
            record["label"] = "mismatch"


def load(path: Path = OUT) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    built = build()
    OUT.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in built))
    counts: dict[tuple[str, str], int] = {}
    for record in built:
        counts[(record["source"], record["label"])] = counts.get((record["source"], record["label"]), 0) + 1
    for (source, label), count in sorted(counts.items()):
        print(f"{source:18} {label:14} {count}")
    print(f"{len(built)} pairs -> {OUT.relative_to(ROOT)}")
