"""The consolidation triggers and guards (real SQLite files, a clock moved by hand): threshold,
dream mode (inactivity), cron schedule, none of them fired by a cycle's own completion; the
circuit breaker and the daily caps, in the dream log and in stats; `lessonbank worker` checks them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lessonbank import BudgetExceededError, ConfigError, Episode, LessonBank, Settings
from lessonbank.models import Job
from lessonbank.proposals import DreamRun
from lessonbank.services.consolidation.triggers import Scheduler, describe
from tests.contract.conftest import Clock
from tests.test_consolidation_llm import CORE, META, SUMMARY, SURVEY

HOUR = 3_600.0
T0 = 1_799_971_200.0  # midnight UTC (so a multiple of 15 minutes too)
TWINS = [
    {"content": "Run the migrations before the deploy."},
    {"content": "run migrations before a deploy"},
]


def open_bank(tmp_path: Path, clock: Clock, **settings: object) -> LessonBank:
    values = {"consolidation_threshold": 0, "consolidation_inactivity_h": 0, **settings}
    chosen = Settings(**values)  # type: ignore[arg-type]
    return LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", clock=clock, worker=False, settings=chosen)


def record(bank: LessonBank, n: int = 1) -> None:
    """``n`` episodes recorded now by the bank's clock (an episode's time is the caller's to give)."""
    now = datetime.fromtimestamp(bank.clock(), UTC)
    for i in range(n):
        bank.record(Episode(task=f"deploy service {i}", status="success", created_at=now))


def run(bank: LessonBank, job: Job | None) -> None:
    """Run the cycle job here, as a worker would."""
    assert job is not None
    worker = bank.services.new_worker([bank.namespace], only=job.id)
    bank.services.cycles.wait(job, worker=worker)


def test_threshold_counts_episodes_since_the_last_cycle_started(tmp_path: Path) -> None:
    clock = Clock(T0)
    with open_bank(tmp_path, clock, consolidation_threshold=3, consolidation_breaker=0) as bank:
        scheduler = Scheduler(bank.services.cycles, namespaces=[bank.namespace])
        record(bank, 2)
        assert scheduler.check(bank.namespace) is None
        record(bank)
        job = scheduler.check(bank.namespace)
        assert job is not None and job.payload["trigger"] == "threshold"
        assert scheduler.check(bank.namespace) == job  # asked again while queued: the same job
        clock.advance(60)
        run(bank, job)
        clock.advance(60)
        assert scheduler.check(bank.namespace) is None  # its completion satisfies nothing
        record(bank, 3)
        again = scheduler.check(bank.namespace)
        assert again is not None and again.id != job.id
        assert [r.trigger for r in bank.dreams()] == ["threshold"]


def test_dream_mode_runs_once_per_idle_stretch(tmp_path: Path) -> None:
    clock = Clock(T0)
    with open_bank(tmp_path, clock, consolidation_inactivity_h=2, consolidation_breaker=0) as bank:
        scheduler = Scheduler(bank.services.cycles)  # every namespace of the store
        assert scheduler.tick() == []  # no episode: nothing to dream about
        record(bank)
        clock.advance(1.9 * HOUR)
        assert scheduler.tick() == []
        clock.advance(0.2 * HOUR)
        [job] = scheduler.tick()
        assert job.payload["trigger"] == "inactivity"
        run(bank, job)
        clock.advance(5 * HOUR)
        assert scheduler.tick() == []  # still idle, but it dreamt of this stretch already
        record(bank)  # a new episode, then a new idle stretch
        clock.advance(1 * HOUR)
        assert scheduler.tick() == []
        clock.advance(1 * HOUR)
        [second] = scheduler.tick()
        assert second.id != job.id and second.payload["trigger"] == "inactivity"


def test_the_schedule_fires_once_per_due_time_and_once_after_a_gap(tmp_path: Path) -> None:
    clock = Clock(T0 + 60)
    with open_bank(tmp_path, clock, consolidation_schedule="*/15 * * * *", consolidation_breaker=0) as bank:
        scheduler = Scheduler(bank.services.cycles, namespaces=[bank.namespace])
        assert scheduler.check(bank.namespace) is None  # the first look: it counts from now
        clock.advance(600)
        assert scheduler.check(bank.namespace) is None  # 00:11, the next time is 00:15
        clock.advance(300)
        job = scheduler.check(bank.namespace)
        assert job is not None and job.payload["trigger"] == "schedule"
        run(bank, job)
        clock.advance(60)
        assert scheduler.check(bank.namespace) is None
        clock.advance(5 * HOUR)  # the worker was down: many due times missed, one cycle
        late = scheduler.check(bank.namespace)
        assert late is not None and late.id != job.id
        run(bank, late)
        assert scheduler.check(bank.namespace) is None
        assert [r.trigger for r in bank.dreams()] == ["schedule", "schedule"]


def test_a_bad_cron_expression_is_a_config_error(tmp_path: Path) -> None:
    with (
        open_bank(tmp_path, Clock(T0), consolidation_schedule="every night") as bank,
        pytest.raises(ConfigError, match="not a cron expression"),
    ):
        Scheduler(bank.services.cycles)


def test_the_breaker_stops_unattended_cycles_until_a_manual_one_proposes(tmp_path: Path) -> None:
    clock = Clock(T0)
    with open_bank(tmp_path, clock, consolidation_threshold=1, consolidation_breaker=2) as bank:
        scheduler = Scheduler(bank.services.cycles, namespaces=[bank.namespace])
        for _ in range(2):  # an empty bank: each cycle proposes nothing
            record(bank)
            clock.advance(60)
            run(bank, scheduler.check(bank.namespace))
            clock.advance(60)
        assert bank.stats()["consolidation"]["breaker"] == "open"
        record(bank)
        assert scheduler.check(bank.namespace) is None
        assert bank.end_session() is None  # a session end is unattended too
        assert scheduler.check(bank.namespace) is None
        stop = [r for r in bank.dreams() if r.outcome == "skipped"]
        assert len(stop) == 1  # noted once
        assert (
            "automatic cycles stopped" in stop[0].summary
            and "lessonbank consolidate --wait" in stop[0].summary
        )
        stats = bank.stats()["consolidation"]
        assert stats["failed_or_empty_in_a_row"] == 2 and "resets" in stats["breaker_reason"]

        bank.import_lessons(TWINS)
        assert bank.consolidate() is not None  # a manual cycle that proposes: the breaker resets
        assert bank.stats()["consolidation"]["breaker"] == "closed"
        clock.advance(60)
        record(bank)
        assert scheduler.check(bank.namespace) is not None


def test_daily_caps_stop_cycles_until_the_next_utc_day(tmp_path: Path) -> None:
    clock = Clock(T0 + 10 * HOUR)
    with open_bank(tmp_path, clock, consolidation_daily_tokens=1_000, consolidation_breaker=0) as bank:
        bank.store.save_dream(  # a cycle of this morning spent the day's tokens; yesterday's do not count
            DreamRun(started_at=datetime.fromtimestamp(T0 + HOUR, UTC), tokens_in=800, tokens_out=250)
        )
        bank.store.save_dream(DreamRun(started_at=datetime.fromtimestamp(T0 - HOUR, UTC), tokens_in=5_000))
        with pytest.raises(
            BudgetExceededError, match=r"daily token cap reached: .* used 1,050 of 1,000"
        ) as caught:
            bank.consolidate()
        assert (caught.value.budget, caught.value.needed) == (1_000, 1_050)
        assert bank.end_session() is None
        assert bank.end_session() is None
        skipped = [r for r in bank.dreams() if r.outcome == "skipped"]
        assert sorted(r.trigger for r in skipped) == ["manual", "session_end"]  # unattended: once a day
        assert all("LESSONBANK_CONSOLIDATION_DAILY_TOKENS" in r.summary for r in skipped)
        assert bank.jobs() == []
        stats = bank.stats()["consolidation"]
        assert stats["tokens_today"] == 1_050 and stats["daily_cap"].startswith("daily token cap")
        clock.advance(14 * HOUR)  # a new UTC day
        assert bank.consolidate() is None


def test_the_daily_cost_cap(tmp_path: Path) -> None:
    clock = Clock(T0 + HOUR)
    with open_bank(tmp_path, clock, consolidation_daily_cost_usd=0.5) as bank:
        assert bank.consolidate() is None  # nothing spent yet: no cap reached
        bank.store.save_dream(DreamRun(started_at=datetime.fromtimestamp(T0 + HOUR, UTC), cost_usd=0.5))
        with pytest.raises(BudgetExceededError, match=r"daily cost cap reached: .* \$0.5000 of \$0.5000"):
            bank.consolidate()


def test_the_worker_checks_the_triggers_and_says_which_are_on(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'bank.db'}"
    with LessonBank(db, worker=False) as bank:
        bank.import_lessons(TWINS)
        bank.record(Episode(task="deploy the api", status="success"))
    env = {
        "LESSONBANK_CONSOLIDATION_THRESHOLD": "1",
        "LESSONBANK_CONSOLIDATION_SCHEDULE": "0 3 * * *",
        "LESSONBANK_FAKE_REPLIES": json.dumps([SURVEY, META, "NONE", CORE, SUMMARY]),
    }
    done = cli("--db", db, "--llm", "fake", "worker", "--until-idle", extra_env=env)
    said = " ".join(done.stderr.decode().split())
    assert (
        "automatic cycles: schedule '0 3 * * *' (local time), threshold 1 new episodes, inactivity 2 h"
        in said
    )
    runs = json.loads(cli("--db", db, "dreams", "--json").stdout)
    assert [(r["trigger"], r["outcome"]) for r in runs] == [("threshold", "proposed")]


def test_describe_says_off_when_no_trigger_is_on() -> None:
    off = Settings(consolidation_threshold=0, consolidation_inactivity_h=0)
    assert describe(off) == "automatic cycles: off"
