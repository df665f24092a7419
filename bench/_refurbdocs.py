"""A retrieval dataset from refurb's check documentation, labelled by refurb (the ruff dataset's shape).

Source: the checks shipped in the ``refurb`` wheel of the dev group. Every module under ``refurb/checks``
defines an ``ErrorInfo`` class whose docstring is the check's explanation (what ``refurb --explain
FURB123`` prints): prose, then "Bad:" and "Good:" fenced code blocks. For every check with a "Bad:" block:

- the **lesson** is the explanation's prose before the examples (up to the first "Examples:"/"Bad:"
  line), fenced code dropped, inline backtick spans kept as written, whitespace collapsed, capped at
  ``LESSON_MAX_CHARS`` (it may end with the ":" that introduced the examples). Tagged with the check's
  categories (``readability``, ``pathlib``) and ``furb``. Neither the check's name nor its code is a tag.
  Prose after the examples ("Note: ...", "In addition, ..." with more examples) is left out, as the ruff
  dataset leaves out "Known problems".
- its **provenance** (``learned_from``) is the first "Bad:" block, the code the lesson was learned on;
- the **query** is what an agent would see next time: refurb is run on that code and the check's first
  diagnostic on it gives ``"<message>\\n<offending source lines>"``; the harder ``code`` variant is the
  source lines alone. refurb reports a line and column only, so the lines are those of the smallest
  statement spanning the reported line (found with ``ast``), at most ``MAX_QUERY_LINES``. Labels are
  mechanical: the query's answer is the check it came from.
- its **repeats** are the check's later diagnostics on the same example, in source order, built the same
  way: those whose lines differ from the first's and from each other's, at most ``MAX_REPEATS``.

Running refurb: one process (refurb runs mypy, so each process costs seconds) over a temporary folder
holding every example as ``furb<code>.py``, with ``--enable-all`` (some checks are off by default) and
``--quiet``, from inside that folder (no project config is read, mypy's cache lands there too). Checks
where refurb reports nothing of that check on its own example are dropped and listed: mostly examples
that use a name they never import (``os.getcwd()`` without ``import os``), which leaves mypy without the
types the check needs. Checks without a "Bad:" block are counted apart.

Leakage, stated: refurb's message is usually "Replace `<bad>` with `<good>`", which repeats the example's
own code and often the lesson's backticked spans; that is realistic (an agent sees the message), and the
``code`` variant measures recall without it. With provenance, the ``code`` query is a slice of the
lesson's ``learned_from`` text, reported apart as in the ruff dataset.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
import tempfile
from importlib.metadata import version
from inspect import cleandoc
from pathlib import Path
from typing import Any

from _ruffdocs import (
    CACHE_DIR,
    MAX_QUERY_LINES,
    assemble,
    cached_dataset,
    dataset_record,
    lesson_record,
    repeats,
)
from lessonbank.models import LESSON_MAX_CHARS

__all__ = ["CACHE_DIR", "DATASET_VERSION", "build_dataset", "load_dataset"]

TASK_TYPE = "python"
LINTER = "refurb"
DATASET_VERSION = 2  # bump when the way cases are built changes, so old caches are ignored

_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_EXAMPLES = re.compile(r"^(?:Examples|Bad):\s*$", re.M)
_BAD_BLOCK = re.compile(r"^Bad:\s*$\s*```[^\n]*\n(.*?)```", re.M | re.S)
_DIAGNOSTIC = re.compile(r"^(?P<file>.+?):(?P<row>\d+):(?P<col>\d+) \[(?P<code>[A-Z]+\d+)\]: (?P<msg>.*)$")


def refurb_version() -> str:
    return version("refurb")


def refurb_checks() -> list[dict[str, Any]]:
    """Every check of the installed refurb: code (``FURB123``), name, categories, explanation."""
    import refurb.checks
    from refurb.loader import get_error_class

    found = []
    for info in pkgutil.walk_packages(refurb.checks.__path__, "refurb.checks."):
        if info.ispkg:
            continue
        error = get_error_class(importlib.import_module(info.name))
        if error is None:
            continue
        doc = error.__doc__ or ""
        if doc.startswith(f"{error.__name__}("):  # the dataclass's generated docstring: no explanation
            doc = ""
        found.append(
            {
                "code": f"{error.prefix}{error.code}",
                "name": error.name or "",
                "categories": list(error.categories),
                "explanation": cleandoc(doc),
            }
        )
    return sorted(found, key=lambda check: check["code"])


# --------------------------------------------------------------------- explanation → lesson, example


def lesson_text(explanation: str) -> str:
    """The prose before the examples: code blocks dropped, backtick spans kept, paragraphs collapsed."""
    head = _EXAMPLES.split(explanation, maxsplit=1)[0]
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", _FENCE.sub("", head))]
    return "\n\n".join(p for p in paragraphs if p)[:LESSON_MAX_CHARS].strip()


def example_code(explanation: str) -> str | None:
    """The first "Bad:" block."""
    block = _BAD_BLOCK.search(explanation)
    if not block or not block.group(1).strip():
        return None
    code = block.group(1)
    return code if code.endswith("\n") else code + "\n"


def check_tags(check: dict[str, Any]) -> list[str]:
    tags = [re.sub(r"[^a-z0-9]+", "-", c.lower()).strip("-") for c in check["categories"]]
    return list(dict.fromkeys([*(t for t in tags if t), "furb"]))


# --------------------------------------------------------------------- diagnostics


def statement_lines(source: str, row: int) -> str:
    """The lines of the smallest statement spanning line ``row`` (at most ``MAX_QUERY_LINES``)."""
    lines = source.splitlines()
    first = last = row
    try:
        spans = [
            (node.end_lineno - node.lineno, node.lineno, node.end_lineno)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.stmt) and node.end_lineno and node.lineno <= row <= node.end_lineno
        ]
    except SyntaxError:
        spans = []
    if spans:
        _, first, last = min(spans, key=lambda span: (span[0], -span[1]))
    return "\n".join(lines[first - 1 : min(last, first + MAX_QUERY_LINES - 1)]).strip("\n")


def diagnose(examples: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Check code → its first diagnostic on its own example (message, lines, row) with ``repeats``, its
    later ones; misses are absent."""
    with tempfile.TemporaryDirectory(prefix="lb-refurbdocs-") as tmp:
        root = Path(tmp)
        for code, source in examples.items():
            (root / f"{code.lower()}.py").write_text(source, "utf-8")
        command = [sys.executable, "-m", "refurb", "--enable-all", "--quiet", "--sort", "filename", "."]
        done = subprocess.run(command, capture_output=True, text=True, cwd=root, check=False)
    diagnostics = [m for m in map(_DIAGNOSTIC.match, done.stdout.splitlines()) if m]
    if done.returncode not in (0, 1) or (done.returncode == 1 and not diagnostics):
        raise RuntimeError(f"refurb failed ({done.returncode}): {(done.stderr or done.stdout)[:500]}")
    by_file = {f"{code.lower()}.py": code for code in examples}
    owned: dict[str, list[dict[str, Any]]] = {}  # check code → its diagnostics on its example
    for diag in sorted(diagnostics, key=lambda m: (m["file"], int(m["row"]), int(m["col"]))):
        owner = by_file.get(Path(diag["file"]).name)
        if owner and diag["code"] == owner:
            row = int(diag["row"])
            owned.setdefault(owner, []).append(
                {
                    "message": " ".join(diag["msg"].split()),
                    "lines": statement_lines(examples[owner], row),
                    "row": row,
                }
            )
    return {code: {**first, "repeats": repeats(first, later)} for code, (first, *later) in owned.items()}


# --------------------------------------------------------------------- the dataset


def build_dataset() -> dict[str, Any]:
    """Lessons (one per distinct check text) and cases (one per check refurb flags on its example)."""
    checks = refurb_checks()
    examples: dict[str, str] = {}
    no_example: list[str] = []
    for check in checks:
        example = example_code(check["explanation"])
        if example and lesson_text(check["explanation"]):
            examples[check["code"]] = example
        else:
            no_example.append(check["code"])
    diagnostics = diagnose(examples)
    # A diagnostic whose lines hold no letters gives no code query: as good as none.
    usable = {code: d for code, d in diagnostics.items() if re.search(r"[A-Za-z]", d["lines"])}
    assembled = assemble(
        checks,
        usable,
        lambda rule: lesson_record(
            f"furb-{rule['code'].removeprefix('FURB').lower()}",
            lesson_text(rule["explanation"]),
            check_tags(rule),
            TASK_TYPE,
            examples[rule["code"]],
        ),
        lambda rule: LINTER,
    )
    return dataset_record(
        DATASET_VERSION,
        f"refurb {refurb_version()} check documentation",
        len(checks),
        no_example,
        examples,
        usable,
        assembled,
    )


def load_dataset(cache_dir: Path = CACHE_DIR, *, rebuild: bool = False) -> dict[str, Any]:
    """The full dataset, built once per refurb version and cached as JSON."""
    path = cache_dir / f"refurbdocs-{refurb_version()}-v{DATASET_VERSION}.json"
    return cached_dataset(path, build_dataset, rebuild)
