"""The context block: lessons chosen by score, rendered, packed under a hard token budget.

Packing is greedy by score: a lesson that does not fit is skipped and smaller ones after it
may still fit. The whole rendered text is counted with the same counter at the end, so the
block is never over budget even for a counter that is not additive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lessonbank.models import ContextBlock, Lesson
from lessonbank.reflectors.lesson import MANUAL_MISTAKE
from lessonbank.text import TokenCounter

LONG_TERM_MEMORY = "long_term_memory"
LONG_TERM_HEADER = "## Long-term Memory"


def render_lesson(lesson: Lesson) -> str:
    """Seed 004's four lines: ``LESSON: / MISTAKE: / CORRECTION: / TRIGGER:``."""
    if lesson.situation and lesson.correction:
        situation, mistake, correction = lesson.situation, lesson.mistake or "(not stated)", lesson.correction
    elif lesson.kind == "lesson":  # written by hand or imported: the text is both situation and correction
        situation = correction = lesson.content
        mistake = MANUAL_MISTAKE if lesson.source == "manual" else "(not recorded)"
    else:
        return lesson.content
    return f"LESSON: {situation}\nMISTAKE: {mistake}\nCORRECTION: {correction}\nTRIGGER: {lesson.trigger or lesson.source}"


def pack_section(
    header: str,
    lessons: Sequence[Lesson],
    budget_tokens: int,
    count: TokenCounter,
    render: Callable[[Lesson], str] = render_lesson,
) -> tuple[str, list[str]]:
    """The section text and the ids it holds, within ``budget_tokens`` (empty when nothing fits)."""
    chosen: list[tuple[str, str]] = []
    for lesson in lessons:
        candidate = [*chosen, (lesson.id, render(lesson))]
        if count(_join(header, [text for _, text in candidate])) <= budget_tokens:
            chosen = candidate
    text = _join(header, [text for _, text in chosen]) if chosen else ""
    return text, [lesson_id for lesson_id, _ in chosen]


def _join(header: str, parts: list[str]) -> str:
    return header + "\n" + "\n\n".join(parts)


def empty_block(budget_tokens: int, formats: list[str]) -> ContextBlock:
    return ContextBlock(text="", lesson_ids=[], tokens=0, budget_tokens=budget_tokens, formats=formats)
