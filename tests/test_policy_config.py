"""The reflection policy (trigger order, env switches, dedupe keys) and Settings.from_env."""

from __future__ import annotations

from pathlib import Path

import pytest

from lessonbank.errors import ConfigError
from lessonbank.models import Episode, VerificationResult
from lessonbank.policy import decide, dedupe_key, manual_decision
from lessonbank.settings import Settings

ENV = {
    "reflexion_enabled": "LESSONBANK_REFLEXION_ENABLED",
    "on_error": "LESSONBANK_REFLEXION_ON_ERROR",
    "on_hallucination": "LESSONBANK_REFLEXION_ON_HALLUCINATION",
    "on_low_quality": "LESSONBANK_REFLEXION_ON_LOW_QUALITY",
    "persist": "LESSONBANK_REFLEXION_PERSIST",
}


def _settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings.from_env()


FAILED_CHECK = VerificationResult(tool="pytest", status="failed", exit_code=1, stderr="1 failed")


# --- defaults ------------------------------------------------------------------------------------


def test_defaults_match_the_seed() -> None:
    settings = Settings.from_env()
    assert settings.reflexion_enabled is True
    assert settings.on_error is True
    assert settings.on_hallucination is True
    assert settings.on_low_quality is False
    assert settings.persist is True


def test_error_reflects_by_default() -> None:
    decision = decide(Episode(task="t", error="timeout"), Settings.from_env())
    assert (decision.reflect, decision.trigger, decision.reflector) == (True, "error", "lesson")
    assert decision.reason == "trigger error"


def test_success_without_signal_does_not_reflect() -> None:
    decision = decide(Episode(task="t"), Settings.from_env())
    assert decision.reflect is False
    assert decision.trigger is None
    assert decision.reason.startswith("no trigger")


def test_low_quality_is_off_by_default_and_says_how_to_turn_it_on() -> None:
    decision = decide(Episode(task="t", signals=["low_quality"]), Settings.from_env())
    assert decision.reflect is False
    assert "low_quality" in decision.reason
    assert "LESSONBANK_REFLEXION_ON_LOW_QUALITY" in decision.reason


# --- trigger order ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "env", "trigger"),
    [
        ({"error": "e", "signals": ["hallucination", "low_quality"]}, {}, "error"),
        (
            {"error": "e", "signals": ["hallucination"]},
            {"LESSONBANK_REFLEXION_ON_ERROR": "false"},
            "hallucination",
        ),
        ({"status": "failure", "signals": ["hallucination"]}, {}, "hallucination"),
        (
            {"status": "failure", "signals": ["low_quality"]},
            {"LESSONBANK_REFLEXION_ON_LOW_QUALITY": "1"},
            "failure",
        ),
        ({"verification": [FAILED_CHECK], "signals": ["low_quality"]}, {}, "failure"),
        (
            {"signals": ["low_quality", "hallucination"]},
            {"LESSONBANK_REFLEXION_ON_LOW_QUALITY": "on"},
            "hallucination",
        ),
        ({"signals": ["low_quality"]}, {"LESSONBANK_REFLEXION_ON_LOW_QUALITY": "true"}, "low_quality"),
        (
            {"signals": ["hallucination", "low_quality"]},
            {"LESSONBANK_REFLEXION_ON_HALLUCINATION": "no", "LESSONBANK_REFLEXION_ON_LOW_QUALITY": "yes"},
            "low_quality",
        ),
    ],
)
def test_first_enabled_trigger_wins(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, object], env: dict[str, str], trigger: str
) -> None:
    decision = decide(Episode(task="t", **kwargs), _settings(monkeypatch, **env))  # type: ignore[arg-type]
    assert decision.reflect is True
    assert decision.trigger == trigger


def test_failed_check_on_a_success_episode_is_a_failure_trigger() -> None:
    episode = Episode(task="t", status="success", verification=[FAILED_CHECK])
    assert decide(episode, Settings.from_env()).trigger == "failure"


def test_passed_and_skipped_checks_do_not_trigger() -> None:
    checks = [VerificationResult(tool="a", status="passed"), VerificationResult(tool="b", status="skipped")]
    assert decide(Episode(task="t", verification=checks), Settings.from_env()).reflect is False


# --- each env switch ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["false", "0", "no", "off", "FALSE", " False "])
def test_master_switch_disables_everything(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    settings = _settings(monkeypatch, LESSONBANK_REFLEXION_ENABLED=value)
    assert settings.reflexion_enabled is False
    episode = Episode(task="t", error="e", signals=["hallucination", "low_quality"])
    decision = decide(episode, settings)
    assert decision.reflect is False
    assert "LESSONBANK_REFLEXION_ENABLED" in decision.reason


def test_on_error_off_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    decision = decide(
        Episode(task="t", error="e"), _settings(monkeypatch, LESSONBANK_REFLEXION_ON_ERROR="false")
    )
    assert decision.reflect is False
    assert decision.reason.startswith("trigger disabled")
    assert "error (off: LESSONBANK_REFLEXION_ON_ERROR)" in decision.reason


def test_on_error_off_also_silences_failed_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    episode = Episode(task="t", verification=[FAILED_CHECK])
    decision = decide(episode, _settings(monkeypatch, LESSONBANK_REFLEXION_ON_ERROR="0"))
    assert decision.reflect is False
    assert "failure (off: LESSONBANK_REFLEXION_ON_ERROR)" in decision.reason


def test_on_hallucination_off_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(monkeypatch, LESSONBANK_REFLEXION_ON_HALLUCINATION="off")
    decision = decide(Episode(task="t", signals=["hallucination"]), settings)
    assert decision.reflect is False
    assert "LESSONBANK_REFLEXION_ON_HALLUCINATION" in decision.reason


@pytest.mark.parametrize(("field", "variable"), list(ENV.items()))
@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("1", True), ("Yes", True), ("false", False)])
def test_each_boolean_env_var_is_read(
    monkeypatch: pytest.MonkeyPatch, field: str, variable: str, raw: str, expected: bool
) -> None:
    assert getattr(_settings(monkeypatch, **{variable: raw}), field) is expected


def test_persist_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _settings(monkeypatch, LESSONBANK_REFLEXION_PERSIST="false").persist is False


@pytest.mark.parametrize("variable", [*ENV.values(), "LESSONBANK_WORKER"])
@pytest.mark.parametrize("raw", ["maybe", "2", "tru", "enabled"])
def test_bad_boolean_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, raw: str
) -> None:
    monkeypatch.setenv(variable, raw)
    with pytest.raises(ConfigError, match=variable) as info:
        Settings.from_env()
    assert "not a boolean" in str(info.value)


def test_bad_number_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LESSONBANK_WORKER_CONCURRENCY", "four")
    with pytest.raises(ConfigError, match="LESSONBANK_WORKER_CONCURRENCY"):
        Settings.from_env()


def test_numbers_and_paths_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = _settings(
        monkeypatch,
        LESSONBANK_WORKER_CONCURRENCY=" 8 ",
        LESSONBANK_JOB_TIMEOUT_S="2.5",
        LESSONBANK_HOME=str(tmp_path / "h"),
    )
    assert settings.worker_concurrency == 8
    assert settings.job_timeout_s == 2.5
    assert settings.lease_seconds == 32.5
    assert settings.db_url == f"sqlite:///{tmp_path / 'h' / 'lessons.db'}"


def test_explicit_environ_mapping_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LESSONBANK_REFLEXION_ON_ERROR", "false")
    settings = Settings.from_env({"LESSONBANK_REFLEXION_ON_LOW_QUALITY": "true"})
    assert settings.on_error is True  # the process environment was not consulted
    assert settings.on_low_quality is True
    assert Settings.from_env(on_error=True).on_error is True
    assert Settings.from_env(on_error=None).on_error is False  # None overrides are ignored


def test_unknown_override_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="on_eror"):
        Settings.from_env(on_eror=False)


# --- manual and dedupe ---------------------------------------------------------------------------------


def test_manual_decision_always_reflects() -> None:
    decision = manual_decision()
    assert (decision.reflect, decision.trigger, decision.reflector) == (True, "manual", "lesson")


def test_dedupe_key_ignores_case_and_whitespace() -> None:
    a = Episode(task="Refactor  pkg/engine", attempt="full rewrite\nof file", error="Timeout after 120s")
    b = Episode(task="refactor pkg/engine ", attempt="FULL REWRITE of   file", error="timeout\tafter 120s")
    assert dedupe_key(a, "error") == dedupe_key(b, "error")
    assert len(dedupe_key(a, "error")) == 64


def test_dedupe_key_is_stable_across_instances() -> None:
    first, second = (Episode(task="t", error="e", output="o") for _ in range(2))
    assert first.id != second.id
    assert dedupe_key(first, "error") == dedupe_key(second, "error")


@pytest.mark.parametrize(
    ("changed", "trigger"),
    [
        ({"error": "connection refused"}, "error"),
        ({"task": "refactor pkg/auth"}, "error"),
        ({"attempt": "patched the file"}, "error"),
        ({"output": "partial diff"}, "error"),
        ({}, "hallucination"),
    ],
)
def test_dedupe_key_differs_when_something_meaningful_differs(changed: dict[str, str], trigger: str) -> None:
    base = {"task": "refactor pkg/engine", "attempt": "full rewrite", "error": "timeout after 120s"}
    assert dedupe_key(Episode(**base), "error") != dedupe_key(Episode(**{**base, **changed}), trigger)


def test_the_constructor_ignores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LESSONBANK_REFLEXION_ON_ERROR", "false")
    monkeypatch.setenv("lessonbank_namespace", "lowercase names are not read")
    assert Settings().on_error is True
    assert Settings.from_env().on_error is False
    assert Settings.from_env().namespace == "default"


def test_blank_optional_values_are_unset_and_blank_switches_are_off() -> None:
    settings = Settings.from_env({"LESSONBANK_LEASE_S": " ", "LESSONBANK_DB": "", "LESSONBANK_HYDE": ""})
    assert (settings.lease_s, settings.db, settings.hyde) == (None, None, False)


def test_with_overrides_revalidates_and_expands_home() -> None:
    assert Settings().with_overrides(home="~/elsewhere").home == Path("~/elsewhere").expanduser()
    with pytest.raises(ConfigError, match="LESSONBANK_DEDUP_COSINE"):
        Settings().with_overrides(dedup_cosine=0.0)
    with pytest.raises(ConfigError, match="LESSONBANK_WORKER_CONCURRENCY"):
        Settings(worker_concurrency="four")
