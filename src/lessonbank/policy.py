"""The reflection policy: from an episode, decide whether to reflect, why, and with which reflector.

Seed 004's triggers, in the order they are checked (the first that applies wins):

======================  ==========================================  ==========  =========
trigger                 fires when                                  default     reflector
======================  ==========================================  ==========  =========
error                   the episode carries an error                on          lesson
hallucination           signals include ``hallucination``           on          lesson
failure                 status is failure (e.g. a failed check)     on (error)  lesson
low_quality             signals include ``low_quality``             off         lesson
manual                  ``bank.reflect(episode_id)``                always      lesson
======================  ==========================================  ==========  =========

Every decision, including a skip and its reason, is stored on the episode.
"""

from __future__ import annotations

import hashlib

from lessonbank.config import Settings
from lessonbank.models import Decision, Episode
from lessonbank.text import normalize


def decide(episode: Episode, settings: Settings) -> Decision:
    """Which trigger fires for ``episode`` under ``settings``, or why none does."""
    if not settings.reflexion_enabled:
        return Decision(reflect=False, reason="reflection disabled (LESSONBANK_REFLEXION_ENABLED=false)")
    failed_checks = [v for v in episode.verification if v.status in ("failed", "error")]
    candidates = [
        ("error", bool(episode.error), settings.on_error, "LESSONBANK_REFLEXION_ON_ERROR"),
        (
            "hallucination",
            "hallucination" in episode.signals,
            settings.on_hallucination,
            "LESSONBANK_REFLEXION_ON_HALLUCINATION",
        ),
        (
            "failure",
            episode.status == "failure" or bool(failed_checks),
            settings.on_error,
            "LESSONBANK_REFLEXION_ON_ERROR",
        ),
        (
            "low_quality",
            "low_quality" in episode.signals,
            settings.on_low_quality,
            "LESSONBANK_REFLEXION_ON_LOW_QUALITY",
        ),
    ]
    disabled = []
    for trigger, applies, enabled, variable in candidates:
        if not applies:
            continue
        if enabled:
            return Decision(reflect=True, trigger=trigger, reflector="lesson", reason=f"trigger {trigger}")
        disabled.append(f"{trigger} (off: {variable})")
    if disabled:
        return Decision(reflect=False, reason="trigger disabled: " + ", ".join(disabled))
    return Decision(reflect=False, reason=f"no trigger: {episode.status} without error or signal")


def manual_decision() -> Decision:
    return Decision(reflect=True, trigger="manual", reflector="lesson", reason="trigger manual (requested)")


def dedupe_key(episode: Episode, trigger: str) -> str:
    """Hash of task + trigger + attempt + outcome: the same failure recorded twice is reflected once."""
    attempt = episode.attempt or " ".join(str(action) for action in episode.actions)
    outcome = " | ".join(part for part in (episode.status, episode.error or "", episode.output or "") if part)
    parts = [normalize(episode.task), trigger, normalize(attempt), normalize(outcome)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
