"""Evaluators (seed 001's Me): run real checks and turn their output into structured errors.

:class:`CommandEvaluator` runs shell-free commands as subprocesses, each with a timeout (the
whole process group is killed when it expires), and recognises the tools it knows by their
first words: pytest (read through a JUnit XML report it asks for), mypy and tsc (their
``file:line`` diagnostics), ruff and eslint (their JSON output), the JavaScript test runners
(jest and vitest through a JSON report they are asked for, ``node --test`` through TAP, and
``npm test`` / ``npm run test…`` through whichever of those its script runs) and markdownlint
(its ``file:line rule`` lines or ``--json``): see :mod:`lessonbank.loop.jsreports`. Any other
command passes on exit code 0. :class:`FunctionEvaluator` wraps a Python callable for everything
else.

Reward (seed 001): 0.5 × tests passed / tests total + 0.3 if no type errors + 0.2 if no lint
errors. A kind of check that is absent counts as clean; a check that failed without parsable
diagnostics counts as one error, so a failed verification never earns the full 1.0.

A check that ran and failed is a failed verification; a check that could not run at all (the
program is missing, the directory does not exist, ``python -m tool`` whose Python has no such
module) raises :class:`EvaluatorError`, which the loop treats as a critical error.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from lessonbank.errors import EvaluatorError, InputError
from lessonbank.loop import jsreports
from lessonbank.loop.tools import KIND, CheckKind, extra_args, missing_module, tool_of
from lessonbank.models import VerificationResult
from lessonbank.text import truncate

CheckStatus = Literal["pass", "fail", "error", "skip"]
OUTPUT_MAX_CHARS = 4000
MESSAGE_MAX_CHARS = 500
MAX_ERRORS_PER_CHECK = 50
DEFAULT_TIMEOUT_S = 300.0
_STATUS_TO_EPISODE = {"pass": "passed", "fail": "failed", "error": "error", "skip": "skipped"}


@dataclass
class CheckResult:
    """One check: the seed's VerificationResult plus its parsed errors and counts."""

    tool: str
    kind: CheckKind
    status: CheckStatus
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_ms: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    tests_passed: int = 0
    tests_failed: int = 0
    warnings: int = 0

    def as_aiwg(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": self.tool, "status": self.status, "duration_ms": self.duration_ms}
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        if self.stdout:
            out["stdout"] = self.stdout
        if self.stderr:
            out["stderr"] = self.stderr
        return out


@dataclass
class Evaluation:
    """What an evaluator says about one iteration (the seed's EvaluatorOutput)."""

    passed: bool
    verification_type: str
    results: list[CheckResult]
    errors: list[dict[str, Any]]
    reward: float
    metrics: dict[str, Any]

    def as_aiwg(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "verification_type": self.verification_type,
            "results": [result.as_aiwg() for result in self.results],
            "errors": self.errors,
            "reward_signal": self.reward,
            "metrics": self.metrics,
        }

    def verification(self) -> list[VerificationResult]:
        """The checks as an Episode's verification results (stderr falls back to stdout's tail)."""
        return [
            VerificationResult(
                tool=result.tool,
                status=_STATUS_TO_EPISODE[result.status],  # type: ignore[arg-type]
                exit_code=result.exit_code,
                stderr=truncate(result.stderr or result.stdout, 1500) or None,
                errors=result.errors,
            )
            for result in self.results
        ]


class Evaluator(Protocol):
    """Verifies the actor's work. Built in: :class:`CommandEvaluator`, :class:`FunctionEvaluator`."""

    def evaluate(self, output: Any) -> Evaluation:
        """Run the checks against the current state of the work (``output`` is the ActorOutput)."""
        ...


def score(results: Sequence[CheckResult], *, verification_type: str | None = None) -> Evaluation:
    """Combine check results into an Evaluation: errors, metrics and the seed's reward."""
    tests = [r for r in results if r.kind in ("tests", "other")]
    tests_passed = sum(r.tests_passed for r in tests)
    tests_failed = sum(r.tests_failed for r in tests)
    total = tests_passed + tests_failed
    ratio = tests_passed / total if total else (1.0 if all(r.status == "pass" for r in tests) else 0.0)
    type_errors = sum(_error_count(r) for r in results if r.kind == "types")
    lint_errors = sum(_error_count(r) for r in results if r.kind == "lint")
    reward = 0.5 * ratio + (0.3 if type_errors == 0 else 0.0) + (0.2 if lint_errors == 0 else 0.0)
    passed = bool(results) and all(r.status in ("pass", "skip") for r in results)
    metrics: dict[str, Any] = {
        "tests_passed": tests_passed,
        "tests_failed": tests_failed,
        "tests_total": total,
        "type_errors": type_errors,
        "lint_errors": lint_errors,
        "lint_warnings": sum(r.warnings for r in results if r.kind == "lint"),
    }
    if verification_type is None:
        verification_type = _verification_of({r.kind for r in results})
    errors = [error for r in results for error in r.errors]
    return Evaluation(passed, verification_type, list(results), errors, round(reward, 4), metrics)


_VERIFICATION_OF_KIND = {"tests": "unit_tests", "types": "type_check", "lint": "lint", "other": "heuristic"}


def _verification_of(kinds: set[str]) -> str:
    """The seed's verification type of checks of these kinds: one kind's own, else ``combined``."""
    return _VERIFICATION_OF_KIND[kinds.pop()] if len(kinds) == 1 else "combined"


def verification_type_of(evaluator: object) -> str | None:
    """The verification type an evaluator declares (its ``verification_type``), or for a
    :class:`CommandEvaluator` without one, the type of its commands' tools; None when unknown.

    The loop picks the Ω preset from it before the first evaluation has said anything."""
    declared = getattr(evaluator, "verification_type", None)
    if isinstance(declared, str) and declared:
        return declared
    if isinstance(evaluator, CommandEvaluator):
        try:
            kinds: set[str] = {KIND[tool_of(shlex.split(command))] for command in evaluator.commands}
        except ValueError:  # a command shlex cannot split fails when run, not here
            return None
        return _verification_of(kinds)
    return None


def _error_count(result: CheckResult) -> int:
    count = sum(1 for e in result.errors if e.get("severity", "error") == "error")
    return count or (1 if result.status in ("fail", "error") else 0)


# --------------------------------------------------------------------------- running commands


def run_command(
    argv: Sequence[str], *, cwd: str | Path, timeout_s: float, env: dict[str, str] | None = None
) -> tuple[int | None, str, str, int]:
    """Run ``argv``; return (exit code or None on timeout, stdout, stderr, duration ms).

    The command gets its own process group so a timeout kills everything it started.
    Raises :class:`EvaluatorError` when the program cannot be started at all.
    """
    start = time.monotonic()
    try:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise EvaluatorError(
            f"cannot run {shlex.join(argv)!r} in {cwd}: {exc}; install the tool or fix the command/cwd",
            command=shlex.join(argv),
        ) from exc
    try:
        out, err = process.communicate(timeout=timeout_s)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        code = None
    duration = int((time.monotonic() - start) * 1000)
    return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), duration


class CommandEvaluator:
    """Runs each command in ``cwd`` and parses what the known tools print.

    ``CommandEvaluator(["pytest -q", "mypy src", "ruff check ."], cwd="path/to/project")``.
    Commands are split with :func:`shlex.split` and run without a shell.
    """

    def __init__(
        self,
        commands: Sequence[str],
        *,
        cwd: str | Path = ".",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        env: dict[str, str] | None = None,
        verification_type: str | None = None,
    ) -> None:
        if isinstance(commands, str):
            raise InputError("commands must be a list of command lines, not one string", field="commands")
        self.commands = [str(command) for command in commands]
        if not self.commands or not all(command.strip() for command in self.commands):
            raise InputError("give at least one non-empty command, e.g. ['pytest -q']", field="commands")
        if timeout_s <= 0:
            raise InputError(f"timeout_s must be > 0, got {timeout_s}", field="timeout_s")
        self.cwd = Path(cwd)
        self.timeout_s = timeout_s
        self.env = env
        self.verification_type = verification_type

    def evaluate(self, output: Any = None) -> Evaluation:
        if not self.cwd.is_dir():
            raise EvaluatorError(
                f"evaluator directory {self.cwd} does not exist; pass cwd= an existing project"
            )
        results = [self.check(command) for command in self.commands]
        return score(results, verification_type=self.verification_type)

    def check(self, command: str) -> CheckResult:
        argv = shlex.split(command)
        tool = tool_of(argv)
        with tempfile.TemporaryDirectory(prefix="lessonbank-eval-") as scratch:
            extra, env = extra_args(tool, Path(scratch), argv=argv, cwd=self.cwd, env=self.env)
            code, out, err, duration = run_command(
                [*argv, *extra], cwd=self.cwd, timeout_s=self.timeout_s, env=env
            )
            report = "".join(
                path.read_text("utf-8", "replace")
                for path in (Path(scratch) / "junit.xml", Path(scratch) / "report.json")
                if path.exists()
            )
        module = missing_module(argv, code, err)
        if module is not None:
            raise EvaluatorError(
                f"cannot run {command!r} in {self.cwd}: {argv[0]} has no module {module!r}; "
                f"install it into that Python (e.g. {argv[0]} -m pip install {module}) or fix the command",
                command=command,
            )
        result = CheckResult(
            tool=command,
            kind=KIND[tool],
            status="pass" if code == 0 else "fail",
            exit_code=code,
            stdout=truncate(out, OUTPUT_MAX_CHARS),
            stderr=truncate(err, OUTPUT_MAX_CHARS),
            duration_ms=duration,
        )
        if code is None:
            result.status = "error"
            result.errors = [
                {
                    "type": "timeout",
                    "message": f"{command} timed out after {self.timeout_s:g} s",
                    "severity": "error",
                }
            ]
            result.tests_failed = 1 if result.kind in ("tests", "other") else 0
            return result
        PARSERS[tool](result, out, err, report)
        if code == 0:  # warnings may be listed; they do not fail the check
            result.errors = [e for e in result.errors if e.get("severity") != "error"] or result.errors
        elif not result.errors:
            tail = truncate((err or out).strip()[-MESSAGE_MAX_CHARS:], MESSAGE_MAX_CHARS)
            result.errors = [{"type": "other", "message": tail or f"exit code {code}", "severity": "error"}]
        return result


# --------------------------------------------------------------------------- parsers


def _parse_pytest(result: CheckResult, out: str, err: str, report: str) -> None:
    if not report:  # usage error or crash before the report: one runtime error
        result.tests_failed = 1
        return
    try:
        root = ET.fromstring(report)
    except ET.ParseError:
        result.tests_failed = 1
        return
    for case in root.iter("testcase"):
        problem = next((child for child in case if child.tag in ("failure", "error")), None)
        skipped = next((child for child in case if child.tag == "skipped"), None)
        if skipped is not None and problem is None:
            continue
        if problem is None:
            result.tests_passed += 1
            continue
        result.tests_failed += 1
        message = problem.get("message") or (problem.text or "").strip().splitlines()[-1:] or [""]
        text = message if isinstance(message, str) else message[0]
        kind = "test_failure" if problem.tag == "failure" else "runtime_error"
        if "SyntaxError" in (problem.text or "") or "SyntaxError" in text:
            kind = "syntax_error"
        error: dict[str, Any] = {
            "type": kind,
            "message": truncate(text, MESSAGE_MAX_CHARS) or f"{case.get('name')} failed",
            "severity": "error",
            "rule": f"{case.get('classname', '')}::{case.get('name', '')}".strip(":"),
            "stack_trace": truncate(problem.text or "", 2000),
        }
        location = _traceback_location(problem.text or "")
        if location:
            error["file"], error["line"] = location
        elif case.get("file"):
            error["file"] = case.get("file")
        if len(result.errors) < MAX_ERRORS_PER_CHECK:
            result.errors.append(error)
    # A collection error is reported as a testsuite error with no testcase for it.
    if result.tests_failed == 0 and result.exit_code not in (0, None):
        result.tests_failed = 1


_TB_LOCATION = re.compile(r"^([^\s:][^:\n]*\.py):(\d+):", re.MULTILINE)


def _traceback_location(text: str) -> tuple[str, int] | None:
    found = _TB_LOCATION.findall(text)
    return (found[-1][0], int(found[-1][1])) if found else None


_MYPY_LINE = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>error|warning|note): "
    r"(?P<msg>.*?)(?:\s+\[(?P<code>[\w-]+)\])?$",
    re.MULTILINE,
)


def _parse_mypy(result: CheckResult, out: str, err: str, report: str) -> None:
    for match in _MYPY_LINE.finditer(out):
        if match["sev"] == "note" or len(result.errors) >= MAX_ERRORS_PER_CHECK:
            continue
        error: dict[str, Any] = {
            "type": "syntax_error" if match["code"] == "syntax" else "type_error",
            "message": truncate(match["msg"], MESSAGE_MAX_CHARS),
            "file": match["file"],
            "line": int(match["line"]),
            "severity": match["sev"],
        }
        if match["col"]:
            error["column"] = int(match["col"])
        if match["code"]:
            error["rule"] = match["code"]
        result.errors.append(error)


_TSC_LINE = re.compile(
    r"^(?P<file>[^(\n]+)\((?P<line>\d+),(?P<col>\d+)\): (?P<sev>error|warning) (?P<code>TS\d+): (?P<msg>.*)$",
    re.MULTILINE,
)


def _parse_tsc(result: CheckResult, out: str, err: str, report: str) -> None:
    for match in _TSC_LINE.finditer(out + "\n" + err):
        if len(result.errors) >= MAX_ERRORS_PER_CHECK:
            break
        result.errors.append(
            {
                "type": "syntax_error" if match["code"] in _TS_SYNTAX else "type_error",
                "message": truncate(match["msg"], MESSAGE_MAX_CHARS),
                "file": match["file"].strip(),
                "line": int(match["line"]),
                "column": int(match["col"]),
                "severity": match["sev"],
                "rule": match["code"],
            }
        )


_TS_SYNTAX = {"TS1005", "TS1109", "TS1128", "TS1003", "TS1002"}


def _load_json(out: str) -> Any:
    start = min((i for i in (out.find("["), out.find("{")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        return json.loads(out[start:])
    except json.JSONDecodeError:
        return None


def _parse_ruff(result: CheckResult, out: str, err: str, report: str) -> None:
    data = _load_json(out)
    if not isinstance(data, list):
        return
    for item in data[:MAX_ERRORS_PER_CHECK]:
        if not isinstance(item, dict):
            continue
        location = item.get("location") or {}
        code = item.get("code") or ""
        error: dict[str, Any] = {
            "type": "syntax_error" if not code or "SyntaxError" in str(item.get("message")) else "lint_error",
            "message": truncate(str(item.get("message", "")), MESSAGE_MAX_CHARS),
            "file": str(item.get("filename", "")),
            "severity": "error",
        }
        if isinstance(location.get("row"), int):
            error["line"] = location["row"]
        if isinstance(location.get("column"), int):
            error["column"] = location["column"]
        if code:
            error["rule"] = code
        result.errors.append(error)


def _parse_eslint(result: CheckResult, out: str, err: str, report: str) -> None:
    data = _load_json(out)
    if not isinstance(data, list):
        return
    for file in data:
        if not isinstance(file, dict):
            continue
        for item in file.get("messages") or []:
            if not isinstance(item, dict) or len(result.errors) >= MAX_ERRORS_PER_CHECK:
                continue
            severity = "error" if item.get("severity") == 2 else "warning"
            if severity == "warning":
                result.warnings += 1
            error: dict[str, Any] = {
                "type": "syntax_error" if item.get("fatal") else "lint_error",
                "message": truncate(str(item.get("message", "")), MESSAGE_MAX_CHARS),
                "file": str(file.get("filePath", "")),
                "severity": severity,
            }
            for key, name in (("line", "line"), ("column", "column")):
                if isinstance(item.get(key), int):
                    error[name] = item[key]
            if item.get("ruleId"):
                error["rule"] = str(item["ruleId"])
            result.errors.append(error)


def _parse_other(result: CheckResult, out: str, err: str, report: str) -> None:
    if result.exit_code == 0:
        result.tests_passed = 1
    else:
        result.tests_failed = 1


def _parse_js_tests(result: CheckResult, out: str, err: str, report: str) -> None:
    """jest / vitest JSON (the report file, else stdout), node's TAP or spec output, else the
    runners' human summary; with none of them, the exit code decides (as for any command)."""
    limit = MAX_ERRORS_PER_CHECK
    found = (
        jsreports.jest_report(report, limit=limit)
        or jsreports.jest_report(out, limit=limit)
        or jsreports.tap_report(out, limit=limit)
        or jsreports.summary_report(err + "\n" + out)
    )
    if found is None:
        _parse_other(result, out, err, report)
        return
    result.tests_passed, result.tests_failed = found.passed, found.failed
    result.errors = found.errors
    if result.tests_failed == 0 and result.exit_code not in (0, None):  # failed without a failing test
        result.tests_failed = 1


def _parse_markdownlint(result: CheckResult, out: str, err: str, report: str) -> None:
    found = jsreports.markdownlint_errors(err + "\n" + out, limit=MAX_ERRORS_PER_CHECK) or []
    result.errors = found
    result.warnings = sum(1 for error in found if error["severity"] == "warning")


PARSERS: dict[str, Callable[[CheckResult, str, str, str], None]] = {
    "jest": _parse_js_tests,
    "vitest": _parse_js_tests,
    "node-test": _parse_js_tests,
    "npm-test": _parse_js_tests,
    "markdownlint": _parse_markdownlint,
    "pytest": _parse_pytest,
    "mypy": _parse_mypy,
    "tsc": _parse_tsc,
    "ruff": _parse_ruff,
    "eslint": _parse_eslint,
    "other": _parse_other,
}


# --------------------------------------------------------------------------- functions


class FunctionEvaluator:
    """Wraps ``check(output)`` returning an :class:`Evaluation`, a bool, or a reward in [0, 1].

    A bool or a number becomes one check named ``name``; a number passes only at 1.0.
    An exception raised by ``check`` is a critical error (:class:`EvaluatorError`).
    """

    def __init__(
        self,
        check: Callable[[Any], Evaluation | bool | float],
        *,
        name: str = "function",
        verification_type: str = "heuristic",
    ) -> None:
        if not callable(check):
            raise InputError("FunctionEvaluator needs a callable", field="check")
        self.check = check
        self.name = name
        self.verification_type = verification_type

    def evaluate(self, output: Any) -> Evaluation:
        start = time.monotonic()
        try:
            value = self.check(output)
        except Exception as exc:
            raise EvaluatorError(f"evaluator {self.name} raised {type(exc).__name__}: {exc}") from exc
        if isinstance(value, Evaluation):
            return value
        if isinstance(value, bool):
            reward = 1.0 if value else 0.0
        elif isinstance(value, int | float) and 0.0 <= float(value) <= 1.0:
            reward = float(value)
        else:
            raise EvaluatorError(
                f"evaluator {self.name} returned {value!r}; return a bool, a reward in [0, 1] or an Evaluation"
            )
        passed = reward >= 1.0
        result = CheckResult(
            tool=self.name,
            kind="other",
            status="pass" if passed else "fail",
            duration_ms=int((time.monotonic() - start) * 1000),
            tests_passed=1 if passed else 0,
            tests_failed=0 if passed else 1,
        )
        if not passed:
            result.errors = [
                {"type": "logic_error", "message": f"{self.name} scored {reward:.2f}", "severity": "error"}
            ]
        return Evaluation(passed, self.verification_type, [result], result.errors, reward, {"tests_total": 1})
