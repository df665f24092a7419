"""The goal insight reflector (seed 000): a finished goal → one 1–3 sentence insight.

The parser accepts what models really send (markdown, a label such as ``Insight:``, a preamble
such as "Here is my insight:", code fences, bullets, extra sentences) and keeps plain text: markdown
and preamble stripped, at most three sentences, at most 500 characters. A degenerate reply (the same
few words repeated, or more than an insight's length without a sentence) is refused, not cut. Importance follows the seed: failed 0.8, completed 0.5,
+0.2 when an error is present, capped at 1.0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lessonbank.errors import InputError, ParseError
from lessonbank.models import Episode, Lesson
from lessonbank.reflectors.base import Parsed, PromptReflector
from lessonbank.reflectors.budget import Field

INSIGHT_MAX_CHARS = 500
INSIGHT_MAX_SENTENCES = 3
INSIGHT_MAX_OUTPUT_TOKENS = 200
ITEM_MAX_CHARS = 300
MAX_ITEMS = 10
GOAL_STATES = ("completed", "failed")
GOAL_TEXT_MAX_CHARS = 4000

_FENCE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*", re.MULTILINE)
_HEADING_LINE = re.compile(r"^\s{0,3}#{1,6}\s+\S")
_LIST_MARK = re.compile(r"^\s*(?:[-*+•>]|\d+[.)])\s+", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|\*|(?<!\w)_|_(?!\w)|`|~~)")
_LABEL = re.compile(r"^\s*(?:insight|reflection|answer|lesson)\s*[:\-–]\s*", re.IGNORECASE)
_STRAY = " \t>-#*_`~|"
# A line or clause that only announces the answer ("Here is my insight:", "Sure! Here's a reflection
# on the goal:", "Based on the outputs, the insight is:"): dropped, the answer kept.
_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|okay|ok|certainly|of course|absolutely)\b[!,.]?\s*)?"
    r"(?:(?:here(?:'s|’s| is| are)|below is|based on [^:.!?]{0,120},)\s*[^:.!?\n]{0,100}"
    r"|(?:my|the)\s+(?:(?:key|main|one)\s+)?(?:insight|reflection|lesson|takeaway)s?"
    r"(?:\s+(?:is|are|would be))?\s*):\s*",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
REPEAT_MIN_WORDS = 12  # below this a reply is too short to call repetitive
REPEAT_MIN_DISTINCT = 0.3  # distinct words over all words: a looping reply is far below
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


def strip_markdown(text: str) -> str:
    """Plain text: fences, headings, list marks, emphasis and link syntax removed, whitespace folded.

    A heading line ("## Reflection") is a title, not content: it is dropped when other text remains.
    """
    text = _FENCE.sub("", text)
    body = [line for line in text.splitlines() if not _HEADING_LINE.match(line)]
    if any(re.search(r"[^\W_]", line) for line in body):
        text = "\n".join(body)
    text = _LINK.sub(r"\1", text)
    text = _HEADING.sub("", text)
    text = _LIST_MARK.sub("", text)
    text = _EMPHASIS.sub("", text)
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def clip(text: str, limit: int = INSIGHT_MAX_CHARS) -> str:
    """At most ``limit`` chars: whole sentences when one fits, else cut at a word with an ellipsis."""
    if len(text) <= limit:
        return text
    kept = ""
    for sentence in sentences(text):
        candidate = f"{kept} {sentence}".strip()
        if len(candidate) > limit:
            break
        kept = candidate
    if kept:
        return kept
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:")
    return cut + "…"


def _unwrap_json(text: str) -> str:
    """The insight inside a JSON answer (``{"insight": "…"}``), else the text unchanged."""
    body = _FENCE.sub("", text).strip()
    if not (body.startswith("{") and body.endswith("}")):
        return text
    try:
        data = json.loads(body)
    except ValueError:
        return text
    for key in ("insight", "reflection", "text"):
        if isinstance(data, dict) and isinstance(data.get(key), str):
            return str(data[key])
    return text


def parse_insight(text: str) -> Parsed:
    """Parse an insight answer. Raises :class:`ParseError` when there is no usable sentence."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty reply", raw=text if isinstance(text, str) else "")
    plain = strip_markdown(_unwrap_json(text))
    plain = _LABEL.sub("", _PREAMBLE.sub("", plain, count=1)).strip(_STRAY).strip("\"'").strip(_STRAY)
    plain = plain[:1].upper() + plain[1:]
    degenerate = _degenerate(plain)
    if degenerate is not None:
        raise ParseError(f"degenerate reply: {degenerate}", raw=text)
    parts = sentences(plain)[:INSIGHT_MAX_SENTENCES]
    insight = clip(" ".join(parts))
    if len(insight.split()) < 3:
        raise ParseError("no insight sentence found (need 1–3 sentences of plain text)", raw=text)
    return Parsed(fields={"insight": insight})


def _degenerate(plain: str) -> str | None:
    """Why ``plain`` is not an insight a model meant to write, or None: the same few words over and
    over (a decoding loop), or more text than an insight holds without one sentence ending in it."""
    words = [word.lower() for word in _WORD.findall(plain)]
    if len(words) >= REPEAT_MIN_WORDS and len(set(words)) < REPEAT_MIN_DISTINCT * len(words):
        return f"{len(words)} words but only {len(set(words))} distinct (the model repeated itself)"
    if len(plain) > INSIGHT_MAX_CHARS and len(sentences(plain)) < 2 and not re.search(r"[.!?]", plain):
        return f"{len(plain)} characters without a sentence (need 1–3 sentences)"
    return None


def goal_episode(
    goal_id: str,
    *,
    title: str | None,
    status: str,
    outputs: Sequence[str],
    errors: Sequence[str],
    agent: str | None,
    now: datetime,
) -> Episode:
    """The episode ``finish_goal`` records: goal id and title, success or failure, outputs and errors
    (whole lists in ``metadata``, joined and cut in ``output`` / ``error``)."""
    for value, name in ((goal_id, "goal_id"), (title, "title"), (agent, "agent")):
        if value is not None and not isinstance(value, str):
            raise InputError(f"{name} must be a string, got {type(value).__name__}", field=name)
    if not goal_id.strip():
        raise InputError("goal_id is empty; pass the id of the goal that finished", field="goal_id")
    if status not in GOAL_STATES:
        raise InputError(f"status must be one of {', '.join(GOAL_STATES)}, got {status!r}", field="status")
    items: dict[str, list[str]] = {}
    for name, values in (("outputs", outputs), ("errors", errors)):
        if isinstance(values, str) or not all(isinstance(v, str) for v in values):
            raise InputError(f"{name} must be a list of strings", field=name)
        items[name] = [v for v in values if v.strip()]
    name = " ".join((title or "").split()) or goal_id
    try:
        return Episode(
            task=f"Goal: {name}",
            goal_id=goal_id,
            goal_title=name,
            agent=agent,
            status="failure" if status == "failed" else "success",
            output="\n".join(items["outputs"])[:GOAL_TEXT_MAX_CHARS] or None,
            error="\n".join(items["errors"])[:GOAL_TEXT_MAX_CHARS] or None,
            metadata={"goal_state": status, "goal_outputs": items["outputs"], "goal_errors": items["errors"]},
            created_at=now,
        )
    except ValueError as exc:  # over the size limit, or text that is not UTF-8
        raise InputError(" ".join(str(exc).split())[:500]) from None


def importance_of(episode: Episode) -> float:
    """Seed 000: failed 0.8, completed 0.5, +0.2 when an error is present, at most 1.0."""
    base = 0.8 if episode.status == "failure" else 0.5
    return min(1.0, base + (0.2 if goal_errors(episode) else 0.0))


def goal_state(episode: Episode) -> str:
    return "failed" if episode.status == "failure" else "completed"


def goal_outputs(episode: Episode) -> list[str]:
    outputs = episode.metadata.get("goal_outputs")
    if isinstance(outputs, list):
        return [str(item) for item in outputs if str(item).strip()]
    return [episode.output] if episode.output else []


def goal_errors(episode: Episode) -> list[str]:
    errors = episode.metadata.get("goal_errors")
    found = [str(item) for item in errors if str(item).strip()] if isinstance(errors, list) else []
    if not found and episode.error:
        found = [episode.error]
    for check in episode.verification:
        if check.status in ("failed", "error"):
            found.append(f"{check.tool} {check.status}: {check.stderr or check.exit_code}")
    return found


def _items(values: list[str]) -> str:
    lines = [f"- {' '.join(value.split())[:ITEM_MAX_CHARS]}" for value in values[:MAX_ITEMS]]
    if len(values) > MAX_ITEMS:
        lines.append(f"- (+{len(values) - MAX_ITEMS} more)")
    return "\n".join(lines) or "(none)"


class InsightReflector(PromptReflector):
    """Seed 000's self-reflection engine: one insight per finished goal."""

    name = "insight"
    max_output_tokens = INSIGHT_MAX_OUTPUT_TOKENS
    repair_hint = (
        "Answer again with only the insight: 1 to 3 plain sentences, no markdown, at most 500 characters."
    )

    def user_prompt(self, episode: Episode, trigger: str) -> str:
        title = episode.goal_title or episode.task

        def render(values: dict[str, str]) -> str:
            return "\n".join(
                [
                    f"GOAL: {values['title']}",
                    f"STATE: {goal_state(episode)}",
                    "",
                    "TASK OUTPUTS:",
                    values["outputs"] or "(none)",
                    "",
                    "ERRORS:",
                    values["errors"] or "(none)",
                    "",
                    "Write the insight now.",
                ]
            )

        fields = [
            Field("title", title, 300),
            Field("errors", _items(goal_errors(episode)), 1500),
            Field("outputs", _items(goal_outputs(episode)), 1500),
        ]
        return self.fit(fields, render)

    def parse(self, text: str) -> Parsed:
        return parse_insight(text)

    def lessons(self, parsed: Parsed, episode: Episode, trigger: str) -> list[Lesson]:
        metadata: dict[str, Any] = {
            "goal_title": episode.goal_title or episode.task,
            "goal_state": goal_state(episode),
        }
        return [
            Lesson(
                namespace=episode.namespace or "default",
                kind="insight",
                content=parsed.fields["insight"],
                trigger=trigger,
                tags=["insight", f"goal:{goal_state(episode)}"],
                task_type=episode.task_type,
                agent=episode.agent,
                goal_id=episode.goal_id,
                importance=importance_of(episode),
                confidence=0.5,
                source="llm",
                episode_id=episode.id,
                metadata=metadata,
            )
        ]
