"""The lesson reflector (seed 004): situation / mistake / correction / tags, or a skip.

The same call also asks for 2-3 short example tasks that will need the lesson (``<examples>``): they
join the lesson's provenance (:mod:`lessonbank.provenance`), so a later task that looks like one of
them finds the lesson even when it shares no word with the lesson's prose. Missing or malformed
examples never fail a reflection.

The parser is tolerant of what models really send: any case, extra whitespace, prose or
code fences around the blocks, a missing closing tag, quotes around values. It is strict
about meaning: situation and correction are required, tags end up 2–5 lowercase keywords.
"""

from __future__ import annotations

import re

from lessonbank.errors import ParseError
from lessonbank.models import Episode, Lesson
from lessonbank.provenance import of_task, parse_examples, with_examples
from lessonbank.redact import redact_value
from lessonbank.reflectors.base import Parsed, PromptReflector
from lessonbank.reflectors.budget import Field
from lessonbank.text import STOPWORDS, keywords, truncate

ATTEMPT_MAX_CHARS = 1500
OUTCOME_MAX_CHARS = 800
TASK_MAX_CHARS = 600
TASK_TYPE_MAX_CHARS = 60
FIELD_MAX_CHARS = 400
MIN_TAGS, MAX_TAGS = 2, 5

_BLOCKS = ("situation", "mistake", "correction", "tags", "examples", "skip")
_NEXT_BLOCK = "|".join(_BLOCKS)
_FENCE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)


def block(name: str, text: str, *, one_line: bool = True) -> str | None:
    """Contents of ``<name>…</name>``; without a closing tag, up to the next block or the end.

    ``one_line`` folds all whitespace; tags keep their line breaks, which may separate them.
    """
    pattern = re.compile(
        rf"<\s*{name}\s*>(.*?)(?:<\s*/\s*{name}\s*>|(?=<\s*/?\s*(?:{_NEXT_BLOCK})\s*>)|\Z)",
        re.IGNORECASE | re.DOTALL,
    )
    match = pattern.search(text)
    if match is None:
        return None
    value = " ".join(match.group(1).split()) if one_line else match.group(1)
    return value.strip().strip("\"'`").strip()


def _clean_field(value: str | None) -> str | None:
    if not value:
        return None
    return value[:FIELD_MAX_CHARS].rstrip()


def parse_tags(raw: str | None) -> list[str]:
    """Split a tag list on commas (or whitespace/semicolons), normalise, dedupe, keep order."""
    if not raw:
        return []
    parts = re.split(r"[,;\n]" if re.search(r"[,;\n]", raw) else r"\s+", raw)
    tags: dict[str, None] = {}
    for part in parts:
        tag = re.sub(r"[^a-z0-9+#._/-]+", "-", part.strip().strip("#\"'`[]()").lower()).strip("-.")
        if tag and len(tag) <= 40:
            tags.setdefault(tag, None)
    return list(tags)


def parse_lesson(text: str) -> Parsed:
    """Parse a lesson answer. Raises :class:`ParseError` (with the raw text) when unusable."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty reply", raw=text if isinstance(text, str) else "")
    body = _FENCE.sub("", text)
    fields = {name: _clean_field(block(name, body)) for name in ("situation", "mistake", "correction")}
    skip = block("skip", body)
    if skip is not None and not (fields["situation"] and fields["correction"]):
        return Parsed(skip_reason=skip or "nothing actionable")
    missing = [name for name in ("situation", "correction") if not fields[name]]
    if missing:
        raise ParseError(f"missing <{'> and <'.join(missing)}> block", raw=text)
    tags = parse_tags(block("tags", body, one_line=False))
    found: dict[str, object] = {**fields, "tags": tags[:MAX_TAGS]}
    examples = parse_examples(block("examples", body, one_line=False))
    if examples:  # optional: seed 004's four blocks alone are a complete answer
        found["examples"] = examples
    return Parsed(fields=found)


class LessonReflector(PromptReflector):
    """Seed 004's lesson generator."""

    name = "lesson"
    max_output_tokens = 400
    repair_hint = (
        "Answer again with exactly these blocks, one line each: <situation>…</situation> <mistake>…</mistake> "
        "<correction>…</correction> <tags>tag1, tag2</tags> <examples>one example task per line</examples> "
        "— or exactly <skip>nothing actionable</skip>."
    )

    def user_prompt(self, episode: Episode, trigger: str) -> str:
        """Task, attempt and outcome, each redacted and then cut to its limit, the whole prompt
        (system prompt included) within 500 tokens.

        Redaction comes first: a secret cut in half by truncation no longer looks like one.
        """
        episode = Episode.model_validate(redact_value(episode.model_dump()))
        attempt = episode.attempt or "\n".join(str(action) for action in episode.actions) or "(not reported)"
        outcome_parts = [f"status: {episode.status}", f"trigger: {trigger}"]
        if episode.error:
            outcome_parts.append(f"error: {episode.error}")
        for check in episode.verification:
            if check.status in ("failed", "error"):
                detail = check.stderr or "; ".join(str(e.get("message", e)) for e in check.errors[:5])
                outcome_parts.append(f"{check.tool} {check.status} (exit {check.exit_code}): {detail}")
        if episode.output:
            outcome_parts.append(f"output: {episode.output}")
        context = (
            [f"task type: {truncate(episode.task_type, TASK_TYPE_MAX_CHARS)}"] if episode.task_type else []
        )

        def render(values: dict[str, str]) -> str:
            return "\n".join(
                [
                    "TASK:",
                    values["task"],
                    *context,
                    "",
                    "ATTEMPT:",
                    values["attempt"],
                    "",
                    "OUTCOME:",
                    values["outcome"],
                ]
            )

        # Within the prompt budget, the task is cut last and the attempt first.
        fields = [
            Field("task", episode.task, TASK_MAX_CHARS),
            Field("outcome", "\n".join(outcome_parts), OUTCOME_MAX_CHARS),
            Field("attempt", attempt, ATTEMPT_MAX_CHARS),
        ]
        return self.fit(fields, render)

    def parse(self, text: str) -> Parsed:
        return parse_lesson(text)

    def lessons(self, parsed: Parsed, episode: Episode, trigger: str) -> list[Lesson]:
        fields = parsed.fields
        tags = list(fields.get("tags", []))
        if len(tags) < MIN_TAGS:  # keep the 2-tag minimum with the task's own words
            for word in [(episode.task_type or "").lower(), *keywords(episode.task)]:
                if len(tags) >= MIN_TAGS:
                    break
                if word and word not in tags and word not in STOPWORDS and len(word) > 2:
                    tags.append(word)
        mistake = fields.get("mistake") or "(not stated)"
        return [
            Lesson(
                namespace=episode.namespace or "default",
                kind="lesson",
                content=render_lesson_content(fields["situation"], mistake, fields["correction"]),
                situation=fields["situation"],
                mistake=mistake,
                correction=fields["correction"],
                trigger=trigger,
                tags=["reflexion", f"trigger:{trigger}", *tags],
                learned_from=with_examples(of_task(episode.task), fields.get("examples", [])),
                task_type=episode.task_type,
                agent=episode.agent,
                goal_id=episode.goal_id,
                importance={"low": 0.3, "normal": 0.5, "high": 0.8}[episode.importance],
                confidence=0.5,
                source="llm",
                episode_id=episode.id,
            )
        ]


def render_lesson_content(situation: str, mistake: str, correction: str) -> str:
    return f"LESSON: {situation}\nMISTAKE: {mistake}\nCORRECTION: {correction}"
