"""Fit a reflector's prompt into a token budget by cutting its inputs in priority order.

A prompt is a fixed frame (instructions, labels) plus variable fields. Each field first gets
its own character cap; while the whole prompt is still over budget, the least important
field is cut (halved, then dropped to a marker), then the next one up. The most important
field is cut last, so the task survives when a 1 MB stack trace does not.
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
    """One input of a prompt: its text and a character cap, listed most important first."""

    name: str
    text: str
    max_chars: int


def fit_fields(
    fields: Sequence[Field],
    render: Callable[[dict[str, str]], str],
    budget_tokens: int,
    count: TokenCounter,
) -> str:
    """``render`` of the fields, cut (least important first) until it fits ``budget_tokens``.

    When even every field at its minimum does not fit, the smallest version is returned: the
    frame alone is the caller's responsibility (and is tested to fit).
    """
    values = {f.name: truncate(f.text, f.max_chars) if f.text else "" for f in fields}
    text = render(values)
    for f in reversed(fields):
        while count(text) > budget_tokens and values[f.name] not in ("", OMITTED):
            current = values[f.name]
            limit = len(current) // 2
            values[f.name] = truncate(f.text, limit) if limit >= _MIN_CHARS else OMITTED
            text = render(values)
        if count(text) <= budget_tokens:
            break
    return text
