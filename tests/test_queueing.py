"""The job state transitions decided once (queueing), and the SQL queue's statements agreeing with them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lessonbank import queueing
from lessonbank.models import Job
from lessonbank.stores import open_store
from lessonbank.stores.sql.queue import JOB_COLUMNS, assignments

NOW = 1_700_000_000.0
OWNER = "host@1:w"


def at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def job(**fields: object) -> Job:
    fields.setdefault("created_at", at(NOW - 100))
    fields.setdefault("updated_at", at(NOW - 100))
    fields.setdefault("run_after", at(NOW - 100))
    return Job(dedupe_key="k", episode_id="ep_k", **fields)  # type: ignore[arg-type]


def leased_job(**fields: object) -> Job:
    return queueing.leased(job(**fields), OWNER, NOW - 50, 30)


# ----------------------------------------------------------------- what is runnable


def test_a_queued_job_is_runnable_once_due_within_the_slack() -> None:
    assert queueing.runnable(job(run_after=at(NOW)), NOW)
    assert queueing.runnable(job(run_after=at(NOW + queueing.DUE_SLACK_S / 2)), NOW)
    assert not queueing.runnable(job(run_after=at(NOW + 1)), NOW)


def test_a_leased_job_is_runnable_only_once_its_lease_expired() -> None:
    held = queueing.leased(job(), OWNER, NOW, 30)
    assert not queueing.runnable(held, NOW + 29)
    assert queueing.lease_expired(held, NOW + 30) and queueing.runnable(held, NOW + 30)
    assert not queueing.lease_expired(job(), NOW)  # queued: no lease to expire


@pytest.mark.parametrize("status", ["waiting", "done", "dead"])
def test_other_statuses_are_never_runnable(status: str) -> None:
    assert not queueing.runnable(job(status=status), NOW + 10_000)


# ----------------------------------------------------------------- leasing


def test_take_leases_and_spends_an_attempt() -> None:
    taken = queueing.take(job(attempts=1, detail="requeued by retry"), OWNER, NOW, 30)
    assert taken.action == "leased"
    got = taken.job
    assert got.status == "leased" and got.lease_owner == OWNER and got.attempts == 2
    assert got.lease_expires_at == at(NOW + 30) and got.updated_at == at(NOW)
    assert got.detail is None and got.finished_at is None


def test_take_on_the_last_attempt_leases_and_past_it_dead_letters() -> None:
    last = queueing.take(job(attempts=2, max_attempts=3), OWNER, NOW, 30)
    assert last.action == "leased" and last.job.attempts == 3
    lost = queueing.take(job(attempts=3, max_attempts=3, status="leased", last_error="503"), OWNER, NOW, 30)
    assert lost.action == "dead"
    dead = lost.job
    assert dead.status == "dead" and dead.attempts == 4
    assert dead.last_error == queueing.lost_error("503")
    assert "lost the job on its last attempt" in dead.last_error and "503" in dead.last_error
    assert dead.lease_owner is None and dead.lease_expires_at is None
    assert dead.finished_at == at(NOW) and dead.updated_at == at(NOW)


def test_a_job_with_no_attempt_budget_is_dead_lettered_at_once() -> None:
    assert queueing.take(job(max_attempts=0), OWNER, NOW, 30).action == "dead"


def test_an_expiring_lease_is_due_at_once() -> None:
    held = queueing.leased(job(), OWNER, NOW, 3600)
    expired = queueing.apply(held, queueing.expiring())
    assert expired.lease_expires_at == at(queueing.EXPIRED_AT) and queueing.lease_expired(expired, NOW)
    assert expired.lease_owner == OWNER and expired.status == "leased"


# ----------------------------------------------------------------- moving a leased job on


def test_done_clears_the_lease_and_keeps_the_detail() -> None:
    got = queueing.done(leased_job(), NOW, "all good")
    assert got.status == "done" and got.detail == "all good"
    assert got.finished_at == at(NOW) and got.updated_at == at(NOW)
    assert got.lease_owner is None and got.lease_expires_at is None


def test_fail_with_a_retry_time_queues_the_job_again() -> None:
    got = queueing.failed(leased_job(), NOW, "503", NOW + 30)
    assert got.status == "queued" and got.last_error == "503" and got.run_after == at(NOW + 30)
    assert got.lease_owner is None and got.lease_expires_at is None and got.finished_at is None
    assert got.attempts == 1  # the attempt stays spent


def test_fail_without_a_retry_time_dead_letters() -> None:
    got = queueing.failed(leased_job(), NOW, "still 503", None)
    assert got.status == "dead" and got.last_error == "still 503" and got.finished_at == at(NOW)
    assert got.lease_owner is None and got.lease_expires_at is None
    assert got.run_after == at(NOW - 100)


def test_release_refunds_the_attempt_and_keeps_the_detail() -> None:
    held = leased_job().model_copy(update={"detail": "kept"})
    got = queueing.released(held, NOW)
    assert got.status == "queued" and got.attempts == 0 and got.detail == "kept"
    assert got.lease_owner is None and got.lease_expires_at is None and got.updated_at == at(NOW)


def test_park_sets_the_job_aside_with_its_detail() -> None:
    got = queueing.parked(leased_job(attempts=2), NOW, "waiting: no LLM")
    assert got.status == "waiting" and got.detail == "waiting: no LLM" and got.attempts == 2


def test_give_back_never_takes_attempts_below_zero() -> None:
    assert queueing.released(job(status="leased", attempts=0), NOW).attempts == 0


# ----------------------------------------------------------------- waiting and admin retry


def test_release_waiting_queues_the_job_and_clears_its_detail() -> None:
    got = queueing.unparked(job(status="waiting", detail="waiting: no LLM", attempts=2), NOW)
    assert got.status == "queued" and got.detail is None and got.updated_at == at(NOW)
    assert got.attempts == 2 and got.run_after == at(NOW - 100)


@pytest.mark.parametrize(("status", "retryable"), [("dead", True), ("waiting", True), ("queued", False)])
def test_only_dead_and_waiting_jobs_are_retried(status: str, retryable: bool) -> None:
    assert queueing.can_retry(job(status=status)) is retryable


def test_retry_gives_a_fresh_budget_due_now() -> None:
    dead = queueing.failed(leased_job(attempts=4), NOW - 10, "boom", None)
    got = queueing.retried(dead, NOW)
    assert got.status == "queued" and got.attempts == 0 and got.detail == queueing.RETRY_DETAIL
    assert got.run_after == at(NOW) and got.updated_at == at(NOW) and got.finished_at is None
    assert got.last_error == "boom"


# ----------------------------------------------------------------- the SQL form


CHANGES: dict[str, Callable[[], queueing.Changes]] = {
    "leasing": lambda: queueing.leasing(OWNER, NOW, 30),
    "burying": lambda: queueing.burying(job(), NOW),
    "expiring": queueing.expiring,
    "finishing": lambda: queueing.finishing(NOW, "ok"),
    "failing": lambda: queueing.failing(NOW, "503", NOW + 5),
    "failing dead": lambda: queueing.failing(NOW, "503", None),
    "giving back": lambda: queueing.giving_back(NOW, "waiting", "why"),
    "unparking": lambda: queueing.unparking(NOW),
    "retrying": lambda: queueing.retrying(NOW),
}


@pytest.mark.parametrize("name", list(CHANGES))
def test_every_change_is_a_job_column(name: str) -> None:
    changes = CHANGES[name]()
    assert set(changes) <= set(JOB_COLUMNS)
    clause, values = assignments(changes)
    assert clause.count("?") == len(values) == len(changes)


def test_assignments_refuse_what_is_not_a_column() -> None:
    with pytest.raises(ValueError, match="not job columns"):
        assignments({"status": "queued", "nope": 1})


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def test_the_sql_queue_makes_the_jobs_the_rules_make(tmp_path: Path) -> None:
    """Every transition, through SQLite's statements, leaves the job the pure rules describe."""
    clock = Clock()
    store = open_store(f"sqlite:///{tmp_path / 'bank.db'}", clock=clock)
    try:
        made = job(max_attempts=2, created_at=at(NOW), updated_at=at(NOW), run_after=at(NOW))
        store.enqueue_job(made)
        expected = made

        def same() -> None:
            assert store.get_job(made.id).model_dump() == expected.model_dump()

        same()
        assert store.lease_job(OWNER, None, 30) is not None
        expected = queueing.take(expected, OWNER, clock.now, 30).job
        same()
        clock.now += 1
        store.park_job(made.id, OWNER, detail="waiting: no LLM")
        expected = queueing.parked(expected, clock.now, "waiting: no LLM")
        same()
        clock.now += 1
        assert store.release_waiting(None) == 1
        expected = queueing.unparked(expected, clock.now)
        same()
        store.lease_job(OWNER, None, 30)
        expected = queueing.take(expected, OWNER, clock.now, 30).job
        clock.now += 1
        store.release_job(made.id, OWNER)
        expected = queueing.released(expected, clock.now)
        same()
        store.lease_job(OWNER, None, 30)
        expected = queueing.take(expected, OWNER, clock.now, 30).job
        clock.now += 1
        store.fail_job(made.id, OWNER, error="503", retry_at=clock.now)
        expected = queueing.failed(expected, clock.now, "503", clock.now)
        same()
        store.lease_job(OWNER, None, 30)  # the last attempt, whose lease is then lost
        expected = queueing.take(expected, OWNER, clock.now, 30).job
        same()
        clock.now += 31
        assert store.lease_job(OWNER, None, 30) is None
        taken = queueing.take(expected, OWNER, clock.now, 30)
        assert taken.action == "dead"
        expected = taken.job
        same()
        clock.now += 1
        assert store.retry_jobs(made.namespace) == 1
        expected = queueing.retried(expected, clock.now)
        same()
        store.lease_job(OWNER, None, 30)
        expected = queueing.take(expected, OWNER, clock.now, 30).job
        clock.now += 1
        store.finish_job(made.id, OWNER, reflection=None, lessons=[], detail="all good")
        expected = queueing.done(expected, clock.now, "all good")
        same()
    finally:
        store.close()
