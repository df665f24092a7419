"""Code-aware terms: what a task that shows code and a lesson written in prose share.

A task often shows code (a fenced block, an inline `span`, a diff, a traceback, or nothing but
code) where the lesson that applies speaks prose ("Checks for lambda expressions assigned to a
variable"). Plain word tokens of the code miss most of what it says. This module finds the code in
a text (:func:`split_code`) and reads it (:func:`code_words`):

- identifiers are split the way prose names their parts: ``snake_case``, ``camelCase``, dotted
  ``os.path.join`` (``ssl_version`` → ``ssl``, ``version``; ``getElementById`` → ``get``,
  ``element``, ``by``, ``id``);
- Python is parsed (``ast``, and ``tokenize`` where a fragment does not parse): called names,
  attributes, imports, decorators and keyword arguments, and each construct the code uses under the
  words prose uses for it (``lambda``, ``comprehension``, ``f-string``, ``try``/``except``,
  ``with``, ``await``, ``assert``, ``global`` ...);
- other languages (SQL, shell, JavaScript) are read by a generic tokenizer: their keywords and
  identifiers are already words.

Deterministic, standard library only. Only queries are read this way; a lesson's inline code spans
are found by :func:`inline_code`.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
import warnings
from collections.abc import Iterator

from lessonbank.text import STOPWORDS, keywords, words

# Code longer than this is read by the generic tokenizer only, and a query's code is looked for in
# its first this many characters (parsing a huge paste costs time and says little more).
MAX_PARSED_CHARS = 20_000

_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)
_INLINE = re.compile(r"(?<!`)``?([^`\n]+?)``?(?!`)")
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A line that reads as code (after a diff's +/- marker, if any): a statement of Python or SQL in its
# own shape (keywords are case-sensitive: prose starts "If ..." and "Return ..."), a decorator, a
# prompt or traceback line, a call (a name directly followed by "("), an assignment or comparison, or
# a line ending in "{" or ";", a subscript, a snake_case or camelCase name. Prose with "(see below)"
# or a "- bullet" stays prose.
_CODE_LINE = re.compile(
    r"^\s*(?:(?:async\s+)?def\s+\w+\s*\(|class\s+\w+\s*[(:]|(?:from\s+[\w.]+\s+)?import\s+[\w.*]+\s*(?:,|as\b|$)"
    r"|(?:if|elif|while|for|with|try|except|finally|else|match|case)\b[^\n]*:\s*(?:#.*)?$"
    r"|(?:return|raise|yield|await|assert|del|global|nonlocal|lambda|pass|break|continue)\b(?:\s+[^\s.,;]|$)"
    r"|(?:SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP)\s+\S|@[A-Za-z_]|>>> |File \"|Traceback \()"
    r"|[A-Za-z_\]\)]\(|[A-Za-z_]\w*\[|[\w\]\)]\s*(?:[-+*/%|&^<>=!]?=)\s*\S|[{;]\s*$"
    r"|\b[a-z][a-z0-9]*_\w+|\b[a-z]+[A-Z]\w*"
)
_DIFF_MARK = re.compile(r"^[+-](?![+-])")
_TRACEBACK = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)', re.M)

# Each Python construct under the words prose uses for it (lint docs, code review, style guides).
_CONSTRUCTS: dict[type[ast.AST], str] = {
    ast.Lambda: "lambda",
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
    ast.JoinedStr: "f-string format",
    ast.Try: "try except exception",
    ast.Assert: "assert",
    ast.Global: "global",
    ast.Nonlocal: "nonlocal",
    ast.With: "with context manager",
    ast.AsyncWith: "async with context manager",
    ast.AsyncFunctionDef: "async function",
    ast.AsyncFor: "async for",
    ast.Await: "await async",
    ast.Yield: "yield generator",
    ast.YieldFrom: "yield from generator",
    ast.Raise: "raise exception",
    ast.Starred: "star unpacking",
    ast.Return: "return",
    ast.ClassDef: "class",
    ast.FunctionDef: "function",
    ast.Import: "import",
    ast.ImportFrom: "import",
    ast.Dict: "dict",
    ast.List: "list",
    ast.Tuple: "tuple",
    ast.Set: "set",
    ast.Subscript: "index",
    ast.Slice: "slice",
    ast.Delete: "del",
    ast.AugAssign: "augmented assignment",
    ast.NamedExpr: "assignment expression",
    ast.IfExp: "ternary conditional expression",
    ast.Match: "match case",
    ast.For: "for loop",
    ast.While: "while loop",
    ast.If: "if",
    ast.BoolOp: "boolean",
    ast.Compare: "comparison",
    ast.Pass: "pass",
    ast.Break: "break",
    ast.Continue: "continue",
    ast.AnnAssign: "annotation type",
}


def split_identifier(name: str) -> list[str]:
    """The lowercase parts of an identifier: ``os.path.getmtime`` → os, path, getmtime;
    ``HTTPServerError`` → http, server, error; ``ssl_version`` → ssl, version."""
    parts: list[str] = []
    for piece in re.split(r"[^A-Za-z0-9]+", name):
        parts.extend(part.lower() for part in _CAMEL_PART.findall(piece))
    return parts


def split_code(text: str) -> tuple[str, list[str]]:
    """``text`` as (its prose, its pieces of code): fenced blocks, inline spans, and runs of lines
    that read as code (a pasted snippet, a diff, a traceback). A text whose every line reads as
    code is all code."""
    code, rest = _spans(text)
    prose_lines: list[str] = []
    run: list[str] = []
    for line in rest.splitlines():
        if line.strip() and _CODE_LINE.search(_DIFF_MARK.sub("", line)):
            run.append(line)
            continue
        if run:
            code.append("\n".join(run))
            run = []
        prose_lines.append(line)
    if run:
        code.append("\n".join(run))
    prose = "\n".join(prose_lines).strip()
    if not code and _is_python(prose):
        return "", [prose]  # no line looked like code, yet the whole is a Python expression or statement
    return prose, code


def code_words(code: str, *, constructs: bool = True) -> list[str]:
    """What a piece of code says, as lowercase words (distinct, in order): its tokens, identifiers
    split into their parts, and (``constructs``) for Python what it calls, imports and uses."""
    found: dict[str, None] = {}
    for word in words(code):
        found.setdefault(word, None)
    for name in _IDENTIFIER.findall(code):
        for part in split_identifier(name):
            found.setdefault(part, None)
    if constructs and len(code) <= MAX_PARSED_CHARS:
        for word in _python_words(code):
            found.setdefault(word, None)
    return [word for word in found if word not in STOPWORDS]


def query_words(text: str, limit: int) -> list[str]:
    """The words a lexical recall looks for in ``text``: its keywords, then what its code adds, at
    most ``limit``, each once. Split identifiers always; the constructs of Python only when the text
    is all code: beside prose (a diagnostic's message) they added noise more than meaning (recall@1
    of message-and-code queries −0.016 with them, +0.003 without, on bench/retrieval.py's tuning
    half, code-only queries equal)."""
    base = keywords(text)
    prose, pieces = split_code(text[:MAX_PARSED_CHARS])  # a huge paste: its head says what it is
    if not pieces:
        return base[:limit]
    seen = dict.fromkeys(base)
    extra = [word for piece in pieces for word in code_words(piece, constructs=not prose) if word not in seen]
    # The code's own words come first where the cap bites: they are what the code says beyond
    # its literal tokens, and a long paste would otherwise push them all out.
    room = max(limit - len(base), min(len(extra), limit // 4))
    chosen = list(dict.fromkeys(extra))[:room]
    return base[: limit - len(chosen)] + chosen


def inline_code(text: str) -> list[str]:
    """The code a lesson names: its fenced blocks and inline `spans`."""
    return _spans(text)[0]


def _spans(text: str) -> tuple[list[str], str]:
    """The fenced blocks and inline spans of ``text``, and the text without them."""
    code = [block for block in _FENCE.findall(text) if block.strip()]
    rest = _FENCE.sub("\n", text)
    code += [span for span in _INLINE.findall(rest) if span.strip()]
    return code, _INLINE.sub(" ", rest)


# ----------------------------------------------------------------- Python

_PLAIN = (ast.Module, ast.Expr, ast.Name, ast.Load, ast.Constant)


def _is_python(text: str) -> bool:
    """Whether ``text`` parses as Python that is more than bare words (``hello`` parses as a name)."""
    tree = _ast(textwrap.dedent(text)) if text and len(text) <= MAX_PARSED_CHARS else None
    try:
        return tree is not None and any(not isinstance(node, _PLAIN) for node in ast.walk(tree))
    except RecursionError:
        return False


def _ast(source: str) -> ast.Module | None:
    """``source`` parsed, or None when it is not Python (or too deep to parse)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in pasted strings
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _parse(code: str) -> ast.Module | None:
    """The module a fragment makes: as written, dedented, with a body for a trailing block opener,
    or with diff markers and traceback frames removed; None when no reading parses."""
    source = textwrap.dedent(code)
    lines = [_DIFF_MARK.sub("", line) for line in source.splitlines() if not _TRACEBACK.match(line)]
    stripped = textwrap.dedent("\n".join(lines))
    for attempt in (source, stripped, stripped + "\n    pass", stripped.rstrip().rstrip(":,(")):
        tree = _ast(attempt)
        if tree is not None:
            return tree
    return None


def _python_words(code: str) -> Iterator[str]:
    tree = _parse(code)
    if tree is None:
        yield from _token_words(code)
        return
    try:
        nodes = list(ast.walk(tree))
    except RecursionError:
        return
    for node in nodes:
        construct = _CONSTRUCTS.get(type(node))
        if construct:
            yield from words(construct)
        if isinstance(node, ast.ExceptHandler) and node.type is None:
            yield from ("bare", "except")
        elif isinstance(node, ast.keyword) and node.arg:
            yield from ("keyword", "argument", *split_identifier(node.arg))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.decorator_list:
            yield "decorator"
        elif isinstance(node, ast.Attribute):
            yield from split_identifier(node.attr)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                yield from split_identifier(alias.name)


def _token_words(code: str) -> Iterator[str]:
    """Names of a fragment that does not parse, by Python's tokenizer (keywords and identifiers)."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(textwrap.dedent(code)).readline):
            if token.type == tokenize.NAME:
                yield from split_identifier(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):
        return
