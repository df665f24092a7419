"""The reflexion reflector (seed 001): a first-person self-reflection after a failed verification.

Input is an :class:`~lessonbank.models.Episode` of a loop iteration: the task, the actions taken
(``episode.actions``, numbered from 0), the verification results and their structured errors,
and the previous reflections of the loop's Ω window, passed in
``episode.metadata["previous_reflections"]`` as a list of ``{"iteration", "reflection_text",
"lessons_learned"}`` objects (absent for a first failure, so any episode still works).

Output is one JSON object shaped like the AIWG schema's ``self_reflection``. The parser finds
it inside code fences or prose, coerces what it safely can (an unknown failure category becomes
``other``, a confidence is clamped into [0, 1], non-integer indices are dropped) and refuses
only an answer without a usable ``reflection_text``. The seed's low-quality indicators are
recorded next to it, never used to drop it: a weak reflection is still the loop's memory.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lessonbank.errors import ParseError
from lessonbank.models import Episode, Lesson
from lessonbank.redact import redact_value
from lessonbank.reflectors.base import Parsed, PromptReflector
from lessonbank.reflectors.lesson import render_lesson_content
from lessonbank.text import truncate

FAILURE_CATEGORIES = (
    "hallucination",
    "inefficient_planning",
    "incorrect_assumption",
    "incomplete_implementation",
    "edge_case_miss",
    "integration_error",
    "configuration_error",
    "logic_error",
    "other",
)
MIN_REFLECTION_CHARS = 100  # the seed's "reflection text < 100 characters" indicator
TASK_MAX_CHARS = 1200
ACTION_MAX_CHARS = 300
MAX_ACTIONS = 20
STDERR_MAX_CHARS = 800
MAX_ERRORS = 15
PREVIOUS_MAX_CHARS = 600
ITEM_MAX_CHARS = 400
MAX_ITEMS = 8

_FENCE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)


def _find_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` that has a ``reflection_text`` (or, failing that, any object)."""
    decoder = json.JSONDecoder()
    body = _FENCE.sub("", text)
    first: dict[str, Any] | None = None
    for match in re.finditer(r"\{", body):
        try:
            value, _ = decoder.raw_decode(body, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            if "reflection_text" in value:
                return value
            first = first or value
    return first


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out = [" ".join(str(item).split()) for item in value if isinstance(item, str | int | float)]
    return [truncate(item, ITEM_MAX_CHARS) for item in out if item][:MAX_ITEMS]


def _ints(value: Any) -> list[int]:
    if not isinstance(value, list):
        value = [value]
    out: list[int] = []
    for item in value:
        if isinstance(item, bool):
            continue
        if isinstance(item, int | float) and float(item).is_integer() and item >= 0:
            out.append(int(item))
        elif isinstance(item, str) and item.strip().isdigit():
            out.append(int(item.strip()))
    return list(dict.fromkeys(out))


def _confidence(value: Any) -> float:
    if isinstance(value, bool):
        return 0.5
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.5
    if number != number:  # NaN
        return 0.5
    if 1.0 < number <= 100.0:  # a percentage
        number /= 100.0
    return min(1.0, max(0.0, number))


def quality_indicators(reflection: dict[str, Any]) -> list[str]:
    """The seed's low-quality indicators that hold for a ``self_reflection`` object."""
    found = []
    if not reflection.get("actionable_insights"):
        found.append("no_actionable_insights")
    if len(str(reflection.get("reflection_text", ""))) < MIN_REFLECTION_CHARS:
        found.append("reflection_text_under_100_chars")
    credit = reflection.get("credit_assignment") or {}
    if not credit.get("failing_action_indices") and not credit.get("root_cause"):
        found.append("no_credit_assignment")
    return found


def parse_reflexion(text: str) -> Parsed:
    """Parse a reflexion answer into ``fields["self_reflection"]`` (schema-shaped) plus quality notes.

    Raises :class:`ParseError` when no JSON object with a non-empty ``reflection_text`` is found.
    """
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty reply", raw=text if isinstance(text, str) else "")
    data = _find_object(text)
    if data is None:
        raise ParseError("no JSON object found", raw=text)
    reflection_text = data.get("reflection_text")
    if not isinstance(reflection_text, str) or not reflection_text.strip():
        raise ParseError("the JSON object has no reflection_text", raw=text)
    raw_credit = data.get("credit_assignment")
    credit: dict[str, Any] = raw_credit if isinstance(raw_credit, dict) else {}
    category = str(credit.get("failure_category") or data.get("failure_category") or "other")
    category = category.strip().lower().replace(" ", "_").replace("-", "_")
    root_cause = credit.get("root_cause")
    reflection: dict[str, Any] = {
        "reflection_text": " ".join(reflection_text.split()),
        "credit_assignment": {
            "failing_action_indices": _ints(credit.get("failing_action_indices", [])),
            "root_cause": " ".join(root_cause.split()) if isinstance(root_cause, str) else "",
            "failure_category": category if category in FAILURE_CATEGORIES else "other",
        },
        "causal_reasoning": " ".join(str(data.get("causal_reasoning") or "").split()),
        "actionable_insights": _strings(data.get("actionable_insights")),
        "lessons_learned": _strings(data.get("lessons_learned")),
        "confidence": _confidence(data.get("confidence", 0.5)),
        "related_reflections": _ints(data.get("related_reflections", [])),
    }
    indicators = quality_indicators(reflection)
    return Parsed(
        fields={
            "self_reflection": reflection,
            "low_quality": bool(indicators),
            "low_quality_indicators": indicators,
        }
    )


def _action_line(index: int, action: str | dict[str, Any]) -> str:
    if isinstance(action, str):
        return f"{index}. {truncate(action, ACTION_MAX_CHARS)}"
    parts = [str(action.get("description") or action.get("type") or json.dumps(action, default=str))]
    if action.get("file_path"):
        parts.append(f"File: {action['file_path']}")
    changes = action.get("changes")
    if isinstance(changes, dict) and ("additions" in changes or "deletions" in changes):
        parts.append(f"Changes: +{changes.get('additions', 0)} -{changes.get('deletions', 0)}")
    if action.get("command"):
        parts.append(f"Command: {action['command']}")
    return f"{index}. {truncate(' | '.join(parts), ACTION_MAX_CHARS)}"


def previous_reflections(episode: Episode) -> list[dict[str, Any]]:
    """The window's reflections handed in through ``episode.metadata`` (well-formed entries only)."""
    value = episode.metadata.get("previous_reflections")
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict) and isinstance(item.get("reflection_text"), str)]


class ReflexionReflector(PromptReflector):
    """Seed 001's self-reflection model (Msr): credit assignment, causal reasoning, insights."""

    name = "reflexion"
    max_output_tokens = 700
    repair_hint = (
        "Answer again with only one JSON object with the keys reflection_text, credit_assignment "
        "(failing_action_indices, root_cause, failure_category), causal_reasoning, actionable_insights, "
        "lessons_learned, confidence."
    )

    def user_prompt(self, episode: Episode, trigger: str) -> str:
        """The seed's template: previous reflections, task, numbered actions, results, errors."""
        episode = Episode.model_validate(redact_value(episode.model_dump()))
        lines: list[str] = []
        previous = previous_reflections(episode)
        if previous:
            lines.append("## Previous Reflections")
            for item in previous:
                lines.append(f"### Iteration {item.get('iteration', '?')}")
                lines.append(truncate(item["reflection_text"], PREVIOUS_MAX_CHARS))
                learned = _strings(item.get("lessons_learned"))
                if learned:
                    lines.append("Lessons learned:")
                    lines.extend(f"- {lesson}" for lesson in learned)
            lines.append("")
        lines.append("## Current Failure")
        lines.append(f"**Task**: {truncate(episode.task, TASK_MAX_CHARS)}")
        if episode.iteration is not None:
            lines.append(f"**Iteration**: {episode.iteration} (trigger: {trigger})")
        lines.append("**Actions Taken**:")
        actions = episode.actions[:MAX_ACTIONS]
        if actions:
            lines.extend(_action_line(index, action) for index, action in enumerate(actions))
        else:
            lines.append(f"0. {truncate(episode.attempt or '(not reported)', ACTION_MAX_CHARS * 2)}")
        lines.append("**Verification Results**:")
        errors: list[dict[str, Any]] = []
        for check in episode.verification:
            lines.append(f"- {check.tool}: {check.status} (exit {check.exit_code})")
            if check.stderr:
                lines.append(f"  Error: {truncate(check.stderr, STDERR_MAX_CHARS)}")
            errors.extend(check.errors)
        if not episode.verification:
            lines.append("- (none reported)")
        if episode.error:
            lines.append(f"**Critical error**: {truncate(episode.error, STDERR_MAX_CHARS)}")
        if errors:
            lines.append("**Errors**:")
            for error in errors[:MAX_ERRORS]:
                where = f"{error.get('file', '?')}:{error.get('line', '?')}"
                message = truncate(str(error.get("message", "")), ITEM_MAX_CHARS)
                lines.append(f"- {error.get('type', 'other')}: {message}\n  Location: {where}")
            if len(errors) > MAX_ERRORS:
                lines.append(f"- … and {len(errors) - MAX_ERRORS} more")
        if episode.reward is not None:
            lines.append(f"**Reward**: {episode.reward:.2f}")
        lines.append("")
        lines.append("Now write your reflection as the JSON object described.")
        return "\n".join(lines)

    def parse(self, text: str) -> Parsed:
        return parse_reflexion(text)

    def lessons(self, parsed: Parsed, episode: Episode, trigger: str) -> list[Lesson]:
        """One ``lesson`` per ``lessons_learned`` entry, tagged ``reflexion`` and the failure category."""
        reflection = parsed.fields["self_reflection"]
        credit = reflection["credit_assignment"]
        category = credit["failure_category"]
        situation = truncate(f"{episode.task_type + ': ' if episode.task_type else ''}{episode.task}", 300)
        mistake = credit["root_cause"] or truncate(reflection["causal_reasoning"], 300) or "(not stated)"
        tags = ["reflexion", f"trigger:{trigger}", category.replace("_", "-")]
        if episode.task_type:
            tags.append(episode.task_type)
        metadata = {"failure_category": category, "loop_id": episode.loop_id, "iteration": episode.iteration}
        return [
            Lesson(
                namespace=episode.namespace or "default",
                kind="lesson",
                content=render_lesson_content(situation, mistake, learned),
                situation=situation,
                mistake=mistake,
                correction=learned,
                trigger=trigger,
                tags=tags,
                task_type=episode.task_type,
                agent=episode.agent,
                goal_id=episode.goal_id,
                importance={"low": 0.3, "normal": 0.5, "high": 0.8}[episode.importance],
                confidence=reflection["confidence"],
                source="llm",
                episode_id=episode.id,
                metadata={key: value for key, value in metadata.items() if value is not None},
            )
            for learned in reflection["lessons_learned"]
        ]
