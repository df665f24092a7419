"""Expansion: example tasks for lessons written by hand, so the tasks that need them find them.

A lesson a reflection writes carries the task it was learned on and the example tasks the same call
returned (:mod:`lessonbank.reflectors.lesson`). A lesson added by hand or imported from a team's
guidelines has neither: its prose is all recall can match, and a task that shows only code rarely
shares its words. :class:`Expander` asks the configured LLM, one call per lesson, for 2-3 short
example tasks that will need it, and stores them in the lesson's provenance
(:func:`lessonbank.provenance.with_examples`), which recall indexes.

Invariants:

- :meth:`Expander.plan` says what a run will cost before anything is sent: lessons, calls, input tokens
  (counted on the real prompts) and output tokens (the cap), priced when the model's price is known.
- One call per lesson, temperature 0; the reply is redacted before it is read; a reply without usable
  examples, or with examples that read as instructions to a model, leaves the lesson as it is
  (``skipped`` says why). An LLM error stops the run: what was expanded before it stays written.
- Each lesson written is one ``Store.change_lesson`` with an ``edit`` audit row (actor given); the
  lesson's content, counters and status are untouched; its vector is refreshed.
- By default, the live lessons without example tasks (newest first, at most ``limit``); explicit ids
  expand those lessons again (their examples are replaced).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial

from pydantic import BaseModel, Field

from lessonbank.errors import ConfigError, InputError, NotFoundError
from lessonbank.injection import injection_reason
from lessonbank.llm.base import LLM, Message, Usage
from lessonbank.llm.pricing import cost_of
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery
from lessonbank.provenance import parse, parse_examples, provenance_change, with_examples
from lessonbank.redact import redact
from lessonbank.reflectors.base import load_prompt
from lessonbank.reflectors.lesson import block
from lessonbank.services.scope import Scope, check_text_arg
from lessonbank.text import TokenCounter, truncate

log = logging.getLogger("lessonbank.expansion")

MAX_OUTPUT_TOKENS = 150
LESSON_PROMPT_MAX_CHARS = 1_500
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
SCAN_PAGE = 500


class ExpansionPlan(BaseModel):
    """What a run will send: one call per lesson."""

    lesson_ids: list[str]
    model: str
    input_tokens: int
    output_tokens: int  # the cap: the most the replies can cost
    cost: float | None  # dollars at most, when the model's price is known

    @property
    def calls(self) -> int:
        return len(self.lesson_ids)


class ExpansionReport(BaseModel):
    """What a run did (a dry run: its plan alone)."""

    plan: ExpansionPlan
    expanded: dict[str, list[str]] = Field(default_factory=dict)  # lesson id → its example tasks
    skipped: dict[str, str] = Field(default_factory=dict)  # lesson id → why
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens)


class Expander:
    def __init__(
        self,
        scope: Scope,
        *,
        llm: LLM | None,
        count_tokens: TokenCounter,
        reembed: Callable[[Sequence[Lesson]], object],
    ) -> None:
        self.scope = scope
        self.llm = llm
        self.count_tokens = count_tokens
        self.reembed = reembed
        self.system_prompt = load_prompt("expand")

    def lessons(self, lesson_ids: Sequence[str] | None = None, limit: int | None = None) -> list[Lesson]:
        """The lessons a run expands: ``lesson_ids`` (each must exist in the namespace), else the live
        ones without example tasks, newest first, at most ``limit`` (default :data:`DEFAULT_LIMIT`)."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_LIMIT
        ):
            raise InputError(f"limit must be a whole number in 1..{MAX_LIMIT}, got {limit!r}", field="limit")
        store, namespace = self.scope.store, self.scope.namespace
        if lesson_ids is not None:
            if isinstance(lesson_ids, str):
                raise InputError("lesson_ids must be a list of lesson ids", field="lesson_ids")
            for lesson_id in lesson_ids:
                check_text_arg(lesson_id, "lesson_ids")
            ids = list(dict.fromkeys(lesson_ids))
            found = {lesson.id: lesson for lesson in store.get_lessons(ids, namespace=namespace)}
            missing = [lesson_id for lesson_id in ids if lesson_id not in found]
            if missing:
                raise NotFoundError("lesson", missing[0])
            return [found[lesson_id] for lesson_id in ids][: limit or None]
        wanted = limit or DEFAULT_LIMIT
        chosen: list[Lesson] = []
        offset = 0
        while len(chosen) < wanted:
            page = store.list_lessons(LessonQuery(namespace), limit=SCAN_PAGE, offset=offset, sort="created")
            chosen += [lesson for lesson in page if not parse(lesson.learned_from).examples]
            if len(page) < SCAN_PAGE:
                break
            offset += SCAN_PAGE
        return chosen[:wanted]

    def messages(self, lesson: Lesson) -> list[Message]:
        facts = [f"LESSON:\n{truncate(lesson.content, LESSON_PROMPT_MAX_CHARS)}"]
        if lesson.task_type:
            facts.append(f"task type: {truncate(lesson.task_type, 60)}")
        if lesson.tags:
            facts.append(f"tags: {truncate(', '.join(lesson.tags), 200)}")
        return [
            Message(role="system", content=self.system_prompt),
            Message(role="user", content=redact("\n".join(facts))),
        ]

    def plan(self, lessons: Sequence[Lesson]) -> ExpansionPlan:
        """What expanding ``lessons`` will send and cost at most, before anything is sent."""
        llm = self._llm()
        input_tokens = sum(
            self.count_tokens(message["content"]) for lesson in lessons for message in self.messages(lesson)
        )
        output_tokens = MAX_OUTPUT_TOKENS * len(lessons)
        cost = cost_of(llm.model, Usage(input_tokens=input_tokens, output_tokens=output_tokens))
        return ExpansionPlan(
            lesson_ids=[lesson.id for lesson in lessons],
            model=llm.model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost=cost,
        )

    def prepare(
        self, lesson_ids: Sequence[str] | None = None, limit: int | None = None
    ) -> tuple[list[Lesson], ExpansionReport]:
        """The lessons a run expands (see :meth:`lessons`) and its report holding the plan alone (what a
        dry run answers)."""
        lessons = self.lessons(lesson_ids, limit)
        return lessons, ExpansionReport(plan=self.plan(lessons))

    async def expand(
        self, lessons: Sequence[Lesson], report: ExpansionReport, *, actor: str = "api"
    ) -> ExpansionReport:
        """One call per lesson of :meth:`prepare`; the example tasks written into each lesson's
        provenance, and what was done and spent into ``report``."""
        llm = self._llm()
        written: list[Lesson] = []
        for lesson in lessons:
            completion = await llm.complete(
                self.messages(lesson), max_tokens=MAX_OUTPUT_TOKENS, temperature=0.0
            )
            report.input_tokens += completion.usage.input_tokens
            report.output_tokens += completion.usage.output_tokens
            examples = examples_of(redact(completion.text))
            hostile = next((reason for e in examples if (reason := injection_reason(e))), None)
            if not examples or hostile:
                report.skipped[lesson.id] = (
                    f"examples read as instructions ({hostile})"
                    if hostile
                    else "no example tasks in the reply"
                )
                continue
            wrote: list[bool] = []
            change = provenance_change(
                partial(with_examples, examples=examples),
                at=self.scope.now(),
                actor=actor,
                summary=lambda value: f"expanded: {len(parse(value).examples)} example tasks",
                written=wrote,
            )
            try:
                stored = self.scope.store.change_lesson(self.scope.namespace, lesson.id, change)
            except NotFoundError:
                report.skipped[lesson.id] = "deleted meanwhile"
                continue
            if not (wrote and wrote[-1]):
                report.skipped[lesson.id] = f"not live ({stored.status}) or unchanged"
                continue
            report.expanded[lesson.id] = parse(stored.learned_from).examples
            written.append(stored)
        report.cost = cost_of(llm.model, report.usage)
        if written:
            try:
                self.reembed(written)
            except Exception as exc:  # the lexical index has them; embed_missing catches the vectors up
                log.warning("expand: re-embedding %d lessons failed (%s)", len(written), type(exc).__name__)
        return report

    def _llm(self) -> LLM:
        if self.llm is None:
            raise ConfigError(
                "expand needs an LLM: set LESSONBANK_LLM (e.g. openai:gpt-4o-mini) or open the bank with llm=..."
            )
        return self.llm


def examples_of(reply: str) -> list[str]:
    """Example tasks from a reply's ``<examples>`` block, read as the lesson reflector reads its
    blocks (a missing closing tag tolerated); a reply without the block gives none."""
    return parse_examples(block("examples", reply, one_line=False))
