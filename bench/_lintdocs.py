"""Other linters' own descriptions of checks that ruff also implements, read from their wheels on PyPI
without installing or importing them (``pip download --no-deps``, then ``ast`` on the sources).

Each reader takes a wheel's Python sources (path → text) and returns ``{ruff code: text}``:

- **pylint** (``PL*``): the checkers' ``msgs`` dicts, ``"C0414": (message, symbol, description, ...)``;
  the description ("Used when an import alias is same as original package ...") is kept;
- **pyflakes** (``F*``): each message class's ``message`` template, its code from flake8's
  ``FLAKE8_PYFLAKES_CODES`` (flake8's wheel);
- **flake8 plugins** whose sources hold each code beside its message: a string ``"C400 Unnecessary
  generator ..."``, a class with ``code = "R501"`` and ``message = ...``, a class attribute
  ``N801 = "class name ..."``, a bandit test (``@test.test_id("B101")``, the issue's ``text=``) or
  bandit's deny-lists (``build_conf_dict(name, "B301", ..., message)``). Plugin codes map to ruff's by a
  prefix (flake8-return's ``R501`` is ruff's ``RET501``, bandit's ``B101`` is ``S101``).

Format placeholders (``'{name}'``, ``%r``) are dropped: a lesson states the rule, not one occurrence.
"""

from __future__ import annotations

import ast
import re
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

_CODE = r"[A-Z]{1,4}\d{3,4}"
_PREFIXED = re.compile(rf"^({_CODE}):?\s+(\S.*)$", re.S)
_PLACEHOLDER = re.compile(r"""\s*['"`]?(?:\{[^{}]*\}|%\(\w+\)[rsd]|%[rsd])['"`]?""")


def sources(wheel: Path) -> dict[str, str]:
    """A wheel's Python files, path → text."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            name: archive.read(name).decode("utf-8", "replace")
            for name in archive.namelist()
            if name.endswith(".py")
        }


def clean(template: str) -> str:
    """A message template as plain text: placeholders dropped, spaces collapsed."""
    text = _PLACEHOLDER.sub("", template)
    text = re.sub(r"^[a-z]+(?:-[a-z]+)+:\s*", "", text)  # flake8-pie's "no-unnecessary-pass: ": a rule name
    text = re.sub(r"\s+([,.:;)])", r"\1", " ".join(text.split()))
    return text.strip(" :-")


def _trees(files: Mapping[str, str]) -> Iterator[tuple[str, ast.Module]]:
    for name, text in sorted(files.items()):
        try:
            yield name, ast.parse(text)
        except SyntaxError:
            continue  # a file for another Python version: its messages are elsewhere too


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def pylint(files: Mapping[str, str]) -> dict[str, str]:
    """``PL<code>`` → the description of each message in the checkers' ``msgs`` dicts."""
    found: dict[str, str] = {}
    for name, tree in _trees(files):
        if not name.startswith(("pylint/checkers/", "pylint/extensions/")):
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if not any(isinstance(t, ast.Name) and t.id in {"msgs", "MSGS"} for t in targets):
                continue
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if not isinstance(value, ast.Dict):
                continue
            for key, entry in zip(value.keys, value.values, strict=True):
                code = _string(key)
                if code and isinstance(entry, ast.Tuple) and len(entry.elts) >= 3:
                    description = _string(entry.elts[2])
                    if description:
                        found.setdefault(f"PL{code}", clean(description))
    return found


def pyflakes(files: Mapping[str, str], flake8_files: Mapping[str, str]) -> dict[str, str]:
    """``F<code>`` → pyflakes's message template, codes from flake8's ``FLAKE8_PYFLAKES_CODES``."""
    codes: dict[str, str] = {}
    for _, tree in _trees(flake8_files):
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "FLAKE8_PYFLAKES_CODES" for t in node.targets)
                and isinstance(node.value, ast.Dict)
            ):
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    if (name := _string(key)) and (code := _string(value)):
                        codes[name] = code
    found: dict[str, str] = {}
    for _, tree in _trees(files):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in codes:
                message = _class_strings(node).get("message")
                if message:
                    found.setdefault(codes[node.name], clean(message))
    return found


def _class_strings(node: ast.ClassDef) -> dict[str, str]:
    """A class body's ``name = "string"`` assignments."""
    found: dict[str, str] = {}
    for statement in node.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, text = statement.targets[0], _string(statement.value)
            if isinstance(target, ast.Name) and text is not None:
                found[target.id] = text
    return found


def plugin(files: Mapping[str, str], to_ruff: Callable[[str], str]) -> dict[str, str]:
    """A flake8 plugin's codes (mapped by ``to_ruff``) → messages, wherever its sources state them."""
    found: dict[str, str] = {}

    def keep(code: str, text: str | None) -> None:
        if text and re.fullmatch(_CODE, code):
            found.setdefault(to_ruff(code), clean(text))

    for _, tree in _trees(files):
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if match := _PREFIXED.match(node.value):
                    keep(match.group(1), match.group(2))
            elif isinstance(node, ast.ClassDef):
                strings = _class_strings(node)
                if "code" in strings:
                    keep(strings["code"], strings.get("message"))
                for name, text in strings.items():
                    keep(name, text)  # ``N801 = "class name ..."``
            elif isinstance(node, ast.FunctionDef):
                code = _decorated_code(node)
                if code:
                    keep(code, _first_keyword(node, "text") or _message_in(node))
            elif isinstance(node, ast.Call) and _called(node) == "build_conf_dict" and len(node.args) >= 4:
                code = _string(node.args[1])
                if code:
                    keep(code, _string(node.args[3]))
    return found


def _called(node: ast.Call) -> str:
    function = node.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def _decorated_code(node: ast.FunctionDef) -> str | None:
    """The code of a check function: bandit's ``@test.test_id("B101")``, flake8-simplify's ``@rule("SIM101", ...)``."""
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and _called(decorator) in {"test_id", "rule"} and decorator.args:
            return _string(decorator.args[0])
    return None


def _message_in(node: ast.FunctionDef) -> str | None:
    """A check function's message: an upper-case constant (``RULE = "..."``), else the text of the first
    ``Violation(node, "...")``."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Assign) and len(inner.targets) == 1:
            target = inner.targets[0]
            if isinstance(target, ast.Name) and target.id.isupper() and (text := _string(inner.value)):
                return text
    for inner in ast.walk(node):
        if not (isinstance(inner, ast.Call) and _called(inner) == "Violation" and len(inner.args) >= 2):
            continue
        if text := _string(inner.args[1]):
            return text
    return None


def _first_keyword(node: ast.AST, keyword: str) -> str | None:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call):
            for argument in inner.keywords:
                if argument.arg == keyword and (text := _string(argument.value)):
                    return text
    return None


# wheel name → (source label, how its codes become ruff's)
PLUGINS: dict[str, tuple[str, Callable[[str], str]]] = {
    "flake8-comprehensions": ("comprehensions", lambda code: code),
    "flake8-simplify": ("simplify", lambda code: code),
    "pep8-naming": ("pep8-naming", lambda code: code),
    "flake8-return": ("flake8-return", lambda code: "RET" + code[1:]),
    "flake8-pie": ("flake8-pie", lambda code: code),
    "bandit": ("bandit", lambda code: "S" + code[1:]),
}
