"""The consolidation cycle as a durable job (real SQLite files, the scripted FakeLLM): at most one
cycle per namespace at a time, even with concurrent requesters; a worker runs cycle and reflection
jobs by kind; a cycle that failed on a malformed reply is dead-lettered at once, a transient error is
retried; consolidate(wait=...) and end_session() through both facades."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from lessonbank import AsyncLessonBank, LessonBank
from lessonbank.errors import CycleFailedError, InputError, LLMTransientError
from lessonbank.jobs import Worker
from lessonbank.llm.fake import FakeLLM
from lessonbank.services.consolidation.cycle_queue import cycle_job_id
from lessonbank.settings import Settings
from tests.test_consolidation_llm import CORE, META, SUMMARY, SURVEY, Script, scripted, seed

TWINS = [
    {"content": "Run the migrations before the deploy."},
    {"content": "run migrations before a deploy"},
]


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'bank.db'}"


def drain(worker: Worker) -> None:
    asyncio.run(asyncio.wait_for(worker.run(until_idle=True), 30))


def test_two_concurrent_requesters_get_one_job_and_a_later_request_a_new_one(tmp_path: Path) -> None:
    # Two banks on one SQLite file (as two processes would be), asking at the same instant, many times
    # (the breaker off: these empty cycles would stop session-end cycles after three).
    settings = Settings(consolidation_breaker=0)
    with (
        LessonBank(url(tmp_path), worker=False, settings=settings) as one,
        LessonBank(url(tmp_path), worker=False, settings=settings) as two,
    ):
        for _ in range(5):
            barrier, got = threading.Barrier(2), {}

            def ask(
                bank: LessonBank, name: str, barrier: threading.Barrier = barrier, got: dict = got
            ) -> None:
                barrier.wait()
                got[name] = bank.end_session(session_id=name)

            threads = [threading.Thread(target=ask, args=(b, n)) for b, n in ((one, "one"), (two, "two"))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
            assert got["one"] is not None and got["two"] is not None
            assert got["one"].id == got["two"].id  # one cycle queued, both requesters hold it
            assert [job.id for job in one.jobs()][:1] == [got["one"].id]
            assert one.pending().get("queued") == 1
            drain(one.new_worker())  # the cycle runs and finishes: the next request is a new job
        assert len({job.id for job in one.jobs()}) == 5
        assert [run.trigger for run in one.dreams()] == ["session_end"] * 5


def test_a_request_while_a_cycle_runs_gets_the_running_job(tmp_path: Path) -> None:
    with LessonBank(url(tmp_path), worker=False) as bank:
        job = bank.end_session()
        assert job is not None
        leased = bank.store.lease_job_id(job.id, "another-host@1:w", 60)  # a worker elsewhere runs it
        assert leased is not None
        again = bank.end_session()
        assert again is not None and (again.id, again.status) == (job.id, "leased")
        assert bank.consolidate(wait=False) is None
        assert [j.id for j in bank.jobs()] == [job.id]


def test_the_worker_runs_each_kind_with_its_handler(tmp_path: Path) -> None:
    llm = Script(scripted("ep"))
    with LessonBank(url(tmp_path), llm=llm, worker=False) as bank:
        episode_id = seed(bank)  # queues a reflection job
        llm.script(*scripted(episode_id))
        cycle = bank.end_session(agent="deployer", session_id="s-1")
        assert cycle is not None and cycle.kind == "consolidate"
        assert cycle.payload == {"agent": "deployer", "session_id": "s-1", "trigger": "session_end"}
        drain(bank.new_worker())
        jobs = {job.kind: job for job in bank.jobs()}
        assert set(jobs) == {"reflect", "consolidate"} and {j.status for j in jobs.values()} == {"done"}
        [run] = bank.dreams()
        assert run.outcome == "proposed" and run.trigger == "session_end"
        assert jobs["consolidate"].detail == f"proposed: dream run {run.id}, proposal {run.proposal_id}"
        # The reflection job wrote its reflection; the cycle job wrote none.
        assert len(bank.store.reflections_for_episode(episode_id)) == 1


def test_a_worker_without_a_handler_for_a_kind_parks_its_jobs(tmp_path: Path) -> None:
    with LessonBank(url(tmp_path), worker=False) as bank:
        job = bank.end_session()
        assert job is not None

        async def reflect_only(_: object) -> object:
            raise AssertionError("no reflection job was queued")

        drain(Worker(bank.store, {"reflect": reflect_only}, bank.settings))  # type: ignore[dict-item]
        parked = bank.store.get_job(job.id)
        assert parked.status == "waiting" and "runs no consolidate jobs" in (parked.detail or "")


def test_a_malformed_reply_dead_letters_the_cycle_at_once(tmp_path: Path) -> None:
    llm = Script()
    with LessonBank(url(tmp_path), llm=llm, worker=False) as bank:
        seed(bank)
        llm.script(SURVEY, META, "Everything looks fine to me, nothing to do really.")
        with pytest.raises(CycleFailedError, match="not retried: ParseError: phase consolidate") as caught:
            bank.consolidate()
        job = bank.store.get_job(caught.value.record_id or "")
        assert (job.status, job.attempts) == ("dead", 1)
        assert job.last_error is not None and job.last_error.startswith(
            "cycle failed, not retried: ParseError"
        )
        assert bank.dreams()[0].outcome == "failed"
        # The next request is a new cycle, not the dead one.
        llm.script(*scripted("ep"))
        assert bank.consolidate() is not None
        assert bank.store.get_job(cycle_job_id(bank.namespace, 1)).status == "done"


def test_a_transient_error_is_retried_with_backoff(tmp_path: Path) -> None:
    llm = FakeLLM([LLMTransientError("429 slow down"), SURVEY, META, "NONE", CORE, SUMMARY])
    with LessonBank(url(tmp_path), llm=llm, worker=False) as bank:
        bank.import_lessons(TWINS)
        job = bank.end_session()
        assert job is not None
        drain(bank.new_worker())  # the first attempt fails; the second, after a backoff, proposes
        done = bank.store.get_job(job.id)
        assert (done.status, done.attempts) == ("done", 2)
        assert done.last_error == "LLMTransientError: 429 slow down"
        assert [run.outcome for run in bank.dreams()] == ["proposed", "failed"]


def test_consolidate_waits_runs_here_and_leaves_other_jobs_alone(tmp_path: Path) -> None:
    llm = Script()
    with LessonBank(url(tmp_path), llm=llm, worker=False) as bank:
        episode_id = seed(bank)
        [reflection_job] = bank.jobs()
        llm.script(*scripted(episode_id))
        proposal = bank.consolidate()  # no worker of its own: the cycle (only) runs in this process
        assert proposal is not None and proposal.status == "pending"
        assert bank.store.get_job(reflection_job.id).status == "queued"  # left for a worker
        assert [call for call in llm.calls if call not in llm.cycle_calls] == []
        assert bank.proposals(status="pending")[0].id == proposal.id


def test_consolidate_with_the_banks_own_worker(tmp_path: Path) -> None:
    llm = Script()
    with LessonBank(url(tmp_path), llm=llm) as bank:  # the in-process worker runs every job
        bank.import_lessons(TWINS)
        assert bank.flush()
        llm.script(SURVEY, META, "NONE", CORE, SUMMARY)
        proposal = bank.consolidate()
        assert proposal is not None and "merge" in [op.kind for op in proposal.operations]
        assert len(llm.cycle_calls) == 5
        assert bank.consolidate(wait=False) is None
        assert bank.flush()
        assert bank.jobs(status="done")[0].kind == "consolidate"


def test_dry_run_and_wait_are_checked(tmp_path: Path) -> None:
    with LessonBank(url(tmp_path), worker=False) as bank:
        bank.import_lessons(TWINS)
        assert bank.consolidate(dry_run=True) is not None
        assert bank.jobs() == [] and bank.dreams() == []  # a dry run is no job and stores nothing
        with pytest.raises(InputError, match="wait must be true or false"):
            bank.consolidate(wait="yes")  # type: ignore[arg-type]
        with pytest.raises(InputError, match="session_id must be a string"):
            bank.end_session(session_id=3)  # type: ignore[arg-type]


def test_the_async_bank_consolidates_as_a_job(tmp_path: Path) -> None:
    async def with_bank(path: Path) -> None:
        bank = AsyncLessonBank(url(path), worker=False)
        try:
            await bank.import_lessons(TWINS)
            job = await bank.end_session(agent="coder")
            assert job is not None and job.kind == "consolidate"
            proposal = await bank.consolidate()  # gets the queued session-end cycle and runs it here
            assert proposal is not None and proposal.trigger == "session_end"
            assert await bank.consolidate(wait=False) is None
            assert [j.status for j in await bank.jobs()] == ["queued", "done"]
        finally:
            await bank.close()

    asyncio.run(with_bank(tmp_path))
