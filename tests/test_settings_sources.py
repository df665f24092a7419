"""Settings read from the environment and from constructor arguments: which names set a field, which
wins, and the message a bad value gets. Pinned because the model reads ``LESSONBANK_*`` itself (not
through pydantic-settings' sources, which a new process no longer imports).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lessonbank.errors import ConfigError
from lessonbank.settings import Settings, env_variable


def test_a_variable_sets_its_field_spelled_in_capitals_and_stripped() -> None:
    settings = Settings.from_env({"LESSONBANK_NAMESPACE": " team-a ", "LESSONBANK_WORKER": "off"})
    assert settings.namespace == "team-a" and settings.worker is False
    # Lower-case spellings and variables that name no setting are not read.
    assert (
        Settings.from_env({"lessonbank_namespace": "x", "LESSONBANK_NOT_A_SETTING": "1"}).namespace
        == "default"
    )
    assert Settings.from_env({"LESSONBANK_HOME": "~/lb-home"}).home == Path("~/lb-home").expanduser()


def test_a_switch_with_its_own_variable_reads_it_first_then_its_field_name() -> None:
    assert env_variable("on_error") == "LESSONBANK_REFLEXION_ON_ERROR"
    assert Settings.from_env({"LESSONBANK_REFLEXION_ON_ERROR": "false"}).on_error is False
    assert Settings.from_env({"LESSONBANK_ON_ERROR": "false"}).on_error is False
    both = {"LESSONBANK_REFLEXION_ON_ERROR": "true", "LESSONBANK_ON_ERROR": "false"}
    assert Settings.from_env(both).on_error is True
    # A bad value is reported under the switch's own variable, whichever name carried it.
    with pytest.raises(ConfigError, match=r"^LESSONBANK_REFLEXION_ON_ERROR='maybe' is not a boolean"):
        Settings.from_env({"LESSONBANK_ON_ERROR": "maybe"})


def test_bad_values_name_the_variable_the_first_field_first() -> None:
    with pytest.raises(ConfigError, match=r"^LESSONBANK_WORKER_CONCURRENCY='many' is not a number$"):
        Settings.from_env({"LESSONBANK_WORKER_CONCURRENCY": "many", "LESSONBANK_JOB_TIMEOUT_S": "x"})
    with pytest.raises(ConfigError, match=r"namespace \(LESSONBANK_NAMESPACE\)"):
        Settings.from_env({"LESSONBANK_NAMESPACE": "a\tb"})
    # Empty means "not set" for optional values, and "false" for a switch.
    settings = Settings.from_env({"LESSONBANK_DB": " ", "LESSONBANK_HYDE": ""})
    assert settings.db is None and settings.hyde is False


def test_constructor_names_match_in_any_case_an_alias_first() -> None:
    assert Settings(WORKER=False).worker is False
    assert Settings(Namespace="team-b").namespace == "team-b"
    assert Settings(LESSONBANK_REFLEXION_ON_ERROR=False).on_error is False
    assert Settings(on_error=False, LESSONBANK_REFLEXION_ON_ERROR=True).on_error is True
    with pytest.raises(ConfigError, match=r"^unknown setting\(s\): nope$"):
        Settings(nope=1)
    with pytest.raises(ConfigError, match=r"^unknown setting\(s\): nope$"):
        Settings.from_env({}).with_overrides(nope=1)


def test_the_environment_then_overrides() -> None:
    settings = Settings.from_env(
        {"LESSONBANK_NAMESPACE": "env", "LESSONBANK_LLM": "fake"}, namespace="given", llm=None
    )
    assert settings.namespace == "given" and settings.llm == "fake"
    with pytest.raises(Exception, match="frozen"):
        settings.namespace = "other"  # type: ignore[misc]


def test_reading_settings_does_not_import_pydantic_settings() -> None:
    code = (
        "import sys; from lessonbank.settings import Settings; Settings.from_env(); "
        "print('pydantic_settings' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"
