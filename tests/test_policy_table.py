"""The policy table: every trigger, which reflector it selects, the skips, and the configuration."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from lessonbank import Episode, LessonBank
from lessonbank.errors import ConfigError, InputError
from lessonbank.llm import FakeLLM
from lessonbank.llm.base import Message
from lessonbank.models import Decision, VerificationResult
from lessonbank.policy import History, decide, decide_all, history_of, manual_reflector
from lessonbank.settings import Settings

S = Settings()


def _decide(history: History | None = None, settings: Settings = S, **kwargs: Any) -> Decision:
    return decide(Episode(task="t", **kwargs), settings, history)


@pytest.mark.parametrize(
    ("kwargs", "history", "trigger", "reflector"),
    [
        # a loop iteration → reflexion, only after a failed verification
        ({"loop_id": "L1", "iteration": 2, "error": "2 tests failed"}, None, "error", "reflexion"),
        (
            {"loop_id": "L1", "verification": [VerificationResult(tool="pytest", status="failed")]},
            None,
            "failure",
            "reflexion",
        ),
        ({"iteration": 0, "status": "failure", "importance": "high"}, None, "failure", "reflexion"),
        # a goal's terminal state → insight
        ({"goal_id": "g", "status": "failure", "error": "e"}, None, "terminal", "insight"),
        ({"goal_id": "g", "status": "success"}, None, "terminal", "insight"),
        # important, long or repeated failure → dual
        ({"status": "failure", "importance": "high"}, None, "high_importance", "dual"),
        ({"error": "e", "duration_s": 61.0}, None, "long_duration", "dual"),
        ({"error": "e", "agent": "a"}, History(failures=1), "failure_streak", "dual"),
        # important or long success → dual
        ({"importance": "high", "duration_s": 30.0}, None, "high_importance", "dual"),
        ({"duration_s": 90.0}, None, "long_duration", "dual"),
        # any other error / hallucination / low-quality signal → lesson
        ({"error": "e"}, None, "error", "lesson"),
        ({"error": "e", "agent": "a"}, History(failures=0), "error", "lesson"),
        ({"signals": ["hallucination"]}, None, "hallucination", "lesson"),
        ({"status": "failure", "duration_s": 60.0}, None, "failure", "lesson"),  # 60 s is not > 60 s
    ],
)
def test_default_table(kwargs: dict[str, Any], history: History | None, trigger: str, reflector: str) -> None:
    decision = _decide(history, **kwargs)
    assert (decision.reflect, decision.trigger, decision.reflector) == (True, trigger, reflector)
    assert decision.reason.startswith(f"trigger {trigger}")


def test_low_quality_routes_to_lesson_when_switched_on() -> None:
    settings = Settings(on_low_quality=True)
    decision = _decide(settings=settings, signals=["low_quality"])
    assert (decision.trigger, decision.reflector) == ("low_quality", "lesson")


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"loop_id": "L1", "iteration": 1}, "skip: loop iteration passed"),
        ({"importance": "high", "duration_s": 2.0}, "skip: trivial task"),
        ({"importance": "high", "duration_s": 2.0, "actions": ["a"]}, "skip: trivial task"),
        ({"status": "partial"}, "no trigger"),
    ],
)
def test_skips(kwargs: dict[str, Any], reason: str) -> None:
    decision = _decide(**kwargs)
    assert decision.reflect is False and decision.reason.startswith(reason)


def test_a_multi_step_quick_success_is_not_trivial() -> None:
    decision = _decide(importance="high", duration_s=2.0, actions=["a", "b"])
    assert decision.reflect and decision.reflector == "dual"


def test_cooldown_skips_dual_and_lesson_but_not_goals_or_loops() -> None:
    settings = Settings(cooldown_s=300.0)
    recent = History(last_reflection_age_s=100.0)
    skipped = _decide(recent, settings, error="e", agent="a")
    assert skipped.reflect is False and skipped.reason.startswith("skip: agent cooldown")
    assert "LESSONBANK_COOLDOWN_S=300" in skipped.reason
    assert _decide(recent, settings, goal_id="g", agent="a").reflector == "insight"
    assert _decide(recent, settings, loop_id="L", error="e", agent="a").reflector == "reflexion"
    assert _decide(History(last_reflection_age_s=301.0), settings, error="e", agent="a").reflect


def test_routes_are_configurable_in_code_and_by_env(monkeypatch: pytest.MonkeyPatch) -> None:
    in_code = Settings(route_important_failure="lesson", route_goal="dual")
    assert _decide(settings=in_code, status="failure", importance="high").reflector == "lesson"
    assert _decide(settings=in_code, goal_id="g").reflector == "dual"
    monkeypatch.setenv("LESSONBANK_ROUTE_LOOP", "off")
    monkeypatch.setenv("LESSONBANK_ROUTE_SIGNAL", "dual")
    monkeypatch.setenv("LESSONBANK_LONG_DURATION_S", "10")
    monkeypatch.setenv("LESSONBANK_FAILURE_STREAK", "3")
    monkeypatch.setenv("LESSONBANK_COOLDOWN_S", "30")
    env = Settings.from_env()
    assert env.routes()["loop"] == "off" and env.long_duration_s == 10.0
    assert (env.failure_streak, env.cooldown_s) == (3, 30.0)
    # loop row off: the next row that applies (here the plain error → signal → dual) is used
    assert _decide(settings=env, loop_id="L", error="e").reflector == "dual"
    assert _decide(settings=env, duration_s=11.0).trigger == "long_duration"
    assert _decide(History(failures=1), env, error="e", agent="a").trigger == "error"
    assert _decide(History(failures=2), env, error="e", agent="a").trigger == "failure_streak"


def test_signal_route_off_says_so() -> None:
    decision = _decide(settings=Settings(route_signal="off"), error="e")
    assert decision.reflect is False and "LESSONBANK_ROUTE_SIGNAL" in decision.reason


def test_unknown_route_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="LESSONBANK_ROUTE_GOAL"):
        LessonBank(f"sqlite:///{tmp_path / 'b.db'}", settings=Settings(route_goal="poem"))


def test_history_counts_distinct_recent_failures_and_the_last_reflection() -> None:
    now = Episode(task="deploy", error="timeout", agent="ops")
    earlier = now.created_at - timedelta(seconds=50)
    same = Episode(task="deploy", error="timeout", agent="ops", created_at=earlier)
    other = Episode(task="build", error="oom", agent="ops", created_at=earlier)
    old = Episode(task="lint", error="x", agent="ops", created_at=now.created_at - timedelta(days=2))
    reflected = Decision(reflect=True, trigger="error", reflector="lesson", reason="r")
    history = history_of(now, [(same, reflected), (other, None), (old, None)], S)
    assert history.failures == 1  # the identical repeat and the 2-day-old failure do not count
    assert history.last_reflection_age_s == pytest.approx(50.0)


def test_manual_reflection_uses_the_row_of_the_episode() -> None:
    assert manual_reflector(Episode(task="t", goal_id="g"), S) == "insight"
    assert manual_reflector(Episode(task="t", loop_id="L"), S) == "reflexion"
    assert manual_reflector(Episode(task="t", importance="high", error="e"), S) == "dual"
    assert manual_reflector(Episode(task="t"), S) == "lesson"


def test_failure_streak_end_to_end_from_stored_history(db_url: str) -> None:
    with LessonBank(db_url, llm=FakeLLM(default="<skip>nothing actionable</skip>"), worker=False) as bank:
        first = bank.record(Episode(task="deploy api", error="timeout", agent="ops"))
        again = bank.record(Episode(task="deploy api", error="timeout", agent="ops"))
        second = bank.record(Episode(task="migrate db", error="lock wait", agent="ops"))
        elsewhere = bank.record(Episode(task="migrate db", error="lock", agent="web"))
        decisions = {row["episode_id"]: row for row in bank.decisions()}
    assert decisions[first.id]["reflector"] == "lesson"
    assert decisions[again.id]["reason"].startswith("duplicate")
    assert (decisions[second.id]["trigger"], decisions[second.id]["reflector"]) == ("failure_streak", "dual")
    assert decisions[elsewhere.id]["reflector"] == "lesson"


def test_every_decision_is_visible_in_show_and_jobs(db_url: str) -> None:
    with LessonBank(db_url, worker=False) as bank:
        skipped = bank.record(Episode(task="status check", duration_s=1.0, importance="high"))
        routed = bank.record(Episode(task="big migration", error="failed", importance="high"))
        assert bank.show(skipped.id)["decision"]["reason"].startswith("skip: trivial task")
        (job,) = bank.jobs()
        assert job.episode_id == routed.id and job.payload == {
            "trigger": "high_importance",
            "reflector": "dual",
        }
        with pytest.raises(InputError, match="unknown reflector"):
            bank.reflect(routed.id, reflector="sonnet")
        manual = bank.reflect(routed.id, reflector="lesson")
        assert (manual.trigger, manual.reflector) == ("manual", "lesson")


def test_one_reflection_per_episode_by_default_more_when_allowed() -> None:
    episode = Episode(task="t", goal_id="g", status="failure", error="e", importance="high")
    assert [d.reflector for d in decide_all(episode, S)] == ["insight"]
    two = Settings(max_reflections_per_episode=2)
    assert [(d.trigger, d.reflector) for d in decide_all(episode, two)] == [
        ("terminal", "insight"),
        ("high_importance", "dual"),
    ]
    three = Settings(max_reflections_per_episode=5)
    assert [d.reflector for d in decide_all(episode, three)] == ["insight", "dual", "lesson"]
    assert [d.reflector for d in decide_all(Episode(task="t"), three)] == [None]


def test_extra_reflections_run_as_their_own_jobs(db_url: str) -> None:
    def model(messages: Sequence[Message]) -> str:
        if "<situation>" in messages[0]["content"]:
            return "<situation>pricing research</situation><correction>filter by date</correction><tags>a, b</tags>"
        return "The price data was outdated; filter by date next time."

    settings = Settings(max_reflections_per_episode=2)
    with LessonBank(db_url, llm=FakeLLM(default=model), settings=settings) as bank:
        episode = bank.finish_goal("g", title="Pricing", status="failed", errors=["old data"])
        assert bank.flush(timeout=10)
        reason = bank.show(episode.id)["decision"]["reason"]
        assert reason.startswith("trigger terminal: goal failed; also lesson on error (job_")
        assert sorted(j.payload["reflector"] for j in bank.jobs()) == ["insight", "lesson"]
        assert len(bank.insights(goal_id="g")) == 1 and len(bank.lessons(kind="lesson")) == 1
