"""The commands an evaluator knows: which tool a command line runs, what kind of check it is, and
the arguments (or environment) that make it print the output its parser reads.

Pure decisions on argv, package.json and the environment; nothing is run here (see
:mod:`lessonbank.loop.evaluators`). A package manager's test script (``npm test``,
``npm run test:coverage``) is asked for its runner's machine output only when npm runs it and the
script is one plain command (``jest``, ``vitest run``, ``node --test``): arguments after ``--``
reach that command and no other.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

CheckKind = Literal["tests", "types", "lint", "other"]

_PACKAGE_MANAGERS = ("npm", "pnpm", "yarn", "bun")
_TOOLS = ("pytest", "mypy", "ruff", "tsc", "eslint", "jest", "vitest")
_MARKDOWNLINT = ("markdownlint", "markdownlint-cli", "markdownlint-cli2")


def tool_of(argv: Sequence[str]) -> str:
    """The known tool a command runs: ``pytest``, ``mypy``, ``ruff``, ``tsc``, ``eslint``, ``jest``,
    ``vitest``, ``node-test`` (``node --test``), ``npm-test`` (a package manager's test script:
    ``npm test``, ``npm run test:coverage``, ``yarn test``…), ``markdownlint``, or ``other``."""
    names = [Path(token).name for token in argv[:4]]
    if names and names[0] == "node" and "--test" in argv:
        return "node-test"
    if names and names[0] in _PACKAGE_MANAGERS and _test_script(names[0], list(argv[1:3])) is not None:
        return "npm-test"
    for index, name in enumerate(names):
        if name == "-m" and index + 1 < len(names):
            name = names[index + 1]
        for tool in _TOOLS:
            if name == tool or name.startswith(f"{tool}."):
                return tool
        if name in _MARKDOWNLINT:
            return "markdownlint"
    return "other"


def _test_script(manager: str, args: list[str]) -> str | None:
    """The package.json script a package manager's command runs when it is a test script."""
    if not args:
        return None
    if args[0] in ("run", "run-script") and len(args) > 1:
        script = args[1]
    elif manager == "npm" and args[0] in ("t", "tst", "test"):
        script = "test"
    else:
        script = args[0]
    return script if script == "test" or script.startswith(("test:", "test-")) else None


def module_of(argv: Sequence[str]) -> str | None:
    """The module ``python -m MODULE`` runs (``python``, ``python3.12``, a venv's python…), else None."""
    for index in range(min(len(argv), 4) - 1):
        if (
            argv[index] == "-m"
            and index > 0
            and re.fullmatch(r"(?:python|pypy)[\d.]*", Path(argv[index - 1]).name)
        ):
            return argv[index + 1]
    return None


def missing_module(argv: Sequence[str], code: int | None, err: str) -> str | None:
    """The module of a ``python -m MODULE`` command that failed because its Python lacks it."""
    module = module_of(argv)
    if module is None or code in (0, None):
        return None
    # Python's own message (no quotes, unlike an import error inside the tool), e.g.
    # "/usr/bin/python3: No module named pytest" or "… No module named mypy.__main__; 'mypy' is a package…"
    pattern = rf"^[^\n]*: No module named {re.escape(module)}(?:\.__main__)?(?:;[^\n]*)?\s*$"
    return module if re.search(pattern, err, re.MULTILINE) else None


KIND: dict[str, CheckKind] = {
    "pytest": "tests",
    "jest": "tests",
    "vitest": "tests",
    "node-test": "tests",
    "npm-test": "tests",
    "markdownlint": "lint",
    "mypy": "types",
    "tsc": "types",
    "ruff": "lint",
    "eslint": "lint",
    "other": "other",
}


def extra_args(
    tool: str, scratch: Path, *, argv: Sequence[str], cwd: Path, env: dict[str, str] | None
) -> tuple[list[str], dict[str, str] | None]:
    """The arguments (and environment) that make ``tool`` print what its parser reads."""
    report = scratch / "report.json"
    if tool == "pytest":
        return [f"--junitxml={scratch / 'junit.xml'}", "-p", "no:cacheprovider"], env
    if tool == "ruff":
        return ["--output-format", "json"], env
    if tool == "eslint":
        return ["-f", "json"], env
    if tool == "mypy":
        return ["--show-column-numbers", "--no-pretty", "--no-error-summary"], env
    if tool == "tsc":
        return ["--pretty", "false"], env
    if tool in ("jest", "vitest"):
        return _js_report_args(tool, argv, report), env
    if tool == "node-test":
        return [], _tap_env(argv, env)
    if tool == "npm-test" and Path(argv[0]).name == "npm":
        # npm passes what follows "--" to the script: ask its runner for its machine output.
        script = _package_script(cwd, _test_script("npm", list(argv[1:3])) or "test")
        runner = tool_of(shlex.split(script)) if script and not re.search(r"&&|\|\||[;|<>`$]", script) else ""
        if runner in ("jest", "vitest"):
            more = _js_report_args(runner, [*argv, *shlex.split(script)], report)
            return (["--", *more] if more and "--" not in argv else []), env
        if runner == "node-test":
            return [], _tap_env([*argv, *shlex.split(script)], env)
    return [], env


def _js_report_args(tool: str, argv: Sequence[str], report: Path) -> list[str]:
    """jest's ``--json`` / vitest's json reporter written to ``report``, unless the command chose
    its own output (then its stdout is read)."""
    if any(arg.startswith(("--json", "--outputFile", "--reporter")) for arg in argv):
        return []
    if tool == "jest":
        return ["--json", f"--outputFile={report}"]
    return ["--reporter=json", f"--outputFile={report}"]


def _tap_env(argv: Sequence[str], env: dict[str, str] | None) -> dict[str, str] | None:
    """The environment with node's TAP reporter asked for (node ≥ 23 prints spec by default)."""
    base = dict(os.environ if env is None else env)
    if any(arg.startswith("--test-reporter") for arg in argv) or "--test-reporter" in base.get(
        "NODE_OPTIONS", ""
    ):
        return env
    base["NODE_OPTIONS"] = f"{base.get('NODE_OPTIONS', '')} --test-reporter=tap".strip()
    return base


def _package_script(cwd: Path, name: str) -> str:
    """``scripts[name]`` of ``cwd/package.json``, or '' when there is none."""
    try:
        scripts = json.loads((cwd / "package.json").read_text("utf-8")).get("scripts") or {}
    except (OSError, ValueError, AttributeError):
        return ""
    script = scripts.get(name) if isinstance(scripts, dict) else None
    return script if isinstance(script, str) else ""
