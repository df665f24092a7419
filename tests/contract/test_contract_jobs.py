"""Store contract: the durable job queue behaves alike on every backend."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from lessonbank.errors import LeaseLostError, NotFoundError
from lessonbank.models import Job
from lessonbank.stores import Store
from tests.contract.conftest import Clock
from tests.contract.test_contract_lessons import at

NS = "default"
A, B = "host-a@1:a", "host-b@2:b"


def job(clock: Clock, key: str = "k", namespace: str = NS, **fields: object) -> Job:
    fields.setdefault("created_at", at(clock.now))
    fields.setdefault("updated_at", at(clock.now))
    fields.setdefault("run_after", at(clock.now))
    return Job(namespace=namespace, dedupe_key=key, episode_id=f"ep_{key}", **fields)  # type: ignore[arg-type]


def test_enqueue_lease_finish(store: Store, clock: Clock) -> None:
    made = job(clock)
    store.enqueue_job(made)
    assert store.count_jobs(None) == {"queued": 1}
    assert store.next_run_after([NS]) == pytest.approx(clock.now)
    leased = store.lease_job(A, None, 60)
    assert leased is not None and leased.id == made.id and leased.status == "leased"
    assert leased.attempts == 1 and leased.lease_owner == A
    assert leased.lease_expires_at is not None and leased.lease_expires_at.timestamp() == pytest.approx(
        clock.now + 60
    )
    assert store.lease_job(B, None, 60) is None  # one lease at a time
    assert store.get_job(made.id).status == "leased"
    store.finish_job(made.id, A, reflection=None, lessons=[], detail="all good")
    done = store.get_job(made.id)
    assert done.status == "done" and done.detail == "all good" and done.lease_owner is None
    assert done.finished_at is not None
    assert store.lease_job(A, None, 60) is None
    assert store.count_jobs([NS]) == {"done": 1}
    assert store.next_run_after(None) is None
    with pytest.raises(LeaseLostError):
        store.finish_job(made.id, A, reflection=None, lessons=[], detail="twice")
    with pytest.raises(NotFoundError):
        store.get_job("job_missing")


def test_namespaces_scope_leases_and_counts(store: Store, clock: Clock) -> None:
    store.enqueue_job(job(clock, "a", namespace="team-a"))
    store.enqueue_job(job(clock, "b", namespace="team-b"))
    assert store.lease_job(A, ["team-c"], 60) is None
    taken = store.lease_job(A, ["team-b"], 60)
    assert taken is not None and taken.namespace == "team-b"
    assert store.count_jobs(["team-a"]) == {"queued": 1}
    assert store.count_jobs(None) == {"queued": 1, "leased": 1}
    other = store.lease_job(B, None, 60)
    assert other is not None and other.namespace == "team-a"
    assert {j.namespace for j in store.list_jobs(None)} == {"team-a", "team-b"}


def test_expired_lease_is_taken_over_and_the_stale_worker_cannot_write(store: Store, clock: Clock) -> None:
    store.enqueue_job(job(clock))
    first = store.lease_job(A, None, 60)
    assert first is not None and store.lease_job(B, None, 60) is None
    assert store.next_run_after(None) == pytest.approx(clock.now + 60)
    clock.advance(61)
    second = store.lease_job(B, None, 60)
    assert second is not None and second.id == first.id and second.attempts == 2 and second.lease_owner == B
    for stale in (
        lambda: store.finish_job(first.id, A, reflection=None, lessons=[], detail="late"),
        lambda: store.fail_job(first.id, A, error="late", retry_at=None),
        lambda: store.release_job(first.id, A),
        lambda: store.park_job(first.id, A, detail="late"),
    ):
        with pytest.raises(LeaseLostError):
            stale()
    store.finish_job(first.id, B, reflection=None, lessons=[], detail="ok")
    assert store.get_job(first.id).status == "done"


def test_lease_lost_on_the_last_attempt_dead_letters(store: Store, clock: Clock) -> None:
    store.enqueue_job(job(clock, max_attempts=1))
    assert store.lease_job(A, None, 10) is not None
    clock.advance(11)
    assert store.lease_job(B, None, 10) is None
    dead = store.get_job(store.list_jobs(NS)[0].id)
    assert dead.status == "dead" and "lost the job on its last attempt" in (dead.last_error or "")


def test_lease_of_a_dead_local_process_is_expired_at_once(store: Store, clock: Clock) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    store.enqueue_job(job(clock))
    assert store.lease_job(f"{socket.gethostname()}@{proc.pid}:dead", None, 3600) is not None
    taken = store.lease_job(B, None, 60)
    assert taken is not None and taken.lease_owner == B and taken.attempts == 2


def test_fail_retries_with_backoff_then_dead_letters(store: Store, clock: Clock) -> None:
    made = job(clock, max_attempts=2)
    store.enqueue_job(made)
    leased = store.lease_job(A, None, 60)
    assert leased is not None
    failed = store.fail_job(made.id, A, error="503", retry_at=clock.now + 30)
    assert failed.status == "queued" and failed.last_error == "503" and failed.lease_owner is None
    assert failed.run_after.timestamp() == pytest.approx(clock.now + 30)
    assert store.lease_job(A, None, 60) is None  # not due yet
    assert store.next_run_after(None) == pytest.approx(clock.now + 30)
    clock.advance(31)
    again = store.lease_job(B, None, 60)
    assert again is not None and again.attempts == 2 and again.last_error == "503"
    dead = store.fail_job(made.id, B, error="still 503", retry_at=None)
    assert dead.status == "dead" and dead.last_error == "still 503" and dead.finished_at is not None
    assert store.lease_job(A, None, 60) is None
    assert store.list_jobs(NS, ["dead"])[0].id == made.id

    assert store.retry_jobs(NS) == 1
    requeued = store.get_job(made.id)
    assert requeued.status == "queued" and requeued.attempts == 0 and requeued.detail == "requeued by retry"
    assert store.lease_job(A, None, 60) is not None


def test_release_park_and_release_waiting(store: Store, clock: Clock) -> None:
    made = job(clock)
    store.enqueue_job(made)
    assert store.lease_job(A, None, 60) is not None
    store.release_job(made.id, A)
    back = store.get_job(made.id)
    assert back.status == "queued" and back.attempts == 0
    assert store.lease_job(B, None, 60) is not None
    store.park_job(made.id, B, detail="waiting: no LLM")
    parked = store.get_job(made.id)
    assert parked.status == "waiting" and parked.detail == "waiting: no LLM" and parked.attempts == 0
    assert store.lease_job(A, None, 60) is None
    assert store.count_jobs(None) == {"waiting": 1}
    assert store.release_waiting(["other"]) == 0
    assert store.release_waiting(None) == 1
    assert store.get_job(made.id).status == "queued"
    taken = store.lease_job(A, None, 60)
    assert taken is not None and taken.id == made.id and taken.attempts == 1


def test_list_retry_and_purge(store: Store, clock: Clock) -> None:
    made = []
    for n in range(4):
        clock.advance(1)
        made.append(job(clock, f"k{n}", max_attempts=1))
        store.enqueue_job(made[-1])
    for n in range(2):
        leased = store.lease_job(A, None, 60)
        assert leased is not None
        store.fail_job(leased.id, A, error=f"boom {n}", retry_at=None)
    assert [j.id for j in store.list_jobs(NS)] == [j.id for j in reversed(made)]
    assert len(store.list_jobs(NS, limit=2)) == 2
    dead = store.list_jobs(NS, ["dead"])
    assert len(dead) == 2 and {j.status for j in dead} == {"dead"}
    assert store.retry_jobs(NS, [dead[0].id]) == 1
    assert store.retry_jobs(NS, ["job_missing"]) == 0
    assert store.count_jobs([NS]) == {"queued": 3, "dead": 1}
    assert store.purge_jobs(NS, ["dead"]) == 1
    assert store.purge_jobs("other", ["queued"]) == 0
    assert store.count_jobs([NS]) == {"queued": 3}
    # A purged job frees its dedupe key and is never leased.
    assert store.purge_jobs(NS, ["queued"]) == 3
    assert store.lease_job(A, None, 60) is None
    store.enqueue_job(job(clock, "k0"))
    assert store.lease_job(A, None, 60) is not None


def test_concurrent_workers_never_lease_the_same_job(
    store_url: str, open_url: Callable[[str], Store], clock: Clock
) -> None:
    first = open_url(store_url)
    for n in range(30):
        first.enqueue_job(job(clock, f"k{n}"))
    taken: list[str] = []
    lock = threading.Lock()

    def drain(owner: str) -> None:
        own = open_url(store_url)
        while (leased := own.lease_job(owner, None, 60)) is not None:
            own.finish_job(leased.id, owner, reflection=None, lessons=[], detail="ok")
            with lock:
                taken.append(leased.id)

    threads = [threading.Thread(target=drain, args=(f"host@{n}:w",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(taken) == 30 and len(set(taken)) == 30
    assert first.count_jobs(None) == {"done": 30}
