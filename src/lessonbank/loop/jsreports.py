"""What the JavaScript test runners and markdownlint print, read into counts and structured errors.

Pure text parsing, no processes (the evaluators run the tools). Each reader returns None when
the text is not its format, so a caller can try them in turn:

- :func:`jest_report`: jest's ``--json`` report, which vitest's ``json`` reporter copies
  (``numPassedTests``, ``testResults[].assertionResults[]``); a suite that failed to run counts
  as one failed test, as pytest's collection errors do;
- :func:`tap_report`: node's built-in test runner (``node --test``), TAP (``not ok`` blocks and the
  ``# pass`` / ``# fail`` summary) or its spec reporter (``ℹ pass`` / ``ℹ fail``, ``✖`` lines);
- :func:`summary_report`: the human summaries of jest (``Tests: 1 failed, 1 passed, 2 total``)
  and vitest (``Tests  1 failed | 1 passed (2)``), when no machine output was produced;
- :func:`markdownlint_errors`: markdownlint-cli's ``--json`` array or its default
  ``file:line[:col] [error|warning] MD022/name description [detail]`` lines (markdownlint-cli2's too).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from lessonbank.text import truncate

MESSAGE_MAX_CHARS = 500
STACK_MAX_CHARS = 2000
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class TestReport:
    """Counts and errors of one test run."""

    __test__ = False  # not a pytest class

    passed: int = 0
    failed: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def json_objects(text: str) -> list[Any]:
    """Every JSON value that starts a line of ``text`` (npm prints its own header lines first)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    for match in re.finditer(r"^[\[{]", text, re.MULTILINE):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        found.append(value)
    return found


# --------------------------------------------------------------------------- jest / vitest


def jest_report(text: str, *, limit: int) -> TestReport | None:
    """A jest ``--json`` or vitest ``json`` report found in ``text``; None when there is none."""
    data = next(
        (value for value in json_objects(text) if isinstance(value, dict) and "numTotalTests" in value),
        None,
    )
    if data is None:
        return None
    report = TestReport()
    suites = data.get("testResults")
    if not isinstance(suites, list):
        report.passed = _int(data.get("numPassedTests"))
        report.failed = _int(data.get("numFailedTests")) + _int(data.get("numRuntimeErrorTestSuites"))
        return report
    for suite in suites:
        if not isinstance(suite, dict):
            continue
        file = str(suite.get("name") or "")
        assertions = [a for a in suite.get("assertionResults") or [] if isinstance(a, dict)]
        failing = 0
        for assertion in assertions:
            status = assertion.get("status")
            if status == "passed":
                report.passed += 1
            elif status == "failed":
                failing += 1
                if len(report.errors) < limit:
                    report.errors.append(_jest_failure(assertion, file))
        report.failed += failing
        if suite.get("status") == "failed" and failing == 0:  # the suite did not run at all
            report.failed += 1
            message = strip_ansi(str(suite.get("message") or "")).strip()
            if len(report.errors) < limit:
                report.errors.append(_suite_failure(message, file))
    return report


def _jest_failure(assertion: dict[str, Any], file: str) -> dict[str, Any]:
    messages = [strip_ansi(str(m)) for m in assertion.get("failureMessages") or []]
    text = messages[0] if messages else ""
    head = text.split("\n    at ", 1)[0].strip()
    error: dict[str, Any] = {
        "type": "syntax_error" if "SyntaxError" in head else "test_failure",
        "message": truncate(" ".join(head.split()), MESSAGE_MAX_CHARS)
        or f"{assertion.get('fullName')} failed",
        "severity": "error",
        "rule": str(assertion.get("fullName") or assertion.get("title") or ""),
        "stack_trace": truncate(text, STACK_MAX_CHARS),
    }
    if file:
        error["file"] = file
        location = _stack_location(text, file)
        if location:
            error["line"], error["column"] = location
    return error


def _suite_failure(message: str, file: str) -> dict[str, Any]:
    lines = [line.strip() for line in message.splitlines() if line.strip() and "●" not in line]
    syntax = "SyntaxError" in message or "unexpected token" in message.lower()
    error: dict[str, Any] = {
        "type": "syntax_error" if syntax else "runtime_error",
        "message": truncate(" ".join(lines[:2]), MESSAGE_MAX_CHARS) or "test suite failed to run",
        "severity": "error",
        "stack_trace": truncate(message, STACK_MAX_CHARS),
    }
    if file:
        error["file"] = file
    return error


def _stack_location(text: str, file: str) -> tuple[int, int] | None:
    for match in re.finditer(rf"{re.escape(file)}:(\d+):(\d+)", text):
        return int(match[1]), int(match[2])
    return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --------------------------------------------------------------------------- node --test

_TAP_SUMMARY = re.compile(r"^(?:#|ℹ) (?P<key>pass|fail|cancelled) (?P<count>\d+)\s*$", re.MULTILINE)
_TAP_RESULT = re.compile(
    r"^(?P<indent>\s*)(?P<ok>not ok|ok) \d+ - (?P<name>.*?)(?P<directive> # (?:SKIP|TODO).*)?$"
)
_SPEC_FAILED = re.compile(r"^\s*✖ (?P<name>.+?) \([\d.]+m?s\)\s*$")


def tap_report(text: str, *, limit: int) -> TestReport | None:
    """Node's test runner output (TAP or spec reporter); None when ``text`` is neither."""
    text = strip_ansi(text)
    totals = {match["key"]: int(match["count"]) for match in _TAP_SUMMARY.finditer(text)}
    lines = text.splitlines()
    tap = any(line.startswith("TAP version") for line in lines)
    if not tap and {"pass", "fail"} - set(totals):
        return None
    report = TestReport()
    if tap:
        passed, failed = _tap_results(lines, report, limit)
    else:
        passed, failed = 0, 0
        _spec_failures(lines, report, limit)
    if {"pass", "fail"} <= set(totals):
        report.passed = totals["pass"]
        report.failed = totals["fail"] + totals.get("cancelled", 0)
    else:
        report.passed, report.failed = passed, failed
    return report


def _tap_results(lines: list[str], report: TestReport, limit: int) -> tuple[int, int]:
    passed = failed = 0
    for index, line in enumerate(lines):
        match = _TAP_RESULT.match(line)
        if match is None or match["directive"]:
            continue
        block = _yaml_block(lines, index + 1, len(match["indent"]))
        if "type: 'suite'" in block:
            continue
        if match["ok"] == "ok":
            passed += 1
            continue
        failed += 1
        if len(report.errors) < limit:
            report.errors.append(_tap_failure(match["name"], block))
    return passed, failed


def _yaml_block(lines: list[str], start: int, indent: int) -> str:
    """The ``---`` … ``...`` diagnostics after a TAP result line, or '' when it has none."""
    if start >= len(lines) or lines[start].strip() != "---":
        return ""
    body = []
    for line in lines[start + 1 :]:
        if line.strip() == "..." and len(line) - len(line.lstrip()) <= indent + 2:
            break
        body.append(line)
    return "\n".join(body)


def _tap_failure(name: str, block: str) -> dict[str, Any]:
    fields = _yaml_fields(block)
    message = fields.get("error", "") or f"{name} failed"
    kind = "test_failure"
    if fields.get("failureType") not in (None, "testCodeFailure") or "SyntaxError" in fields.get("name", ""):
        kind = "syntax_error" if "SyntaxError" in block else "runtime_error"
    error: dict[str, Any] = {
        "type": kind,
        "message": truncate(" ".join(message.split()), MESSAGE_MAX_CHARS),
        "severity": "error",
        "rule": name,
    }
    location = re.match(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+)$", fields.get("location", ""))
    if location:
        error["file"], error["line"], error["column"] = (
            location["file"],
            int(location["line"]),
            int(location["col"]),
        )
    if fields.get("stack"):
        error["stack_trace"] = truncate(fields["stack"], STACK_MAX_CHARS)
    return error


def _yaml_fields(block: str) -> dict[str, str]:
    """The top-level scalar and ``|-`` block fields of a TAP diagnostics block (enough for node's)."""
    lines = block.splitlines()
    if not lines:
        return {}
    base = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    fields: dict[str, str] = {}
    key = None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        match = re.match(r"^(\w+): ?(.*)$", line.strip()) if indent == base else None
        if match:
            key, value = match[1], match[2]
            fields[key] = "" if value in ("|-", "|", ">-") else value.strip("'\"")
        elif key is not None and line.strip():
            fields[key] = f"{fields[key]}\n{line.strip()}".strip()
    return fields


def _spec_failures(lines: list[str], report: TestReport, limit: int) -> None:
    start = next((i for i, line in enumerate(lines) if line.strip() == "✖ failing tests:"), None)
    if start is None:
        return
    for index in range(start + 1, len(lines)):
        match = _SPEC_FAILED.match(lines[index])
        if match is None or len(report.errors) >= limit:
            continue
        detail = next((line.strip() for line in lines[index + 1 : index + 4] if line.strip()), "")
        report.errors.append(
            {
                "type": "test_failure",
                "message": truncate(detail or f"{match['name']} failed", MESSAGE_MAX_CHARS),
                "severity": "error",
                "rule": match["name"],
            }
        )


# --------------------------------------------------------------------------- human summaries

_JEST_SUMMARY = re.compile(r"^Tests:\s+(?P<parts>.*?)(?P<total>\d+) total\s*$", re.MULTILINE)
_VITEST_SUMMARY = re.compile(r"^\s*Tests\s+(?P<parts>.*?)\((?P<total>\d+)\)\s*$", re.MULTILINE)


def summary_report(text: str) -> TestReport | None:
    """Counts from jest's or vitest's human summary line; None when ``text`` has neither."""
    text = strip_ansi(text)
    match = _JEST_SUMMARY.search(text) or _VITEST_SUMMARY.search(text)
    if match is None:
        return None
    counts = {word: int(number) for number, word in re.findall(r"(\d+) (passed|failed)", match["parts"])}
    return TestReport(passed=counts.get("passed", 0), failed=counts.get("failed", 0))


# --------------------------------------------------------------------------- markdownlint

_MARKDOWNLINT_LINE = re.compile(
    r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+)(?::(?P<col>\d+))?\s+(?:(?P<sev>error|warning)\s+)?"
    r"(?P<rule>MD\d{3}(?:/[\w/-]+)?)\s+(?P<msg>.*)$",
    re.MULTILINE,
)


def markdownlint_errors(text: str, *, limit: int) -> list[dict[str, Any]] | None:
    """markdownlint's findings in ``text`` (its ``--json`` array or its default lines); None when
    ``text`` holds neither."""
    text = strip_ansi(text)
    for value in json_objects(text):
        if isinstance(value, list) and all(isinstance(item, dict) and "ruleNames" in item for item in value):
            return [_markdownlint_json(item) for item in value[:limit]]
    found = [_markdownlint_match(match) for match in _MARKDOWNLINT_LINE.finditer(text)]
    return found[:limit] if found else None


def _markdownlint_json(item: dict[str, Any]) -> dict[str, Any]:
    names = [str(name) for name in item.get("ruleNames") or []]
    message = str(item.get("ruleDescription") or "")
    if item.get("errorDetail"):
        message += f" [{item['errorDetail']}]"
    if item.get("errorContext"):
        message += f' [Context: "{item["errorContext"]}"]'
    error: dict[str, Any] = {
        "type": "lint_error",
        "message": truncate(message, MESSAGE_MAX_CHARS),
        "file": str(item.get("fileName") or ""),
        "severity": "warning" if item.get("severity") == "warning" else "error",
        "rule": "/".join(names[:2]),
    }
    if isinstance(item.get("lineNumber"), int):
        error["line"] = item["lineNumber"]
    span = item.get("errorRange")
    if isinstance(span, list) and span and isinstance(span[0], int):
        error["column"] = span[0]
    return error


def _markdownlint_match(match: re.Match[str]) -> dict[str, Any]:
    error: dict[str, Any] = {
        "type": "lint_error",
        "message": truncate(match["msg"].strip(), MESSAGE_MAX_CHARS),
        "file": match["file"],
        "line": int(match["line"]),
        "severity": match["sev"] or "error",
        "rule": match["rule"],
    }
    if match["col"]:
        error["column"] = int(match["col"])
    return error
