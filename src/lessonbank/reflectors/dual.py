"""The dual reflector (seed 003, MARS): one call → a PRINCIPLE and a PROCEDURE.

The principle becomes a rule ``IF <condition> THEN <action> BECAUSE <reason>`` (kind
``principle``, tactical stream); the procedure becomes a replay example (kind ``procedure``)
with its task type, result and numbered steps, at most 500 tokens. The parser tolerates
markdown, bold labels, bullets instead of numbers, steps on one line, and a principle
written as "Always X when Y because Z" (turned into IF/THEN form).
"""

from __future__ import annotations

import re
from typing import Any

from lessonbank.errors import ParseError
from lessonbank.models import Episode, Lesson
from lessonbank.reflectors.base import Parsed, PromptReflector
from lessonbank.reflectors.budget import Field
from lessonbank.reflectors.insight import strip_markdown
from lessonbank.text import estimate_tokens

MAX_STEPS = 8
STEP_MAX_CHARS = 240
RULE_PART_MAX_CHARS = 300
PROCEDURE_MAX_TOKENS = 500

_SECTION = re.compile(
    r"^[\s>#*_`\d.)-]*(principle|procedure)\b[\s*_`]*(?:reflection)?[\s*_`]*(?:\([^)\n]*\))?[\s*_`]*[:\-–]?[\s*_`]*",
    re.IGNORECASE | re.MULTILINE,
)
_IF_THEN = re.compile(r"\bif\b\s*(.+?)\s*,?\s*\bthen\b\s*(.+)", re.IGNORECASE | re.DOTALL)
_BECAUSE = re.compile(r"\s*[,;(]?\s*\b(?:because|since|as this|reason:)\s+(.+?)\)?\s*$", re.IGNORECASE)
_WHEN = re.compile(r"^(.+?)\s*,?\s*\b(?:when|whenever)\b\s+(.+)$", re.IGNORECASE)
_STEP_MARK = re.compile(r"^\s*(?:[-*+•]|\(?\d+[.)]|step\s*\d+\s*[:.)-])\s*", re.IGNORECASE)
_INLINE_STEPS = re.compile(r"\s(?=\d+[.)]\s)")


def _sections(text: str) -> dict[str, str]:
    body = re.sub(r"^\s*```[\w-]*\s*$", "", text, flags=re.MULTILINE)
    matches = list(_SECTION.finditer(body))
    out: dict[str, str] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(body)
        name = match.group(1).lower()
        out.setdefault(name, body[match.end() : end].strip())
    return out


def parse_principle(text: str) -> dict[str, str]:
    """``condition``, ``action`` and ``reason`` (may be empty) of a principle in any common form."""
    plain = strip_markdown(text).strip().strip("\"'").rstrip(".").strip()
    if not plain:
        raise ParseError("empty PRINCIPLE", raw=text)
    reason = ""
    because = _BECAUSE.search(plain)
    if because:
        reason = because.group(1).strip().rstrip(".")
        plain = plain[: because.start()].strip().rstrip(",;.")
    found = _IF_THEN.search(plain)
    if found:
        condition, action = found.group(1), found.group(2)
    else:
        when = _WHEN.match(plain)
        # A bare rule ("Always X.") keeps an empty condition: the episode's task type fills it in.
        action, condition = (when.group(1), when.group(2)) if when else (plain, "")
    condition, action = (" ".join(part.split()).strip(" ,.;") for part in (condition, action))
    if not action:
        raise ParseError("PRINCIPLE has no action (write IF <condition> THEN <action>)", raw=text)
    return {
        "condition": condition[:RULE_PART_MAX_CHARS],
        "action": action[:RULE_PART_MAX_CHARS],
        "reason": reason[:RULE_PART_MAX_CHARS],
    }


def parse_steps(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and len(_INLINE_STEPS.split(lines[0])) > 1:
        lines = _INLINE_STEPS.split(lines[0])
    steps = []
    for line in lines:
        step = strip_markdown(_STEP_MARK.sub("", line)).strip(" \t>-*_`~|")
        if re.search(r"[^\W_]", step):  # a line of stray markdown is not a step
            steps.append(step[:STEP_MAX_CHARS])
    return steps[:MAX_STEPS]


def parse_dual(text: str) -> Parsed:
    """Parse a PRINCIPLE + PROCEDURE answer. Raises :class:`ParseError` when either is unusable."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty reply", raw=text if isinstance(text, str) else "")
    found = _sections(text)
    missing = [name.upper() for name in ("principle", "procedure") if not found.get(name)]
    if missing:
        raise ParseError(f"missing {' and '.join(missing)} section", raw=text)
    rule = parse_principle(found["principle"])
    steps = parse_steps(found["procedure"])
    if not steps:
        raise ParseError("PROCEDURE has no steps", raw=text)
    return Parsed(fields={**rule, "steps": steps})


def default_condition(episode: Episode) -> str:
    if episode.task_type:
        return f"the task type is {episode.task_type}"
    return f"the task is like: {' '.join(episode.task.split())[:80]}"


def rule_text(rule: dict[str, str]) -> str:
    """The tactical form: ``IF <condition> THEN <action>[ BECAUSE <reason>]``."""
    text = f"IF {rule['condition']} THEN {rule['action']}"
    return f"{text} BECAUSE {rule['reason']}" if rule.get("reason") else text


def procedure_text(task: str, task_type: str | None, result: str, steps: list[str]) -> str:
    """A replay example, its steps cut so the whole stays within PROCEDURE_MAX_TOKENS."""
    head = [f"Task: {' '.join(task.split())[:400]}"]
    if task_type:
        head.append(f"Task type: {task_type}")
    head += [f"Result: {result}", "Steps:"]
    kept = list(steps)
    while True:
        text = "\n".join([*head, *(f"{i}. {step}" for i, step in enumerate(kept, 1))])
        if estimate_tokens(text) <= PROCEDURE_MAX_TOKENS or len(kept) <= 1:
            return text
        kept.pop()


class DualReflector(PromptReflector):
    """Seed 003's metacognitive reflection: principle (rules) + procedure (replay) in one call."""

    name = "dual"
    max_output_tokens = 300
    repair_hint = (
        "Answer again in exactly this shape: a line 'PRINCIPLE: IF <condition> THEN <action> BECAUSE <reason>', "
        "then a line 'PROCEDURE:' followed by numbered steps '1. …', one per line."
    )

    def user_prompt(self, episode: Episode, trigger: str) -> str:
        """Seed 003's evaluation prompt; with the system prompt it stays within 500 tokens."""
        result = "FAILURE" if episode.status == "failure" or episode.error else "SUCCESS"
        outcome = " | ".join(part for part in (episode.error, episode.output) if part) or "(not reported)"
        actions = episode.attempt or "\n".join(str(action) for action in episode.actions)
        duration = f"{episode.duration_s:g}s" if episode.duration_s is not None else "(not reported)"

        def render(values: dict[str, str]) -> str:
            lines = [
                "Evaluate this completed task:",
                "",
                f"Task: {values['task']}",
                f"Agent: {values['agent'] or '(unknown)'}",
            ]
            if values["task_type"]:
                lines.append(f"Task type: {values['task_type']}")
            lines += [f"Result: {result}", f"Output: {values['outcome']}", f"Duration: {duration}"]
            if values["actions"]:
                lines += ["Steps taken:", values["actions"]]
            lines += ["", "Extract the PRINCIPLE and the PROCEDURE."]
            return "\n".join(lines)

        fields = [
            Field("task", episode.task, 500),
            Field("agent", episode.agent or "", 60),
            Field("task_type", episode.task_type or "", 60),
            Field("outcome", outcome, 600),
            Field("actions", actions, 600),
        ]
        return self.fit(fields, render)

    def parse(self, text: str) -> Parsed:
        return parse_dual(text)

    def lessons(self, parsed: Parsed, episode: Episode, trigger: str) -> list[Lesson]:
        fields = parsed.fields
        result = "failure" if episode.status == "failure" or episode.error else "success"
        importance = {"low": 0.3, "normal": 0.5, "high": 0.8}[episode.importance]
        common: dict[str, Any] = {
            "namespace": episode.namespace or "default",
            "trigger": trigger,
            "task_type": episode.task_type,
            "agent": episode.agent,
            "goal_id": episode.goal_id,
            "importance": importance,
            "confidence": 0.5,
            "source": "llm",
            "episode_id": episode.id,
        }
        rule = {key: fields[key] for key in ("condition", "action", "reason")}
        rule["condition"] = rule["condition"] or default_condition(episode)
        principle = Lesson(
            kind="principle",
            content=rule_text(rule),
            tags=["rule", "tactical", f"trigger:{trigger}"],
            metadata={"stream": "tactical", **rule},
            **common,
        )
        procedure = Lesson(
            kind="procedure",
            content=procedure_text(episode.task, episode.task_type, result, list(fields["steps"])),
            tags=["replay", result, f"trigger:{trigger}"],
            metadata={"result": result, "task": episode.task[:400], "steps": list(fields["steps"])},
            **common,
        )
        return [principle, procedure]
