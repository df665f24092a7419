"""A Claude Code session's outcome, read from its transcript (JSON Lines at ``transcript_path``).

Claude Code writes one JSON object per line: ``{"type": "user" | "assistant" | …, "message":
{"content": …}, "timestamp": …}``. An assistant message's content holds ``tool_use`` blocks (``id``,
``name``, ``input``) and ``text`` blocks; the user message that follows holds their ``tool_result``
blocks (``tool_use_id``, ``content``, ``is_error``: a failed tool call, a Bash command that exited
non-zero). From these: the tool calls made, the ones that failed, the test runs (a Bash command
that runs a test runner) and their result, the last thing the assistant said, and when.

Reading is bounded: from the offset where the last read stopped, at most :data:`MAX_READ_BYTES`
(the newest ones when more was written), complete lines only; a line that is not JSON, or not the
shape above, is skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

MAX_READ_BYTES = 16 * 1024 * 1024
OUTPUT_CHARS = 2_000
_TEST_COMMAND = re.compile(
    r"\b(?:pytest|py\.test|unittest|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest)\b"
    r"|\b(?:npm|pnpm|yarn|bun|deno)\s+(?:run\s+)?test\b"
    r"|\b(?:go|cargo|mix|dotnet|swift|mvn|gradle|\./gradlew|make)\s+test\b"
    r"|\bscripts/test\b"
)
_COUNT = re.compile(r"\b(\d+) (passed|failed|errors?)\b")


@dataclass
class TestRun:
    """One test command and its result (``counts``: passed / failed / error, when its output says)."""

    __test__ = False  # not a pytest class

    command: str
    passed: bool
    output: str
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class Outcome:
    """What the transcript says happened since the offset it was read from."""

    tool_calls: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    tests: list[TestRun] = field(default_factory=list)
    last_text: str | None = None
    first_at: datetime | None = None
    last_at: datetime | None = None
    offset: int = 0

    @property
    def duration_s(self) -> float | None:
        if self.first_at is None or self.last_at is None:
            return None
        return max(0.0, (self.last_at - self.first_at).total_seconds())


def describe_call(name: str, tool_input: Any) -> str:
    """A tool call in one line: ``Bash: pytest -x`` or ``Edit: {"file_path": …}``."""
    if isinstance(tool_input, dict) and isinstance(tool_input.get("command"), str):
        detail = tool_input["command"]
    else:
        detail = json.dumps(tool_input, ensure_ascii=False, default=str) if tool_input else ""
    return f"{name}: {' '.join(detail.split())}"[:300] if detail else name


def text_of(content: Any) -> str:
    """The text of a tool result or message content (a string, or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(item.get("text", "")) for item in content if isinstance(item, dict))
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False, default=str)
    return ""


def read_outcome(path: Path, offset: int = 0) -> Outcome:
    """The outcome of the transcript's lines from byte ``offset`` on (see the module's docstring)."""
    outcome = Outcome(offset=offset)
    with path.open("rb") as stream:
        size = stream.seek(0, 2)
        start = min(max(offset, size - MAX_READ_BYTES), size)
        stream.seek(start)
        data = stream.read(size - start)
    if start > offset and b"\n" in data:  # started inside a line: skip to the next one
        cut = data.index(b"\n") + 1
        data, start = data[cut:], start + cut
    end = data.rfind(b"\n") + 1
    outcome.offset = start + end
    calls: dict[str, tuple[str, Any]] = {}
    for line in data[:end].splitlines():
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(entry, dict):
            _read_entry(entry, calls, outcome)
    return outcome


def _read_entry(entry: dict[str, Any], calls: dict[str, tuple[str, Any]], outcome: Outcome) -> None:
    when = _timestamp(entry.get("timestamp"))
    if when is not None:
        outcome.first_at = outcome.first_at or when
        outcome.last_at = when
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_use" and isinstance(block.get("name"), str):
            calls[str(block.get("id"))] = (block["name"], block.get("input"))
            outcome.tool_calls.append(describe_call(block["name"], block.get("input")))
        elif kind == "text" and entry.get("type") == "assistant" and isinstance(block.get("text"), str):
            if block["text"].strip():
                outcome.last_text = block["text"][-OUTPUT_CHARS:]
        elif kind == "tool_result":
            _read_result(block, calls, outcome)


def _read_result(block: dict[str, Any], calls: dict[str, tuple[str, Any]], outcome: Outcome) -> None:
    name, tool_input = calls.get(str(block.get("tool_use_id")), ("tool", None))
    failed = block.get("is_error") is True
    text = text_of(block.get("content"))
    if failed:
        head = " ".join(text.split())[:200]
        outcome.failures.append(f"{describe_call(name, tool_input)} → {head}")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if name == "Bash" and isinstance(command, str) and _TEST_COMMAND.search(command):
        counts: dict[str, int] = {}
        for number, word in _COUNT.findall(text):
            key = "error" if word.startswith("error") else word
            counts[key] = counts.get(key, 0) + int(number)
        passed = not failed and not counts.get("failed") and not counts.get("error")
        outcome.tests.append(TestRun(command[:500], passed, text[-OUTPUT_CHARS:], counts))


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
