"""Recall and the context block: lessons for a task, rendered under a hard token budget.

Each requested section (see :mod:`lessonbank.services.sections`) in turn gets an equal share of
the budget that is left. Without ``formats``, the sections follow the arguments
(:func:`default_formats`): ``long_term_memory`` always, ``past_reflections`` with a goal (seed 000
injects a goal's past reflections whenever a goal is given), ``learned_rules`` with an agent,
``replay`` with a task type. The lessons a context injects are touched (counted as used) and
remembered, so the next episode of the task credits them (see :mod:`~lessonbank.services.attribution`).

A block that holds anything opens with one line (:data:`~lessonbank.services.sections.NOTES_LINE`)
saying its contents are notes from past experience, not instructions; the line counts toward the
budget. Lesson text is rendered so it cannot open a line of the block's format (see
:func:`~lessonbank.services.sections.inline`), and lessons that read as instructions to the model
are quarantined when written, never recalled (see :mod:`lessonbank.injection`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, replace

from lessonbank.errors import InputError
from lessonbank.models import LESSON_KINDS, LESSON_STATUSES, ContextBlock, Hit, Lesson
from lessonbank.ports import LessonQuery
from lessonbank.retrieval import Retriever
from lessonbank.services.attribution import LastContexts
from lessonbank.services.consolidation.documents import Documents, core_for_context
from lessonbank.services.scope import Scope, check_count, check_text_arg
from lessonbank.services.sections import (
    CORE_MEMORY,
    FORMATS,
    LEARNED_RULES,
    LONG_TERM_HEADER,
    LONG_TERM_MEMORY,
    NOTES_LINE,
    PAST_REFLECTIONS,
    REPLAY,
    SECTION_SEPARATOR,
    empty_block,
    learned_section,
    pack_section,
    render_lesson,
)
from lessonbank.text import TokenCounter

CONTEXT_CANDIDATES = 12
SIMILAR_INSIGHTS = 5  # recalled for the past-reflections section; it injects at most two


@dataclass(frozen=True)
class Considered:
    """A recalled lesson and what the long-term memory section makes of it (see ``explain``)."""

    rank: int
    hit: Hit
    tokens: int
    injected: bool
    reason: str


@dataclass(frozen=True)
class Explanation:
    """What ``context(task, budget_tokens=budget)`` injects as long-term memory, and why the other
    recalled lessons are out: each one considered, the block as it would read, and its tokens."""

    considered: list[Considered]
    block: str
    tokens: int


def default_formats(*, goal_id: str | None, agent: str | None, task_type: str | None) -> list[str]:
    """The sections of a context asked for without ``formats``: long-term memory, plus the goal's
    past reflections, the agent's learned rules and the task type's replay examples when given."""
    wanted = {PAST_REFLECTIONS: goal_id, LEARNED_RULES: agent, REPLAY: task_type}
    return [LONG_TERM_MEMORY, *(name for name, given in wanted.items() if given is not None)]


def _block(sections: Sequence[str]) -> str:
    """The context block: the line that says what it holds, then the sections (nothing without any)."""
    return NOTES_LINE + "\n" + SECTION_SEPARATOR.join(sections) if sections else ""


@dataclass(eq=False)
class ContextBuilder:
    """Lesson filters, recall, and context blocks for one bank."""

    scope: Scope
    _: KW_ONLY
    retriever: Retriever
    count_tokens: TokenCounter
    last_contexts: LastContexts

    def query(
        self,
        *,
        kind: str | Sequence[str] | None = None,
        tags: Sequence[str] = (),
        task_type: str | None = None,
        agent: str | None = None,
        goal_id: str | None = None,
        status: str | Sequence[str] = "active",
    ) -> LessonQuery:
        """The filters of a listing or a recall in this namespace; unknown kinds or statuses refused."""
        kinds = [kind] if isinstance(kind, str) else kind
        statuses = [status] if isinstance(status, str) else list(status)
        for value, name, allowed in ((kinds, "kind", LESSON_KINDS), (statuses, "status", LESSON_STATUSES)):
            unknown = sorted(set(value or ()) - set(allowed))
            if unknown:
                raise InputError(f"unknown {name} {unknown}; use one of {', '.join(allowed)}", field=name)
        if isinstance(tags, str):
            tags = [tags]
        return LessonQuery(
            self.scope.namespace,
            kinds=kinds,
            tags=[t.strip().lower() for t in tags],
            task_type=task_type,
            agent=agent,
            goal_id=goal_id,
            statuses=statuses,
        )

    def recall(
        self, query: str, k: int, filters: LessonQuery, mode: str | None = None, hyde: bool | None = None
    ) -> list[Hit]:
        """The ``k`` lessons most relevant to ``query`` that pass ``filters``, best first."""
        check_text_arg(query, "query")
        if not query.strip():
            raise InputError("recall query is empty; pass the task you are about to do", field="query")
        check_count(k, "k")
        if mode is not None:
            check_text_arg(mode, "mode")
        return self.retriever.recall(query, filters, k=k, now=self.scope.clock(), mode=mode, hyde=hyde)

    def context(
        self,
        task: str | None,
        budget_tokens: int,
        formats: Sequence[str] | None,
        filters: LessonQuery,
        *,
        goal_id: str | None = None,
        agent: str | None = None,
        task_type: str | None = None,
    ) -> ContextBlock:
        """Each requested section in turn gets an equal share of the budget that is left, long-term
        memory last (it takes what the other sections leave); the block keeps the requested order.

        ``formats=None``: the sections follow the arguments (:func:`default_formats`)."""
        # Seed 000 injects a goal's insights, else those of similar tasks: found by recall, so a bank
        # with no insight like the task pays one index lookup, not a scan.
        wanted = formats is None or PAST_REFLECTIONS in formats
        similar = self._similar_insights(task) if goal_id is None and wanted else []
        if formats is None:
            chosen = default_formats(goal_id=goal_id, agent=agent, task_type=task_type)
            if similar:
                chosen.insert(1, PAST_REFLECTIONS)
        else:
            chosen = list(formats)
        if isinstance(formats, str):
            raise InputError("formats must be a list of section names, not one string", field="formats")
        unknown = [name for name in chosen if name not in FORMATS]
        if unknown:
            raise InputError(
                f"unknown context format(s) {unknown}; known: {', '.join(FORMATS)}", field="formats"
            )
        if task is not None:
            check_text_arg(task, "task")
        for value, name in ((goal_id, "goal_id"), (agent, "agent"), (task_type, "task_type")):
            if value is not None:
                check_text_arg(value, name)
        check_count(budget_tokens, "budget_tokens")
        if budget_tokens == 0:
            return empty_block(budget_tokens, chosen)
        count = self.count_tokens
        texts: list[str] = []
        section_ids: list[list[str]] = []
        separator = count(SECTION_SEPARATOR)
        notes = count(NOTES_LINE + "\n")  # the block's first line, there whenever a section is
        # Long-term memory is filled last, whatever its place in the block: it can use any budget,
        # while rules, replays and reflections are few, so what they leave (all of it, when the agent
        # has no rules yet) goes to it instead of being lost.
        order = sorted(range(len(chosen)), key=lambda index: chosen[index] == LONG_TERM_MEMORY)
        found: dict[int, tuple[str, list[str]]] = {}
        for done, index in enumerate(order):
            so_far = [text for text, _ids in found.values() if text]
            used = notes + count(SECTION_SEPARATOR.join(so_far)) + (separator if so_far else 0)
            share = (budget_tokens - used) // (len(chosen) - done)
            found[index] = self._section(
                chosen[index], task, share, filters, goal_id, agent, task_type, similar
            )
        for index in range(len(chosen)):
            text, used_ids = found[index]
            if text:
                texts.append(text)
                section_ids.append(used_ids)
        while texts and count(_block(texts)) > budget_tokens:
            # A counter that is not additive: drop whole sections until it fits, and their ids with
            # them, so only what the prompt holds is touched and credited.
            texts.pop()
            section_ids.pop()
        text = _block(texts)
        ids = list(dict.fromkeys(i for used_ids in section_ids for i in used_ids))
        self.scope.store.touch_lessons(ids)
        if task and self.scope.settings.attribution:
            self.last_contexts.remember(agent, task, task_type, ids)
        return ContextBlock(
            text=text,
            lesson_ids=ids,
            tokens=count(text),
            budget_tokens=budget_tokens,
            formats=chosen,
        )

    def _section(
        self,
        name: str,
        task: str | None,
        budget: int,
        filters: LessonQuery,
        goal_id: str | None,
        agent: str | None,
        task_type: str | None,
        similar: Sequence[Lesson] = (),
    ) -> tuple[str, list[str]]:
        if budget <= 0:
            return "", []
        if name == CORE_MEMORY:
            core = Documents.from_state(self.scope.store.cycle_state(self.scope.namespace)).core_memory
            return core_for_context(core, budget, self.count_tokens), []
        if name != LONG_TERM_MEMORY:
            return learned_section(
                name,
                self.scope.store,
                self.scope.namespace,
                budget,
                self.count_tokens,
                task=task,
                goal_id=goal_id,
                agent=agent,
                task_type=task_type,
                similar=similar,
            )
        if not task or not task.strip():
            return "", []
        hits = self._long_term_hits(task, filters, CONTEXT_CANDIDATES)
        return pack_section(LONG_TERM_HEADER, [hit.lesson for hit in hits], budget, self.count_tokens)

    def _similar_insights(self, task: str | None) -> list[Lesson]:
        """Live insights about a task like ``task``, most relevant first (seed 000: similar tasks)."""
        if not isinstance(task, str) or not task.strip():
            return []
        query = LessonQuery(self.scope.namespace, kinds=["insight"])
        return [hit.lesson for hit in self.recall(task, SIMILAR_INSIGHTS, query)]

    def _long_term_hits(self, task: str, filters: LessonQuery, k: int) -> list[Hit]:
        if filters.kinds is None:  # the other kinds have sections of their own
            filters = replace(filters, kinds=["lesson"])
        return self.recall(task, k, filters)

    def explain(self, task: str, budget_tokens: int, filters: LessonQuery, *, below: int = 8) -> Explanation:
        """The long-term memory section of ``context(task, budget_tokens=…)`` computed as it does
        (the same recall, the same packing) but touching nothing: a preview is not a use and is
        never credited with an outcome. ``below`` more lessons are recalled to show what ranked
        just under the candidates."""
        check_count(budget_tokens, "budget_tokens")
        count = self.count_tokens
        hits = self._long_term_hits(task, filters, CONTEXT_CANDIDATES + below)
        share = budget_tokens - count(NOTES_LINE + "\n")
        candidates = [hit.lesson for hit in hits[:CONTEXT_CANDIDATES]]
        section, chosen = pack_section(LONG_TERM_HEADER, candidates, share, count)
        block = _block([section]) if section else ""
        considered: list[Considered] = []
        for rank, hit in enumerate(hits, start=1):
            tokens = count(render_lesson(hit.lesson))
            injected = hit.lesson.id in chosen
            if injected:
                reason = "fits the budget"
            elif rank > CONTEXT_CANDIDATES:
                reason = f"ranked below the {CONTEXT_CANDIDATES} candidates context() reads"
            else:
                above = [item.hit.lesson for item in considered if item.injected]
                taken = count(pack_section(LONG_TERM_HEADER, above, share, count)[0]) if above else 0
                left = max(0, share - taken)
                reason = f"needs {tokens} tokens; {left} of the budget were left after the lessons above"
            considered.append(Considered(rank, hit, tokens, injected, reason))
        return Explanation(considered, block, count(block) if block else 0)
