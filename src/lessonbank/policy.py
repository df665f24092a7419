"""The reflection policy: from an episode and its agent's recent history, decide whether to
reflect, on which trigger, with which reflector — or skip, and why.

By default an episode costs at most ONE reflection call. The first row that applies wins:

=====================  =====================================================  ==================  =========
situation              fires when                                             trigger             reflector
=====================  =====================================================  ==================  =========
``loop``               a loop iteration (``loop_id`` / ``iteration``) failed   error / failure     reflexion
``goal``               a goal reached a terminal state (``goal_id`` and        terminal            insight
                       status success or failure)
``important_failure``  a failure that is important (importance high),         high_importance /   dual
                       long (> 60 s) or repeated (2+ failures of the agent    long_duration /
                       in the last 24 h)                                      failure_streak
``signal``             any other error, failed check, hallucination or        error / failure /   lesson
                       low-quality signal (seed 004's switches apply)         hallucination /
                                                                              low_quality
``important_success``  a success that is important or long                   high_importance /   dual
                                                                              long_duration
(manual)               ``bank.reflect(episode_id)``                           manual              the row's
=====================  =====================================================  ==================  =========

Skips: a passed loop iteration (Reflexion reflects only after a failed verification); a
trivial success (< 5 s, no error, a single step at most); the agent's cooldown (a reflection
decided for the same agent within ``cooldown_s``; loops and goals are exempt); an identical
episode already reflected (same task, trigger, attempt and outcome: the store's dedupe key).

The thresholds are settings too: 60 s ``LESSONBANK_LONG_DURATION_S``, 5 s
``LESSONBANK_TRIVIAL_DURATION_S``, 2 failures ``LESSONBANK_FAILURE_STREAK`` within 24 h
``LESSONBANK_FAILURE_WINDOW_S``, cooldown ``LESSONBANK_COOLDOWN_S`` (0, off, by default).
Each row's reflector is configurable (``Settings.routes`` / ``LESSONBANK_ROUTE_<SITUATION>``):
a reflector name, or ``off`` to ignore the row (the next row that applies is used). With
``max_reflections_per_episode`` (``LESSONBANK_MAX_REFLECTIONS_PER_EPISODE``) above 1, the next
rows that apply also run, each with a reflector not used yet, one job each. Every decision,
including a skip and its reason, is stored on the episode.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from lessonbank.models import Decision, Episode
from lessonbank.settings import Settings
from lessonbank.text import normalize

SITUATIONS = ("loop", "goal", "important_failure", "signal", "important_success")
OFF = "off"


@dataclass(frozen=True)
class History:
    """What the policy needs to know about the agent's recent episodes (newest first)."""

    failures: int = 0  # distinct failed trajectories of the agent in the failure window, others than this one
    last_reflection_age_s: float | None = None  # seconds since a reflection was last decided for the agent


def history_of(
    episode: Episode, recent: Sequence[tuple[Episode, Decision | None]], settings: Settings
) -> History:
    """Summarise ``recent`` (the agent's episodes, newest first) relative to ``episode``."""
    failures: set[str] = set()
    age: float | None = None
    own = trajectory_key(episode)
    for other, decision in recent:
        if other.id == episode.id:
            continue
        delta = (episode.created_at - other.created_at).total_seconds()
        # The same failure recorded again is a repeat, not a streak: count distinct trajectories.
        key = trajectory_key(other)
        if failed(other) and delta <= settings.failure_window_s and key != own:
            failures.add(key)
        reflected = decision is not None and decision.reflect and decision.reflector not in (None, "insight")
        if reflected and not other.loop_id and other.iteration is None and age is None:
            age = max(0.0, delta)
    return History(failures=len(failures), last_reflection_age_s=age)


def route(settings: Settings, situation: str) -> str | None:
    """The reflector configured for ``situation``, or None when the row is off."""
    name = settings.routes().get(situation, OFF)
    return None if name == OFF else name


def failed(episode: Episode) -> bool:
    checks = any(v.status in ("failed", "error") for v in episode.verification)
    return bool(episode.error) or episode.status == "failure" or checks


def decide(episode: Episode, settings: Settings, history: History | None = None) -> Decision:
    """Which trigger fires for ``episode`` under ``settings``, or why none does."""
    if not settings.reflexion_enabled:
        return Decision(reflect=False, reason="reflection disabled (LESSONBANK_REFLEXION_ENABLED=false)")
    history = history or History()
    is_failure = failed(episode)
    loop = route(settings, "loop")
    if loop and (episode.loop_id is not None or episode.iteration is not None):
        if not is_failure:
            return Decision(
                reflect=False,
                reason="skip: loop iteration passed (Reflexion reflects only after a failed verification)",
            )
        trigger = "error" if episode.error else "failure"
        return _reflect(trigger, loop, "loop iteration failed")
    goal = route(settings, "goal")
    if goal and episode.goal_id and episode.status in ("success", "failure"):
        state = "failed" if episode.status == "failure" else "completed"
        return _reflect("terminal", goal, f"goal {state}")
    important = _important_triggers(episode, history, settings, is_failure)
    cooldown = _cooldown(history, settings)
    dual = route(settings, "important_failure")
    if is_failure and important and dual:
        return cooldown or _reflect(important[0], dual, "important, long or repeated failure")
    signal = _signal_decision(episode, settings)
    lesson = route(settings, "signal")
    if signal.reflect and lesson:
        return cooldown or signal.model_copy(update={"reflector": lesson})
    success_route = route(settings, "important_success")
    if not is_failure and important and success_route:
        if _trivial(episode, settings):
            return Decision(
                reflect=False,
                reason=f"skip: trivial task (< {settings.trivial_duration_s:g} s, expected output, one step)",
            )
        return cooldown or _reflect(important[0], success_route, "important or long success")
    if signal.reflect:
        return Decision(reflect=False, reason=f"route signal is off (LESSONBANK_ROUTE_SIGNAL={OFF})")
    return signal


def decide_all(episode: Episode, settings: Settings, history: History | None = None) -> list[Decision]:
    """The decision for ``episode``, then (when ``max_reflections_per_episode`` > 1) the rows that
    would apply next, each with a reflector not used yet: the first is :func:`decide`'s."""
    first = decide(episode, settings, history)
    decisions = [first]
    used = {first.reflector}
    current = settings
    while first.reflect and len(decisions) < settings.max_reflections_per_episode:
        off = {f"route_{row}": OFF for row, name in current.routes().items() if name in used}
        current = current.with_overrides(**off)
        following = decide(episode, current, history)
        if not following.reflect:
            break
        decisions.append(following)
        used.add(following.reflector)
    return decisions


def _reflect(trigger: str, reflector: str, why: str) -> Decision:
    return Decision(reflect=True, trigger=trigger, reflector=reflector, reason=f"trigger {trigger}: {why}")


def _important_triggers(
    episode: Episode, history: History, settings: Settings, is_failure: bool
) -> list[str]:
    out = []
    if episode.importance == "high":
        out.append("high_importance")
    if episode.duration_s is not None and episode.duration_s > settings.long_duration_s:
        out.append("long_duration")
    if is_failure and episode.agent and history.failures + 1 >= settings.failure_streak:
        out.append("failure_streak")
    return out


def _cooldown(history: History, settings: Settings) -> Decision | None:
    age = history.last_reflection_age_s
    if settings.cooldown_s > 0 and age is not None and age < settings.cooldown_s:
        return Decision(
            reflect=False,
            reason=f"skip: agent cooldown (reflected {age:.0f} s ago; LESSONBANK_COOLDOWN_S={settings.cooldown_s:g})",
        )
    return None


def _trivial(episode: Episode, settings: Settings) -> bool:
    quick = episode.duration_s is not None and episode.duration_s < settings.trivial_duration_s
    return quick and not episode.error and not episode.signals and len(episode.actions) <= 1


def _signal_decision(episode: Episode, settings: Settings) -> Decision:
    """Seed 004's triggers, in order, each behind its switch."""
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


def manual_reflector(episode: Episode, settings: Settings) -> str:
    """The reflector a manual request uses: the row the episode falls in, ignoring skips and switches."""
    if episode.loop_id is not None or episode.iteration is not None:
        situation = "loop"
    elif episode.goal_id and episode.status in ("success", "failure"):
        situation = "goal"
    elif episode.importance == "high" or (episode.duration_s or 0.0) > settings.long_duration_s:
        situation = "important_failure" if failed(episode) else "important_success"
    else:
        situation = "signal"
    return route(settings, situation) or "lesson"


def manual_decision(reflector: str = "lesson") -> Decision:
    return Decision(reflect=True, trigger="manual", reflector=reflector, reason="trigger manual (requested)")


HISTORY_LIMIT = 10  # newest episodes of the agent the policy reads


def needs_history(episode: Episode, settings: Settings) -> bool:
    """Whether the agent's history can change the decision: a failure outside loops and goals (the
    streak), or any episode when a cooldown is set. Saves the caller a read otherwise."""
    if not episode.agent or not settings.reflexion_enabled:
        return False
    if settings.cooldown_s > 0:
        return True
    in_loop = episode.loop_id is not None or episode.iteration is not None
    return failed(episode) and not in_loop and not episode.goal_id


def history_since(episode: Episode, settings: Settings) -> float:
    """How far back the agent's history matters for ``episode`` (Unix seconds)."""
    window = max(settings.failure_window_s, settings.cooldown_s)
    return (episode.created_at - timedelta(seconds=window)).timestamp()


def trajectory_key(episode: Episode) -> str:
    """Task + attempt + outcome, folded: equal for two records of the same trajectory."""
    return dedupe_key(episode, "")


def dedupe_key(episode: Episode, trigger: str) -> str:
    """Hash of task + trigger + attempt + outcome: the same failure recorded twice is reflected once."""
    attempt = episode.attempt or " ".join(str(action) for action in episode.actions)
    outcome = " | ".join(part for part in (episode.status, episode.error or "", episode.output or "") if part)
    parts = [normalize(episode.task), trigger, normalize(attempt), normalize(outcome)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def decision_rows(recent: Sequence[tuple[Episode, Decision | None]]) -> list[dict[str, Any]]:
    """Stored decisions as rows for listing: the episode's id, time, agent, status and task, then
    the decision (reflect, trigger, reflector, reason, job_id)."""
    return [
        {
            "episode_id": episode.id,
            "created_at": episode.created_at.isoformat(),
            "agent": episode.agent,
            "status": episode.status,
            "task": episode.task,
            **(decision.model_dump(mode="json") if decision else {"reflect": False, "reason": "unknown"}),
        }
        for episode, decision in recent
    ]
