"""The context block's sections: lessons rendered, packed under a hard token budget.

Formats (sections): ``long_term_memory`` (seed 004 lessons), ``past_reflections`` (seed 000
goal insights), ``learned_rules`` (seed 003 rules), ``replay`` (seed 003 procedures as
in-context examples). Several sections share one budget: each in turn gets an equal share of
what is left, so what one leaves unused goes to the next.

Packing is greedy by score: a lesson that does not fit is skipped and smaller ones after it
may still fit. The whole rendered text is counted with the same counter at the end, so the
block is never over budget even for a counter that is not additive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lessonbank.models import ContextBlock, Lesson
from lessonbank.ports import Store
from lessonbank.services import pools
from lessonbank.text import TokenCounter

LONG_TERM_MEMORY = "long_term_memory"
LONG_TERM_HEADER = "## Long-term Memory"
PAST_REFLECTIONS = "past_reflections"
PAST_REFLECTIONS_HEADER = "[PAST REFLECTIONS]"
LEARNED_RULES = "learned_rules"
LEARNED_RULES_HEADER = "## Learned Rules"
REPLAY = "replay"
REPLAY_HEADER = "## Replay Examples"
FORMATS = (LONG_TERM_MEMORY, PAST_REFLECTIONS, LEARNED_RULES, REPLAY)
SECTION_SEPARATOR = "\n\n"
MANUAL_MISTAKE = "(user-supplied lesson; no automatic mistake detection)"


def render_insight(lesson: Lesson) -> str:
    """Seed 000's line: ``• [Goal: <goal title>] <insight>``."""
    title = str(lesson.metadata.get("goal_title") or lesson.goal_id or "unknown goal")
    return f"• [Goal: {' '.join(title.split())}] {' '.join(lesson.content.split())}"


def render_rule(lesson: Lesson) -> str:
    return f"- {' '.join(lesson.content.split())}"


def render_procedure(lesson: Lesson) -> str:
    """A replay example: the past task, its result and the steps taken."""
    return f"### Example ({lesson.metadata.get('result', 'success')})\n{lesson.content}"


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
    *,
    separator: str = "\n\n",
    max_items: int | None = None,
) -> tuple[str, list[str]]:
    """The section text and the ids it holds, within ``budget_tokens`` (empty when nothing fits)."""
    chosen: list[tuple[str, str]] = []
    for lesson in lessons:
        if max_items is not None and len(chosen) >= max_items:
            break
        candidate = [*chosen, (lesson.id, render(lesson))]
        if count(_join(header, [text for _, text in candidate], separator)) <= budget_tokens:
            chosen = candidate
    text = _join(header, [text for _, text in chosen], separator) if chosen else ""
    return text, [lesson_id for lesson_id, _ in chosen]


def _join(header: str, parts: list[str], separator: str = "\n\n") -> str:
    return header + "\n" + separator.join(parts)


def empty_block(budget_tokens: int, formats: list[str]) -> ContextBlock:
    return ContextBlock(text="", lesson_ids=[], tokens=0, budget_tokens=budget_tokens, formats=formats)


RULES_IN_CONTEXT = pools.STRATEGIC_PER_AGENT + pools.TACTICAL_PER_AGENT


def learned_section(
    name: str,
    store: Store,
    namespace: str,
    budget_tokens: int,
    count: TokenCounter,
    *,
    task: str | None,
    goal_id: str | None,
    agent: str | None,
    task_type: str | None,
) -> tuple[str, list[str]]:
    """The ``past_reflections``, ``learned_rules`` or ``replay`` section and the ids it holds."""
    if name == PAST_REFLECTIONS:
        insights = pools.insights(store, namespace, goal_id)
        return pack_section(
            PAST_REFLECTIONS_HEADER,
            insights,
            budget_tokens,
            count,
            render_insight,
            separator="\n",
            max_items=pools.INSIGHTS_IN_CONTEXT,
        )
    if name == LEARNED_RULES:
        rules = pools.context_rules(store, namespace, agent)
        return pack_section(
            LEARNED_RULES_HEADER,
            rules,
            budget_tokens,
            count,
            render_rule,
            separator="\n",
            max_items=RULES_IN_CONTEXT,
        )
    if name == REPLAY:
        examples = pools.replay(store, namespace, task=task, task_type=task_type)
        return pack_section(REPLAY_HEADER, examples, budget_tokens, count, render_procedure)
    raise ValueError(f"not a learned section: {name!r}")
