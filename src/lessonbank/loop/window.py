"""The Ω window (seed 001): which of a loop's reflections the next attempt sees.

Invariants: the window holds at most Ω reflections, the newest ones; it is then pruned to a
token budget keeping the newest first; what is returned is always in chronological order
(by the integer iteration, never by its text, so iteration 10 follows iteration 9). Without an
explicit Ω, a loop uses the preset of its evaluator's verification type (:func:`omega_for`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lessonbank.errors import InputError
from lessonbank.text import estimate_tokens

OMEGA_DEFAULT = 3
OMEGA_MAX = 10  # the schema's limit on omega_capacity
OMEGA_PRESETS: dict[str, int] = {
    "unit_tests": 1,
    "type_check": 1,
    "lint": 1,
    "integration_tests": 3,
    "combined": 3,
    "manual_review": 5,
}
WINDOW_BUDGET_TOKENS = 1500


def omega_for(verification_type: str | None) -> int:
    """The seed's preset Ω for a verification type (3 when it has none)."""
    return OMEGA_PRESETS.get(verification_type or "", OMEGA_DEFAULT)


def auto_omega(categories: Sequence[str]) -> int:
    """Dynamic Ω from failure-category diversity: ≥ 5 distinct → 5, ≥ 3 → 3, else 1."""
    distinct = len({category for category in categories if category})
    if distinct >= 5:
        return 5
    if distinct >= 3:
        return 3
    return 1


def check_omega(omega: int | str | None) -> int | str | None:
    """Validate an ``omega`` argument: an int in 1..10, ``"auto"``, a preset name, or None (the
    preset of the evaluator's verification type)."""
    if omega is None:
        return None
    if isinstance(omega, str):
        if omega == "auto" or omega in OMEGA_PRESETS:
            return omega
        raise InputError(
            f"omega {omega!r} is not 'auto' or a preset ({', '.join(OMEGA_PRESETS)}); or pass 1..{OMEGA_MAX}",
            field="omega",
        )
    if isinstance(omega, bool) or not isinstance(omega, int) or not 1 <= omega <= OMEGA_MAX:
        raise InputError(
            f"omega must be 1..{OMEGA_MAX}, 'auto' or a preset name, got {omega!r}", field="omega"
        )
    return omega


def resolve_omega(
    omega: int | str | None, *, verification_type: str | None, categories: Sequence[str]
) -> int:
    """The Ω in force: ``omega`` itself, the preset it names, the dynamic one (``"auto"``), or with
    ``omega=None`` the preset of ``verification_type`` (:func:`omega_for`: 3 when it has none)."""
    if omega is None:
        return omega_for(verification_type)
    if omega == "auto":
        return auto_omega(categories)
    if isinstance(omega, str):
        return OMEGA_PRESETS[omega]
    return omega


def reflection_tokens(reflection: dict[str, Any]) -> int:
    """The seed's estimate: reflection text plus actionable insights."""
    text = str(reflection.get("reflection_text", ""))
    insights = " ".join(str(item) for item in reflection.get("actionable_insights", []))
    return estimate_tokens(f"{text} {insights}")


def select_window(
    memory: Sequence[dict[str, Any]], omega: int, *, budget_tokens: int = WINDOW_BUDGET_TOKENS
) -> list[dict[str, Any]]:
    """The last ``omega`` of ``memory`` (items with an int ``iteration`` and a ``self_reflection``),
    pruned to ``budget_tokens`` newest first, returned oldest first."""
    ordered = sorted(memory, key=lambda item: int(item["iteration"]))
    recent = ordered[-omega:] if omega > 0 else []
    kept: list[dict[str, Any]] = []
    used = 0
    for item in reversed(recent):
        tokens = reflection_tokens(item["self_reflection"])
        if used + tokens > budget_tokens:
            break
        kept.append(item)
        used += tokens
    kept.reverse()
    return kept


def render_window(window: Sequence[dict[str, Any]]) -> str:
    """The reflections as the actor's prompt block (empty when there are none)."""
    if not window:
        return ""
    lines = ["## Previous Reflections"]
    for item in window:
        reflection = item["self_reflection"]
        lines.append(f"### Iteration {item['iteration']}")
        lines.append(str(reflection.get("reflection_text", "")))
        for title, key in (("Next steps", "actionable_insights"), ("Lessons learned", "lessons_learned")):
            values = reflection.get(key) or []
            if values:
                lines.append(f"{title}:")
                lines.extend(f"- {value}" for value in values)
    return "\n".join(lines)
