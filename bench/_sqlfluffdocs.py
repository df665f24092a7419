"""A retrieval dataset in another language: sqlfluff's SQL rule documentation, labelled by sqlfluff.

Source: the rules shipped in the ``sqlfluff`` wheel of the dev group (``get_ruleset()``: code, name,
groups and rule class). Each rule class's docstring is RST: a description line, maybe more prose, then
``**Name**``/``**Aliases**``/``**Groups**``/``**Configuration**`` boilerplate and ``**Anti-pattern**`` /
``**Best practice**`` sections holding ``.. code-block:: sql`` examples. For every rule with an SQL (or
Jinja) block under "Anti-pattern":

- the **lesson** is the docstring's prose: the description line and the paragraphs after it, and the
  Anti-pattern and Best practice sections (and any other section but the boilerplate ones), with every
  directive block dropped (code blocks, ``.. note::``, tables), the section labels dropped, RST inline
  markup turned into markdown (````AS```` and ``:code:`AS``` become `AS`, links keep their text),
  "This rule is ``sqlfluff fix`` compatible." dropped and whitespace collapsed; capped at
  ``LESSON_MAX_CHARS``. Tagged with the rule's groups but "all" and "core" (``aliasing``, ``layout``,
  ``tsql``) and ``sqlfluff``. Neither the rule's name nor its code is a tag.
- its **provenance** (``learned_from``) is the first Anti-pattern block, with the docs' markers made
  real: ``•`` is a space, ``→`` a tab (where the docstring says so) and a final ``$`` the end of file;
- the **query** is what an agent would see next time: sqlfluff lints that SQL with only that rule
  selected (in the dialect its groups name, e.g. ``tsql``, else ``ansi``; rules off by default through
  ``force_enable`` are forced on) and the rule's first violation gives ``"<message>\\n<lines>"``, the
  lines running from the violation's line to the end of the statement holding it, at most
  ``MAX_QUERY_LINES``, cut at a blank line and without trailing ``--`` comment lines (the docs put
  several examples in one block, separated so); the harder ``code`` variant is the lines alone. Labels are mechanical.
- its **repeats** are the rule's later violations on the same example, in source order, their lines found
  the same way: those whose lines hold a letter and differ from the first's and from each other's, at most
  ``MAX_REPEATS``.

Dropped and listed: rules whose example gets no violation of that rule (e.g. ``CV09`` flags nothing
until its ``blocked_words`` are configured; examples the dialect cannot parse), and layout rules whose
violating lines hold no letter (a whitespace-only code query). Rules without an Anti-pattern SQL block
are counted apart. Linting goes through the in-process ``Linter`` API, one rule at a time (milliseconds
each, no subprocess).

Leakage, stated: sqlfluff's message is often the rule's description line verbatim, which is the first
line of the lesson: the ``message+code`` query nearly names its answer. The ``code`` variant (SQL alone)
is the honest measure here; with provenance it is a slice of the lesson's ``learned_from``, reported
apart as in the ruff dataset.
"""

from __future__ import annotations

import functools
import re
from importlib.metadata import version
from inspect import cleandoc
from pathlib import Path
from textwrap import dedent
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

TASK_TYPE = "sql"
LINTER = "sqlfluff"
DEFAULT_DIALECT = "ansi"
DATASET_VERSION = 2  # bump when the way cases are built changes, so old caches are ignored

BOILERPLATE_SECTIONS = {"Name", "Aliases", "Groups", "Configuration"}
GENERIC_GROUPS = {"all", "core"}
EXAMPLE_LANGS = {"sql", "jinja"}

_HEADING = re.compile(r"^\*\*(?P<name>[^*]+)\*\*:?[ \t]*(?P<rest>.*)$")
# Explicit markup: a directive (``.. code-block:: sql``), a comment (``.. note:``), a link target.
_DIRECTIVE = re.compile(r"^(?P<indent>\s*)\.\.(?:\s+(?P<kind>[\w:-]+?)::[ \t]*(?P<arg>\S*))?(?:\s|$)")
_OPTION = re.compile(r"^\s*:[\w-]+:")
_FIX_COMPATIBLE = re.compile(r"This rule is ``sqlfluff fix`` compatible\.")
_ROLE = re.compile(r":(?:[\w-]+:)+`([^`]+)`")
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_+")
_LITERAL = re.compile(r"``(.+?)``")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}(?=\S)([^*\n]+?)(?<=\S)\*{1,2}(?![\w*])")
# Layout rules can point at a blank line: a code query without letters is no query.
_LETTER = re.compile(r"[A-Za-z]")


def sqlfluff_version() -> str:
    return version("sqlfluff")


def sqlfluff_rules() -> list[dict[str, Any]]:
    """Every rule of the installed sqlfluff: code, name, groups, docstring, config keywords."""
    from sqlfluff.core.rules import get_ruleset

    found = []
    for manifest in get_ruleset()._register.values():
        found.append(
            {
                "code": manifest.code,
                "name": manifest.name,
                "groups": list(manifest.groups),
                "doc": cleandoc(manifest.rule_class.__doc__ or ""),
                "config": list(getattr(manifest.rule_class, "config_keywords", []) or []),
            }
        )
    return sorted(found, key=lambda rule: rule["code"])


@functools.cache
def dialects() -> frozenset[str]:
    import sqlfluff

    return frozenset(d.label for d in sqlfluff.list_dialects())


def rule_dialects(rule: dict[str, Any]) -> list[str]:
    """The dialect its groups name (else ``ansi``), then those its docstring names as ````literals````."""
    first = next((g for g in rule["groups"] if g in dialects()), DEFAULT_DIALECT)
    named = [d for d in _LITERAL.findall(rule["doc"]) if d in dialects()]
    return list(dict.fromkeys([first, *named]))


# --------------------------------------------------------------------- RST → lesson, example


def split_rst(doc: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """``(section, prose)`` pieces with directive blocks cut out, and ``(section, lang, code)`` of the
    code blocks. The text before the first ``**Heading**`` is the section ``""``."""
    prose: list[tuple[str, str]] = []
    blocks: list[tuple[str, str, str]] = []
    section, lines, i = "", doc.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        heading = _HEADING.match(line)
        directive = _DIRECTIVE.match(line)
        if heading:
            section = heading["name"].strip()
            if heading["rest"]:
                prose.append((section, heading["rest"]))
            i += 1
        elif directive:
            indent = len(directive["indent"])
            i += 1
            body: list[str] = []
            while i < len(lines) and (
                not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent
            ):
                body.append(lines[i])
                i += 1
            if directive["kind"] == "code-block":
                while body and (not body[0].strip() or _OPTION.match(body[0])):
                    body.pop(0)
                blocks.append((section, directive["arg"].lower(), dedent("\n".join(body)).strip("\n")))
            prose.append((section, ""))  # a directive ends the paragraph before it
        else:
            prose.append((section, line))
            i += 1
    return prose, blocks


def rst_inline(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    text = _ROLE.sub(r"`\1`", text)
    text = _LITERAL.sub(r"`\1`", text)
    return _EMPHASIS.sub(r"\1", text)


def lesson_text(doc: str) -> str:
    """The prose of every section but the boilerplate, as markdown paragraphs."""
    prose, _ = split_rst(doc)
    text = "\n".join(line for section, line in prose if section not in BOILERPLATE_SECTIONS)
    text = _FIX_COMPATIBLE.sub("", text)
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        # Bullet items stay one per line; the lines of a paragraph or an item are joined.
        items = re.split(r"\n\s*(?=[*-] )", block.strip())
        paragraph = "\n".join(" ".join(rst_inline(item).split()) for item in items if item.strip())
        if paragraph:
            paragraphs.append(paragraph)
    return "\n\n".join(paragraphs)[:LESSON_MAX_CHARS].strip()


def example_sql(doc: str) -> str | None:
    """The first Anti-pattern code block, with the docs' visible markers for blanks made real."""
    _, blocks = split_rst(doc)
    code = next((c for s, lang, c in blocks if s == "Anti-pattern" and lang in EXAMPLE_LANGS), None)
    if not code or not code.strip():
        return None
    code = code.replace("•", " ")
    if "represents a tab" in doc:
        code = code.replace("→", "\t")
    if "beginning of the file" in doc and code.startswith("^"):
        code = code[1:]
    end_of_file = re.search(r"\$[ \t]*$", code, re.M)
    if "end of file" in doc and end_of_file:
        return code[: end_of_file.start()]  # the block's first file ends right there
    return code if code.endswith("\n") else code + "\n"


def rule_tags(rule: dict[str, Any]) -> list[str]:
    tags = [g.lower() for g in rule["groups"] if g.lower() not in GENERIC_GROUPS]
    return list(dict.fromkeys([*tags, "sqlfluff"]))


# --------------------------------------------------------------------- violations


def diagnose(rule: dict[str, Any], sql: str, dialect: str) -> dict[str, Any] | None:
    """The rule's first violation on ``sql`` (message, the lines from it to its statement's end, row) with
    ``repeats``, its later ones; ``None`` when it has none."""
    from sqlfluff.core import FluffConfig, Linter

    configs: dict[str, Any] = {}
    if "force_enable" in rule["config"]:
        configs = {"rules": {rule["name"]: {"force_enable": True}}}
    config = FluffConfig(configs=configs, overrides={"dialect": dialect, "rules": rule["code"]})
    linted = Linter(config=config).lint_string(sql)
    violations = sorted(
        (v for v in linted.get_violations() if v.rule_code() == rule["code"]),
        key=lambda v: (v.line_no, v.line_pos),
    )
    if not violations:
        return None
    statements: list[tuple[int, int]] = []  # (first line, last line) of every statement
    if linted.tree is not None:
        for statement in linted.tree.recursive_crawl("statement"):
            marker = statement.pos_marker
            if marker is not None:
                statements.append(
                    (marker.source_position()[0], marker.end_point_marker().source_position()[0])
                )

    def lines_from(row: int) -> str:
        spans = [(end - start, end) for start, end in statements if start <= row <= end]
        last = min(spans)[1] if spans else row
        shown: list[str] = []
        for line in sql.splitlines()[row - 1 : min(last, row + MAX_QUERY_LINES - 1)]:
            if shown and not line.strip():
                break  # the docs separate their examples with blank lines (and comments, dropped below)
            shown.append(line)
        while len(shown) > 1 and shown[-1].lstrip().startswith("--"):
            shown.pop()
        return "\n".join(shown).strip("\n")

    found: list[dict[str, Any]] = [
        {"message": " ".join(v.desc().split()), "lines": lines_from(v.line_no), "row": v.line_no}
        for v in violations
    ]
    first, *later = found
    return {**first, "repeats": repeats(first, (d for d in later if _LETTER.search(d["lines"])))}


# --------------------------------------------------------------------- the dataset


def build_dataset() -> dict[str, Any]:
    """Lessons (one per distinct rule text) and cases (one per rule sqlfluff flags on its example)."""
    rules = sqlfluff_rules()
    examples: dict[str, str] = {}
    no_example: list[str] = []
    for rule in rules:
        example = example_sql(rule["doc"])
        if example and lesson_text(rule["doc"]):
            examples[rule["code"]] = example
        else:
            no_example.append(rule["code"])
    diagnostics: dict[str, dict[str, Any]] = {}
    for rule in rules:
        for dialect in rule_dialects(rule) if rule["code"] in examples else []:
            found = diagnose(rule, examples[rule["code"]], dialect)
            if found:
                if _LETTER.search(found["lines"]):
                    diagnostics[rule["code"]] = found
                break
    assembled = assemble(
        rules,
        diagnostics,
        lambda rule: lesson_record(
            f"sqlfluff-{rule['code'].lower()}",
            lesson_text(rule["doc"]),
            rule_tags(rule),
            TASK_TYPE,
            examples[rule["code"]],
        ),
        lambda rule: LINTER,
    )
    return dataset_record(
        DATASET_VERSION,
        f"sqlfluff {sqlfluff_version()} rule documentation",
        len(rules),
        no_example,
        examples,
        diagnostics,
        assembled,
    )


def load_dataset(cache_dir: Path = CACHE_DIR, *, rebuild: bool = False) -> dict[str, Any]:
    """The full dataset, built once per sqlfluff version and cached as JSON."""
    path = cache_dir / f"sqlfluffdocs-{sqlfluff_version()}-v{DATASET_VERSION}.json"
    return cached_dataset(path, build_dataset, rebuild)
