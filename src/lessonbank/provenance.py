"""A lesson's provenance (``learned_from``): where it was learned, tasks that need it, tasks it helped.

Recall indexes the provenance with the lesson (lexical and vector), so a new task that looks like one
of these finds the lesson even when the lesson's own words do not match it (prose advice, a task that
shows only code). Its layout, written and read only here:

``<origin>`` — the task the lesson was learned on (a reflection's episode, an import's source);
``Example: <task>`` — short example tasks that need the lesson, written by the reflection that made it
or by ``lessonbank expand`` (at most :data:`MAX_EXAMPLES`);
``Helped on: <task>`` — the newest tasks it helped with (learning from use, at most
:data:`MAX_HELPED_TASKS`); each part after the origin is a paragraph of its own.

:func:`render` keeps the whole within ``LEARNED_FROM_MAX_CHARS``: the oldest task helped gives way
first, then the last example, and the origin is cut last.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from lessonbank.models import LEARNED_FROM_MAX_CHARS, AuditEntry, Lesson
from lessonbank.text import normalize

EXAMPLE_MARKER = "Example: "
HELPED_MARKER = "Helped on: "
MAX_EXAMPLES = 3
EXAMPLE_MAX_CHARS = 200
MAX_HELPED_TASKS = 3
HELPED_TASK_MAX_CHARS = 300

_PARTS = re.compile(rf"\n\n(?=(?:{EXAMPLE_MARKER}|{HELPED_MARKER}))")


@dataclass
class Provenance:
    origin: str = ""
    examples: list[str] = field(default_factory=list)
    helped: list[str] = field(default_factory=list)


def parse(learned_from: str | None) -> Provenance:
    """A stored provenance read back into its parts (a plain text is all origin)."""
    found = Provenance()
    if not learned_from:
        return found
    for number, part in enumerate(_PARTS.split("\n\n" + learned_from.strip())):
        part = part.strip()
        if part.startswith(EXAMPLE_MARKER):
            found.examples.append(part[len(EXAMPLE_MARKER) :].strip())
        elif part.startswith(HELPED_MARKER):
            found.helped.append(part[len(HELPED_MARKER) :].strip())
        elif part:
            found.origin = f"{found.origin}\n\n{part}".strip() if number else part
    return found


def render(provenance: Provenance) -> str | None:
    """The provenance as stored, within ``LEARNED_FROM_MAX_CHARS`` (see the module docstring)."""
    origin, examples, helped = provenance.origin.strip(), list(provenance.examples), list(provenance.helped)

    def joined() -> str:
        parts = [origin] if origin else []
        parts += [EXAMPLE_MARKER + example for example in examples]
        parts += [HELPED_MARKER + task for task in helped]
        return "\n\n".join(parts)

    value = joined()
    while len(value) > LEARNED_FROM_MAX_CHARS:
        if len(helped) > 1:
            helped.pop(0)
        elif examples:
            examples.pop()
        else:
            origin = origin[: max(0, len(origin) - (len(value) - LEARNED_FROM_MAX_CHARS))].rstrip()
        value = joined()
    return value or None


def one_line(text: str, limit: int) -> str:
    return " ".join(text.split())[:limit].strip()


def of_task(task: str) -> str | None:
    """The provenance of a lesson learned on ``task``: the task, whitespace folded, capped."""
    return one_line(task, LEARNED_FROM_MAX_CHARS) or None


def with_examples(learned_from: str | None, examples: list[str]) -> str | None:
    """``learned_from`` with ``examples`` as its example tasks (replacing any it had), each on one line,
    cut to :data:`EXAMPLE_MAX_CHARS`, distinct, at most :data:`MAX_EXAMPLES`."""
    found = parse(learned_from)
    seen: dict[str, str] = {}
    for example in examples:
        line = one_line(example, EXAMPLE_MAX_CHARS)
        if line and normalize(line) != normalize(found.origin):
            seen.setdefault(normalize(line), line)
    found.examples = list(seen.values())[:MAX_EXAMPLES]
    return render(found)


def with_helped_task(learned_from: str | None, task: str) -> str | None:
    """``learned_from`` with ``task`` added as the newest task helped; unchanged when the task is blank
    or already there (as the origin, an example or a task helped)."""
    found = parse(learned_from)
    task = one_line(task, HELPED_TASK_MAX_CHARS)
    known = {normalize(t) for t in [found.origin, *found.examples, *found.helped]}
    if not task or normalize(task) in known:
        return learned_from
    found.helped = [*found.helped, task][-MAX_HELPED_TASKS:]
    return render(found)


def parse_examples(raw: str | None) -> list[str]:
    """Example tasks from a model's ``<examples>`` block: one per line (bullets, numbers, quotes and
    a ``;`` separator tolerated), blank ones dropped, each on one line and cut, at most MAX_EXAMPLES."""
    if not raw:
        return []
    lines = raw.splitlines() if "\n" in raw.strip() else raw.split(";")
    out: list[str] = []
    for line in lines:
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip("\"'`").strip()
        line = one_line(line, EXAMPLE_MAX_CHARS)
        if line and normalize(line) not in {normalize(o) for o in out}:
            out.append(line)
    return out[:MAX_EXAMPLES]


def provenance_change(
    update: Callable[[str | None], str | None],
    *,
    at: datetime,
    actor: str,
    summary: Callable[[str | None], str],
    written: list[bool],
) -> Callable[[Lesson], tuple[Lesson, AuditEntry] | None]:
    """A ``Store.change_lesson`` change that sets a live lesson's provenance to ``update(old)``, with
    an ``edit`` audit row (``summary`` of the new value); no write when the lesson is not active or
    the value stays the same. ``written`` gets whether each run wrote (a store that retries on
    conflict runs a change again: the last run is what was written)."""

    def change(old: Lesson) -> tuple[Lesson, AuditEntry] | None:
        value = update(old.learned_from)
        written.append(old.status == "active" and value != old.learned_from)
        if not written[-1]:
            return None
        new = old.model_copy(update={"learned_from": value, "updated_at": at})
        entry = AuditEntry(
            namespace=old.namespace,
            at=at,
            actor=actor,
            action="edit",
            lesson_id=old.id,
            summary=summary(value),
        )
        return new, entry.of(old, new)

    return change
