"""A retrieval dataset from text nobody on the team wrote: ruff's own rule documentation, labelled by ruff.

Source: ``ruff rule --all --output-format json`` (the documentation compiled into the ``ruff`` wheel of the
dev group). For every rule whose "## Example" section holds a Python code block:

- the **lesson** is the rule's prose advice: its "What it does" and "Why is this bad?" sections, code blocks
  and markdown removed (inline code keeps its backticks), capped at ``LESSON_MAX_CHARS``; tagged with the linter family (``flake8-bugbear``)
  and the code's letter prefix (``b``). Neither the rule's name, nor its code, nor its title is a tag.
- its **provenance** (``learned_from``: the task the lesson was learned on) is the bad example code;
- the **query** is what an agent would see next time: ruff is run on that example code and the first
  diagnostic of the rule gives ``"<message>\\n<offending source lines>"``; the harder ``code`` variant is
  the offending source lines alone. Labels are mechanical: the query's answer is the rule it came from.
- its **repeats** are the rule's later diagnostics on the same example, in source order, built the same
  way: those whose lines differ from the first's and from each other's, at most ``MAX_REPEATS`` (the next
  similar task of the same rule, to measure whether feedback on one task helps the next).

Rules where ruff reports nothing of that rule on its own example (file-level rules, options off by
default, notebook-only rules, rules disabled by a conflicting one) are dropped and counted. Running ruff:
one process over all examples with ``--select ALL --preview``; the examples it missed are tried again one
rule at a time (a rule can be switched off by an incompatible one under ``ALL``), each time also with the
other file extension (``.pyi`` for stub rules written as ``python`` blocks and the other way round).

Leakage, stated: ruff's message often repeats the rule's title, and the title's words often appear in the
lesson's prose. That is realistic (an agent sees the message), and the ``code`` variant measures recall
without it. With provenance, the ``code`` query is a slice of the lesson's ``learned_from`` text: that is
exactly the case provenance is for (a new task that looks like an old one), and it is reported apart.

Distractors (to pad the bank to 10k or 100k lessons) are other real prose available offline: docstring
paragraphs of the standard library and of the installed packages, each with the source of the function
or class it documents as its ``learned_from``. Both the dataset and the distractors are cached as JSON
(keyed by the ruff version, resp. the Python version and the count).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lessonbank.models import LEARNED_FROM_MAX_CHARS, LESSON_MAX_CHARS
from lessonbank.text import normalize

CACHE_DIR = Path(__file__).resolve().parent / "results" / "cache"
TASK_TYPE = "python"  # the same for rules and distractors, so task_type tells nothing
MAX_QUERY_LINES = 5  # of a multi-line diagnostic range, what the agent would be shown
MAX_REPEATS = 3  # later diagnostics of a rule on its own example kept per case
PROSE_SECTIONS = ("What it does", "Why is this bad?")
DATASET_VERSION = 3  # bump when the way cases are built changes, so old caches are ignored

_SECTION = re.compile(r"^##\s+(.+?)\s*$", re.M)
_FENCE = re.compile(r"```([\w+-]*)[^\n]*\n(.*?)```", re.S)
_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]|\[([^\]]+)\]\([^)]*\)")
_LINK_DEF = re.compile(r"^\[[^\]]+\]:\s*\S+.*$", re.M)
# Emphasis is unwrapped; inline code keeps its backticks, as a team's own guidelines would write it.
_EMPHASIS = re.compile(r"(\*\*|__|\*)")
_PY_LANGS = {"python": ".py", "py": ".py", "pyi": ".pyi", "": ".py"}


# --------------------------------------------------------------------- ruff


def ruff_binary() -> str:
    """The ruff executable of this environment (the dev group's wheel), else the one on PATH."""
    try:
        from ruff.__main__ import find_ruff_bin

        return str(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        local = Path(sys.executable).with_name("ruff")
        return str(local) if local.exists() else "ruff"


def ruff_version(ruff: str) -> str:
    out = subprocess.run([ruff, "--version"], capture_output=True, text=True, check=True).stdout
    return out.split()[-1]


def ruff_rules(ruff: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [ruff, "rule", "--all", "--output-format", "json"], capture_output=True, text=True, check=True
    ).stdout
    rules: list[dict[str, Any]] = json.loads(out)
    return rules


# --------------------------------------------------------------------- markdown → lesson, example


def sections(markdown: str) -> dict[str, str]:
    """``## Heading`` → body, in order; text before the first heading is dropped."""
    found: dict[str, str] = {}
    heads = list(_SECTION.finditer(markdown))
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        end = after.start() if after else len(markdown)
        found.setdefault(head.group(1), markdown[head.end() : end].strip())
    return found


def prose(markdown: str) -> str:
    """Markdown to plain text: code blocks dropped, links and emphasis unwrapped, paragraphs kept."""
    text = _FENCE.sub("", markdown)
    text = _LINK_DEF.sub("", text)
    text = _LINK.sub(lambda m: m.group(1) or m.group(2), text)
    text = _EMPHASIS.sub("", text)
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return "\n\n".join(p for p in paragraphs if p)


def lesson_text(explanation: str) -> str:
    parts = sections(explanation)
    text = "\n\n".join(prose(parts[name]) for name in PROSE_SECTIONS if parts.get(name))
    return text[:LESSON_MAX_CHARS].strip()


def example_code(explanation: str) -> tuple[str, str] | None:
    """The first Python block of the "Example(s)" section (the bad code) and its file suffix."""
    parts = sections(explanation)
    body = parts.get("Example") or parts.get("Examples")
    if not body:
        return None
    block = _FENCE.search(body)
    if not block or block.group(1).lower() not in _PY_LANGS:
        return None
    code = block.group(2)
    return (code if code.endswith("\n") else code + "\n"), _PY_LANGS[block.group(1).lower()]


def linter_tags(rule: dict[str, Any]) -> list[str]:
    """The linter family and the code's letter prefix: what a team would file a lint lesson under."""
    tags = []
    if rule.get("linter"):
        tags.append(re.sub(r"[^a-z0-9]+", "-", rule["linter"].lower()).strip("-"))
    prefix = re.match(r"[A-Z]+", rule["code"])
    if prefix:
        tags.append(prefix.group(0).lower())
    return tags


# --------------------------------------------------------------------- diagnostics


def _check(ruff: str, files: Sequence[Path], select: str, cwd: Path) -> list[dict[str, Any]]:
    command = [ruff, "check", "--isolated", "--no-cache", "--preview", "--exit-zero"]
    command += ["--select", select, "--output-format", "json", *map(str, files)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ruff failed ({done.returncode}): {done.stderr[:500]}")
    found: list[dict[str, Any]] = json.loads(done.stdout or "[]")
    return found


def queries(message: str, lines: str) -> dict[str, str]:
    """A case's queries: the message with the offending lines, and the lines alone."""
    return {"message+code": f"{message}\n{lines}".strip(), "code": lines}


def repeats(first: dict[str, Any], later: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``later`` diagnostics (in order) as a case's repeats: distinct code queries, none the
    ``first``'s, at most ``MAX_REPEATS``."""
    seen = {first["lines"]}
    found: list[dict[str, Any]] = []
    for diag in later:
        if len(found) == MAX_REPEATS:
            break
        if diag["lines"] not in seen:
            seen.add(diag["lines"])
            found.append(
                {
                    "message": diag["message"],
                    "lines": diag["lines"],
                    "queries": queries(diag["message"], diag["lines"]),
                }
            )
    return found


def diagnose(ruff: str, examples: dict[str, tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """Rule code → its first diagnostic on its own example (message, lines, suffix) with ``repeats``, its
    later ones; misses are absent."""
    found: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="lb-ruffdocs-") as tmp:
        root = Path(tmp)

        def write(code: str, suffix: str) -> Path:
            folder = root / code.lower()
            folder.mkdir(exist_ok=True)
            path = folder / f"example{suffix}"
            path.write_text(examples[code][0], "utf-8")
            return path

        def collect(diagnostics: list[dict[str, Any]], by_file: dict[str, tuple[str, str]]) -> None:
            owned: dict[str, list[dict[str, Any]]] = {}  # rule code → its diagnostics on its example
            for diag in sorted(diagnostics, key=lambda d: (d["filename"], d["location"]["row"])):
                owner = by_file.get(str(Path(diag["filename"]).resolve()))
                if owner and diag.get("code") == owner[0] and owner[0] not in found:
                    owned.setdefault(owner[0], []).append(_diagnostic(diag, examples[owner[0]][0], owner[1]))
            for code, (first, *later) in owned.items():
                found[code] = {**first, "repeats": repeats(first, later)}

        # Pass 1: one ruff process, every rule, each example in its own folder (some rules look at names).
        by_file = {
            str(write(code, suffix).resolve()): (code, suffix) for code, (_, suffix) in examples.items()
        }
        collect(_check(ruff, [Path(p) for p in by_file], "ALL", root), by_file)
        # Pass 2: what ALL missed, one rule at a time, with its own suffix and then the other one.
        for code, (_, suffix) in sorted(examples.items()):
            for attempt in (suffix, ".pyi" if suffix == ".py" else ".py"):
                if code in found:
                    break
                path = write(code, attempt)
                collect(_check(ruff, [path], code, root), {str(path.resolve()): (code, attempt)})
    return found


def _diagnostic(diag: dict[str, Any], source: str, suffix: str) -> dict[str, Any]:
    lines = source.splitlines()
    first = diag["location"]["row"]
    last = max(first, (diag.get("end_location") or diag["location"])["row"])
    shown = [line for line in lines[first - 1 : min(last, first + MAX_QUERY_LINES - 1)]]
    return {
        "message": " ".join(diag["message"].split()),
        "lines": "\n".join(shown).strip("\n"),
        "row": first,
        "suffix": suffix,
    }


# --------------------------------------------------------------------- the dataset


def build_dataset(ruff: str | None = None, codes: Sequence[str] | None = None) -> dict[str, Any]:
    """Lessons (one per distinct rule text) and cases (one per rule that ruff flags on its example)."""
    ruff = ruff or ruff_binary()
    # Removed rules cannot run; a few preview rules have no code yet (nothing can select them).
    rules = [r for r in ruff_rules(ruff) if r.get("code") and "Removed" not in (r.get("status") or {})]
    if codes is not None:
        wanted = set(codes)
        rules = [r for r in rules if r["code"] in wanted]
    examples: dict[str, tuple[str, str]] = {}
    no_example: list[str] = []
    for rule in rules:
        example = example_code(rule["explanation"])
        if example and lesson_text(rule["explanation"]):
            examples[rule["code"]] = example
        else:
            no_example.append(rule["code"])
    diagnostics = diagnose(ruff, examples)
    lessons, cases = assemble(
        rules,
        diagnostics,
        lambda rule: lesson_record(
            f"ruff-{rule['code'].lower()}",
            lesson_text(rule["explanation"]),
            linter_tags(rule),
            TASK_TYPE,
            examples[rule["code"]][0],
        ),
        lambda rule: rule.get("linter"),
    )
    dropped = sorted(set(examples) - set(diagnostics))
    return {
        "version": DATASET_VERSION,
        "ruff_version": ruff_version(ruff),
        "rules": len(rules),
        "rules_without_example": len(no_example),
        "rules_with_example": len(examples),
        "dropped_no_diagnostic": dropped,
        "lessons": lessons,
        "cases": cases,
    }


def lesson_record(
    lesson_id: str, content: str, tags: list[str], task_type: str, example: str
) -> dict[str, Any]:
    """A dataset lesson: a rule's prose, imported, learned on its bad example (cut to the bank's limit)."""
    return {
        "id": lesson_id,
        "content": content,
        "kind": "lesson",
        "tags": tags,
        "task_type": task_type,
        "learned_from": example[:LEARNED_FROM_MAX_CHARS].strip(),
        "source": "import",
    }


def assemble(
    rules: Sequence[dict[str, Any]],
    diagnostics: dict[str, dict[str, Any]],
    lesson_of: Callable[[dict[str, Any]], dict[str, Any]],
    linter: Callable[[dict[str, Any]], str | None],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The lessons (``lesson_of`` each rule that has a diagnostic) and the cases (one per such rule).
    Two rules with the same prose are one lesson (the bank would merge them): both cases expect it."""
    lessons: dict[str, dict[str, Any]] = {}  # normalized content → lesson
    cases: list[dict[str, Any]] = []
    for rule in rules:
        diag = diagnostics.get(rule["code"])
        if diag is None:
            continue
        new = lesson_of(rule)
        lesson = lessons.setdefault(normalize(new["content"]), new)
        cases.append(
            {
                "rule": rule["code"],
                "name": rule["name"],
                "linter": linter(rule),
                "expected": lesson["id"],
                "message": diag["message"],
                "lines": diag["lines"],
                "queries": queries(diag["message"], diag["lines"]),
                "name_in_message": _words_in(rule["name"], diag["message"]),
                "repeats": diag["repeats"],
            }
        )
    return list(lessons.values()), cases


def dataset_record(
    version: int,
    source: str,
    rules: int,
    no_example: Sequence[str],
    examples: Mapping[str, Any],
    diagnosed: Mapping[str, Any],
    assembled: tuple[list[dict[str, Any]], list[dict[str, Any]]],
) -> dict[str, Any]:
    """A dataset as the benchmark reads it: its counts, what was dropped, its lessons and cases."""
    lessons, cases = assembled
    return {
        "version": version,
        "source": source,
        "rules": rules,
        "rules_without_example": len(no_example),
        "rules_with_example": len(examples),
        "dropped_no_diagnostic": sorted(set(examples) - set(diagnosed)),
        "lessons": lessons,
        "cases": cases,
    }


def cached_dataset(path: Path, build: Callable[[], dict[str, Any]], rebuild: bool) -> dict[str, Any]:
    """The dataset cached at ``path``, built (and cached) when absent or ``rebuild``."""
    if path.exists() and not rebuild:
        cached: dict[str, Any] = json.loads(path.read_text("utf-8"))
        return cached
    dataset = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataset, indent=1), "utf-8")
    return dataset


def _words_in(name: str, message: str) -> float:
    """Share of the rule name's words found in the message (how much of the answer's name the query repeats)."""
    words = set(re.findall(r"[a-z0-9]+", name.lower()))
    if not words:
        return 0.0
    return len(words & set(re.findall(r"[a-z0-9]+", message.lower()))) / len(words)


def load_dataset(cache_dir: Path = CACHE_DIR, *, rebuild: bool = False) -> dict[str, Any]:
    """The full dataset, built once per ruff version and cached as JSON."""
    ruff = ruff_binary()
    path = cache_dir / f"ruffdocs-{ruff_version(ruff)}-v{DATASET_VERSION}.json"
    return cached_dataset(path, lambda: build_dataset(ruff), rebuild)


# --------------------------------------------------------------------- distractors


def _source_roots() -> list[Path]:
    paths = sysconfig.get_paths()
    return [Path(p) for p in dict.fromkeys([paths["stdlib"], paths["purelib"]]) if Path(p).is_dir()]


@functools.cache
def _python_files() -> tuple[Path, ...]:
    """Every .py file of the stdlib and site-packages, in a fixed pseudo-random order (by path hash)."""
    files = []
    for root in _source_roots():
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in {"__pycache__", "ruff"} and not d.endswith(".dist-info")]
            files += [Path(folder) / n for n in names if n.endswith(".py")]
    return tuple(sorted(files, key=lambda p: hashlib.sha256(str(p).encode()).hexdigest()))


def _paragraphs(doc: str) -> Iterator[str]:
    for block in re.split(r"\n\s*\n", doc):
        text = " ".join(block.split())
        if len(text) < 80 or text.startswith((">>>", "..", "-", "=", ":")):
            continue
        words = text.split()
        # Prose, not parameter tables or code: most tokens are plain words.
        if sum(w.strip(".,;:()'\"").isalpha() for w in words) < 0.7 * len(words):
            continue
        yield text[:2000]


Documented = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def documented(tree: ast.Module) -> Iterator[Documented]:
    """The module, classes and functions, found through statement bodies only (ast.walk would visit every
    expression node, which is most of the time spent on 30k files)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Documented):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                stack.extend(
                    child for child in reversed(children) if isinstance(child, ast.stmt | ast.excepthandler)
                )


def _docstring_lessons(path: Path) -> Iterator[dict[str, Any]]:
    try:
        source = path.read_text("utf-8")
        tree = ast.parse(source)
        lines = source.splitlines()
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
        return
    package = path.stem if path.stem != "__init__" else path.parent.name
    for node in documented(tree):
        doc = ast.get_docstring(node)
        if not doc:
            continue
        code = ""
        if not isinstance(node, ast.Module):
            # Sliced by line numbers: ast.get_source_segment re-splits the whole file on every call.
            code = "\n".join(lines[node.lineno - 1 : (node.end_lineno or node.lineno)])
        for paragraph in _paragraphs(doc):
            yield {
                "content": paragraph,
                "kind": "lesson",
                "tags": [re.sub(r"[^a-z0-9]+", "-", package.lower()).strip("-")[:64] or "python"],
                "task_type": TASK_TYPE,
                "learned_from": code[:LEARNED_FROM_MAX_CHARS].strip() or None,
                "source": "import",
            }


def _sentences(lesson: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The sentences (≥ 80 chars) of a multi-sentence paragraph, each a lesson with the same source."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z])", lesson["content"])
    if len(parts) < 2:
        return
    for sentence in parts:
        if len(sentence) >= 80:
            yield {**lesson, "content": sentence}


def build_distractors(count: int, exclude: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Up to ``count`` distinct docstring paragraphs (distinct after normalisation, none in ``exclude``).

    When the installed packages hold fewer paragraphs than asked (a lean virtualenv), a second pass
    adds the single sentences of multi-sentence paragraphs, in the same file order: still real prose,
    and the paragraphs found first keep their places, so smaller banks do not change.
    """
    seen = {normalize(text) for text in exclude}
    found: list[dict[str, Any]] = []

    def add(lesson: dict[str, Any]) -> bool:
        key = normalize(lesson["content"])
        if key not in seen:
            seen.add(key)
            found.append(lesson)
        return len(found) >= count

    paragraphs: list[dict[str, Any]] = []
    for path in _python_files():
        for lesson in _docstring_lessons(path):
            paragraphs.append(lesson)
            if add(lesson):
                return found
    for paragraph in paragraphs:
        for sentence in _sentences(paragraph):
            if add(sentence):
                return found
    return found


def load_distractors(
    count: int, exclude: Sequence[str] = (), cache_dir: Path = CACHE_DIR
) -> list[dict[str, Any]]:
    """``count`` distractors, cached; a cache built for more is cut (the order is fixed)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    digest = hashlib.sha256("\x1f".join(sorted(normalize(t) for t in exclude)).encode()).hexdigest()[:10]
    cache_dir.mkdir(parents=True, exist_ok=True)
    for cached in sorted(cache_dir.glob(f"distractors-v2-py{version}-{digest}-*.json")):
        lessons: list[dict[str, Any]] = json.loads(cached.read_text("utf-8"))
        # Named by the count asked; holds fewer when this environment had no more to give.
        if len(lessons) >= count or int(cached.stem.rsplit("-", 1)[1]) >= count:
            return lessons[:count]
    lessons = build_distractors(count, exclude)
    (cache_dir / f"distractors-v2-py{version}-{digest}-{count}.json").write_text(json.dumps(lessons), "utf-8")
    return lessons
