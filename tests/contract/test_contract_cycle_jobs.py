"""Store contract for the consolidation cycle's jobs, on every backend: a job leased by its id
(and no other), the job kind kept, the namespaces a worker serving them all finds, and at most one
cycle job per namespace asked for at a time."""

from __future__ import annotations

from lessonbank import LessonBank
from lessonbank.models import Episode
from lessonbank.stores import Store
from tests.contract.conftest import Clock
from tests.contract.test_contract_jobs import A, B, job
from tests.contract.test_contract_lessons import at


def test_a_job_is_leased_by_its_id_and_no_other(store: Store, clock: Clock) -> None:
    first, cycle = job(clock, "first"), job(clock, "cycle", kind="consolidate")
    store.enqueue_job(first)
    store.enqueue_job(cycle)
    leased = store.lease_job_id(cycle.id, A, 60)
    assert leased is not None and (leased.id, leased.kind, leased.attempts) == (cycle.id, "consolidate", 1)
    assert store.lease_job_id(cycle.id, B, 60) is None  # held by A
    assert store.get_job(first.id).status == "queued"  # the other job was not touched
    store.finish_job(cycle.id, A, reflection=None, lessons=[], detail="empty: dream run cyc_1")
    assert store.get_job(cycle.id).kind == "consolidate"
    assert store.lease_job_id(cycle.id, A, 60) is None  # done
    # The queue still hands out the other job, once (a stream entry left by the lease by id is dropped).
    taken = store.lease_job(B, None, 60)
    assert taken is not None and taken.id == first.id
    assert store.lease_job(B, None, 60) is None
    assert store.lease_job_id("job_nowhere", A, 60) is None


def test_a_job_leased_by_its_id_waits_for_its_time_and_takes_over_an_expired_lease(
    store: Store, clock: Clock
) -> None:
    later = job(clock, "later", kind="consolidate", run_after=at(clock.now + 30))
    store.enqueue_job(later)
    assert store.lease_job_id(later.id, A, 60) is None  # not due yet
    clock.advance(31)
    assert store.lease_job_id(later.id, A, 10) is not None
    clock.advance(11)  # A's lease expired: B takes over
    taken = store.lease_job_id(later.id, B, 60)
    assert taken is not None and taken.lease_owner == B and taken.attempts == 2


def test_namespaces_are_those_holding_episodes_lessons_or_jobs(
    store_url: str, store: Store, clock: Clock
) -> None:
    assert store.namespaces() == []
    with LessonBank(store_url, clock=clock, worker=False, namespace="lessons-only") as bank:
        bank.add_lesson("run the migrations before the deploy")
    with LessonBank(store_url, clock=clock, worker=False, namespace="episodes-only") as bank:
        bank.record(Episode(task="deploy the api", status="success"))
    store.enqueue_job(job(clock, "j", namespace="jobs-only"))
    assert store.namespaces() == ["episodes-only", "jobs-only", "lessons-only"]


def test_one_cycle_job_per_namespace_at_a_time(store_url: str, clock: Clock) -> None:
    with LessonBank(store_url, clock=clock, worker=False) as bank:
        first = bank.end_session(agent="coder")
        again = bank.end_session(agent="reviewer")
        assert first is not None and again is not None and again.id == first.id
        assert bank.consolidate(wait=False) is None
        assert [j.id for j in bank.jobs()] == [first.id]  # the manual request got the queued one
        assert bank.consolidate() is None  # waits for that job, run here: nothing to propose
        done = bank.store.get_job(first.id)
        assert (
            done.status == "done" and done.detail is not None and done.detail.startswith("empty: dream run")
        )
        after = bank.end_session()
        assert after is not None and after.id != first.id and after.status == "queued"
        assert after.payload == {"trigger": "session_end"}
