"""The text of the rules section an ``AGENTS.md`` / ``CLAUDE.md`` holds: pure formatting, shared by
the text export (:mod:`lessonbank.services.transfer`) and the file writer and reader
(:mod:`lessonbank.integrations.agents_md`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from lessonbank.lessons import ranked_pool, stream_of
from lessonbank.models import Lesson

BEGIN = "<!-- lessonbank:begin -->"
END = "<!-- lessonbank:end -->"


def bullet_hash(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:12]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def section(rules: Iterable[Lesson]) -> str:
    """The marked section for ``rules`` (in the order given), from :data:`BEGIN` to :data:`END`."""
    ranked = list(rules)
    lines = [BEGIN, "<!-- exported:" + "".join(f" {rule.id}" for rule in ranked) + " -->"]
    lines += ["## Learned rules", ""]
    lines.append(
        "Kept by lessonbank: edit a bullet or add one, then `lessonbank import` this file to propose it."
    )
    for stream in ("strategic", "tactical"):
        chosen = [rule for rule in ranked if stream_of(rule) == stream]
        if chosen:
            lines += ["", f"### {stream.capitalize()}", ""]
            for rule in chosen:
                text = _one_line(rule.content)
                lines.append(f"- {text} <!-- {rule.id} {bullet_hash(text)} -->")
    if not ranked:
        lines += ["", "No rules learned yet."]
    lines.append(END)
    return "\n".join(lines)


def live_rules(lessons: Iterable[Lesson]) -> list[Lesson]:
    """The rules among ``lessons`` (all live), strategic first, then the most recently confirmed."""
    return ranked_pool([lesson for lesson in lessons if lesson.kind == "principle"])
