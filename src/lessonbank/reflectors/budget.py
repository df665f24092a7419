"""Fit a reflector's prompt into a token budget by cutting its inputs in priority order.

A prompt is a fixed frame (instructions, labels) plus variable fields. Each field first gets
its own character cap; while the whole prompt is still over budget, fields are halved, least
important first, down to a floor, and only then dropped to a marker. So every field keeps a
readable head (the task, the first lines of the error) before any is sacrificed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lessonbank.text import TokenCounter, truncate

PROMPT_BUDGET_TOKENS = 500
OMITTED = "(omitted to fit the prompt budget)"
_MIN_CHARS = 40


@dataclass(frozen=True)
class Field:
    """One input of a prompt: its text, a character cap and a floor, listed most important first."""

    name: str
    text: str
    max_chars: int
    min_chars: int = 120


def fit_fields(
    fields: Sequence[Field],
    render: Callable[[dict[str, str]], str],
    budget_tokens: int,
    count: TokenCounter,
) -> str:
    """``render`` of the fields, cut until the prompt fits ``budget_tokens``.

    First every field is cut, least important first, down to its floor (``min_chars``); only
    then, still least important first, are fields dropped to a marker. When nothing more can be
    cut, the smallest version is returned: the frame alone is the caller's to keep small.
    """
    values = {f.name: truncate(f.text, f.max_chars) if f.text else "" for f in fields}
    text = render(values)
    for floor_phase in (True, False):
        for f in reversed(fields):
            while count(text) > budget_tokens and values[f.name] not in ("", OMITTED):
                current = len(values[f.name])
                floor = max(f.min_chars, _MIN_CHARS) if floor_phase else 0
                if current <= floor:
                    break
                limit = max(floor, current // 2)
                values[f.name] = truncate(f.text, limit) if limit >= _MIN_CHARS else OMITTED
                text = render(values)
            if count(text) <= budget_tokens:
                return text
    return text
