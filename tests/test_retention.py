"""Retention through the bank and the CLI: the settings, the service, ``lessonbank purge``."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lessonbank import LessonBank
from lessonbank.errors import ConfigError, InputError
from lessonbank.llm import FakeLLM
from lessonbank.settings import Settings
from tests.conftest import SEED_004_REPLY

DAY = 86_400.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def at(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)


def _bank(db_url: str, clock: Clock, **settings: Any) -> LessonBank:
    return LessonBank(db_url, llm=FakeLLM([SEED_004_REPLY] * 3), clock=clock, settings=Settings(**settings))


@pytest.mark.parametrize("db", ["sqlite", "memory"])
def test_settings_drive_what_goes_and_lessons_stay(db: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bank.db'}" if db == "sqlite" else "memory://"
    clock = Clock()
    with _bank(url, clock, episode_retention_days=30, reflection_retention_days=90) as bank:
        # An episode carries its own created_at (the agent's time): stamp it with the test clock.
        bank.record(
            {"task": "refactor the large go file", "error": "rewrite lost code", "created_at": clock.at()}
        )
        assert bank.flush(timeout=10)
        [lesson] = bank.lessons()
        clock.now += 31 * DAY
        bank.record({"task": "fresh task", "error": "fresh failure", "created_at": clock.at()})
        assert bank.flush(timeout=10)
        retention = bank.services.retention

        assert retention.apply(dry_run=True) == {"episodes": 1, "reflections": 0, "jobs": 0}
        assert retention.apply() == {"episodes": 1, "reflections": 0, "jobs": 0}
        assert bank.stats()["episodes"] == 1
        assert bank.get_lesson(lesson.id).content == lesson.content  # lessons keep their text
        assert lesson.reflection_id is not None
        assert bank.store.get_reflection(lesson.reflection_id).id == lesson.reflection_id
        assert bank.jobs(status="done") != []  # done jobs: no retention set, kept

        clock.now += 60 * DAY  # the first reflection is now 91 days old
        assert retention.apply() == {"episodes": 1, "reflections": 1, "jobs": 0}
        assert bank.get_lesson(lesson.id).content == lesson.content
        assert retention.apply(older_than_days=1) == {"episodes": 0, "reflections": 1, "jobs": 2}
        assert bank.jobs() == []


def test_no_retention_by_default_keeps_everything(db_url: str) -> None:
    clock = Clock()
    with _bank(db_url, clock) as bank:
        bank.record({"task": "t", "error": "e", "created_at": clock.at()})
        assert bank.flush(timeout=10)
        clock.now += 10_000 * DAY
        assert bank.services.retention.apply() == {"episodes": 0, "reflections": 0, "jobs": 0}
        assert bank.stats()["episodes"] == 1
    defaults = Settings()
    assert (
        defaults.episode_retention_days,
        defaults.reflection_retention_days,
        defaults.done_job_retention_days,
    ) == (None, None, None)
    zero = Settings(episode_retention_days=0)  # 0 also keeps forever
    assert zero.episode_retention_days == 0


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "30"])
def test_bad_older_than_is_an_input_error(db_url: str, bad: object) -> None:
    with _bank(db_url, Clock()) as bank, pytest.raises(InputError, match="older_than_days"):
        bank.services.retention.apply(older_than_days=bad)  # type: ignore[arg-type]


def test_bad_dry_run_is_an_input_error(db_url: str) -> None:
    with _bank(db_url, Clock()) as bank, pytest.raises(InputError, match="dry_run"):
        bank.services.retention.apply(dry_run="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("environ", "match"),
    [
        ({"LESSONBANK_EPISODE_RETENTION_DAYS": "-1"}, "LESSONBANK_EPISODE_RETENTION_DAYS"),
        ({"LESSONBANK_REFLECTION_RETENTION_DAYS": "a month"}, "LESSONBANK_REFLECTION_RETENTION_DAYS"),
        ({"LESSONBANK_DONE_JOB_RETENTION_DAYS": "inf"}, "LESSONBANK_DONE_JOB_RETENTION_DAYS"),
    ],
)
def test_bad_retention_settings_are_config_errors(environ: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Settings.from_env(environ)


def test_retention_settings_come_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "LESSONBANK_EPISODE_RETENTION_DAYS": "30",
            "LESSONBANK_REFLECTION_RETENTION_DAYS": "",
            "LESSONBANK_DONE_JOB_RETENTION_DAYS": "7.5",
        }
    )
    assert settings.episode_retention_days == 30
    assert settings.reflection_retention_days is None
    assert settings.done_job_retention_days == 7.5


def test_cli_purge(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {"LESSONBANK_LLM": "fake", "LESSONBANK_FAKE_REPLIES": json.dumps([SEED_004_REPLY])}
    cli("--db", db, "record", "--task", "deploy", "--error", "boom", extra_env=env)
    cli("--db", db, "jobs", "drain", extra_env=env)

    nothing = cli("--db", db, "purge").stdout.decode()
    assert "nothing to purge: no retention is set" in nothing and "--older-than" in nothing

    # Everything is younger than a day: nothing goes, with or without --dry-run.
    dry = cli("--db", db, "purge", "--older-than", "1", "--dry-run").stdout.decode()
    assert "would purge 0 episode(s), 0 reflection(s), 0 done job(s)" in dry
    counted = json.loads(cli("--db", db, "purge", "--older-than", "0.000001", "--dry-run", "--json").stdout)
    assert counted == {"episodes": 1, "reflections": 1, "jobs": 1, "dry_run": True}
    env_retention = {**env, "LESSONBANK_DONE_JOB_RETENTION_DAYS": "0.000001"}
    done = cli("--db", db, "purge", extra_env=env_retention).stdout.decode()
    assert "purged 0 episode(s), 0 reflection(s), 1 done job(s)" in done
    rest = cli("--db", db, "purge", "--older-than", "0.000001").stdout.decode()
    assert "purged 1 episode(s), 1 reflection(s), 0 done job(s)" in rest

    bad = cli("--db", db, "purge", "--older-than", "-3", ok=False)
    assert bad.returncode == 2 and b"older_than_days must be a number of days > 0" in bad.stderr


def test_the_facades_apply_retention(tmp_path: Path) -> None:
    import asyncio

    from lessonbank import AsyncLessonBank

    clock = Clock()
    url = f"sqlite:///{tmp_path / 'bank.db'}"
    with LessonBank(url, clock=clock, worker=False) as bank:
        bank.record({"task": "old task", "status": "success", "created_at": clock.at()})
        clock.now += 10 * DAY
        assert bank.apply_retention(older_than_days=5, dry_run=True) == {
            "episodes": 1,
            "reflections": 0,
            "jobs": 0,
        }
        assert bank.apply_retention(older_than_days=5)["episodes"] == 1
        assert bank.stats()["episodes"] == 0

    async def main() -> dict[str, int]:
        async with AsyncLessonBank(url, clock=clock, worker=False) as abank:
            await abank.record({"task": "another", "status": "success", "created_at": clock.at()})
            clock.now += 10 * DAY
            return await abank.apply_retention(older_than_days=5)

    assert asyncio.run(main())["episodes"] == 1
