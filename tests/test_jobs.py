"""Durable jobs: retries with backoff, dead letters, dedupe, waiting for an LLM, leases."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from lessonbank import Episode, LessonBank, LLMError, LLMTransientError, Settings
from lessonbank.errors import LeaseLostError
from lessonbank.jobs import NO_LLM_DETAIL, backoff_delay
from lessonbank.llm import FakeLLM
from lessonbank.models import Job
from lessonbank.stores.sqlite import SQLiteStore
from tests.conftest import SEED_004_REPLY

FAST = Settings.from_env(backoff_base_s=0.01, backoff_max_s=0.05, poll_interval_s=0.05)


def failing(task: str = "deploy the billing service", error: str = "helm upgrade timed out") -> Episode:
    return Episode(task=task, status="failure", error=error, agent="ops")


def test_backoff_doubles_from_one_second_to_five_minutes_with_jitter() -> None:
    settings = Settings()
    rng = random.Random(7)
    delays = [backoff_delay(attempt, settings, rng) for attempt in range(1, 12)]
    for attempt, delay in enumerate(delays, 1):
        nominal = min(300.0, 2.0 ** (attempt - 1))
        assert nominal * 0.8 <= delay <= nominal * 1.2
    assert max(delays) <= 360.0


def test_transient_failures_are_retried_then_succeed(db_url: str) -> None:
    llm = FakeLLM([LLMTransientError("429 rate limited"), LLMTransientError("503"), SEED_004_REPLY])
    with LessonBank(db_url, llm=llm, settings=FAST) as bank:
        bank.record(failing())
        assert bank.flush(timeout=10)
        (job,) = bank.jobs()
        assert job.status == "done" and job.attempts == 3
        assert len(bank.lessons()) == 1


def test_job_is_dead_lettered_after_max_attempts_and_retry_requeues(db_url: str) -> None:
    llm = FakeLLM([LLMTransientError(f"503 #{n}") for n in range(5)])
    with LessonBank(db_url, llm=llm, settings=FAST) as bank:
        episode = bank.record(failing())
        assert bank.flush(timeout=10)
        (dead,) = bank.jobs(status="dead")
        assert dead.attempts == 5 and dead.episode_id == episode.id
        assert "503 #4" in (dead.last_error or "")
        assert bank.lessons() == []

        llm._replies.append(SEED_004_REPLY)
        assert bank.retry_jobs() == 1
        assert bank.flush(timeout=10)
        assert bank.jobs()[0].status == "done"
        assert len(bank.lessons()) == 1


def test_permanent_llm_error_dead_letters_at_once(db_url: str) -> None:
    llm = FakeLLM([LLMError("401: check the API key")])
    with LessonBank(db_url, llm=llm, settings=FAST) as bank:
        bank.record(failing())
        assert bank.flush(timeout=10)
        (dead,) = bank.jobs(status="dead")
        assert dead.attempts == 1 and "API key" in (dead.last_error or "")


def test_per_job_timeout_counts_as_a_failed_attempt(db_url: str) -> None:
    settings = FAST.with_overrides(job_timeout_s=0.2, job_max_attempts=1)
    with LessonBank(db_url, llm=FakeLLM([SEED_004_REPLY], delay_s=5), settings=settings) as bank:
        bank.record(failing())
        assert bank.flush(timeout=10)
        (dead,) = bank.jobs(status="dead")
        assert "timed out after 0.2s" in (dead.last_error or "")


def test_identical_episodes_are_reflected_once(bank: LessonBank, fake_llm: FakeLLM) -> None:
    first = bank.record(failing())
    second = bank.record(failing(task="  Deploy the BILLING service "))  # same after case/space folding
    # Another agent: a second distinct failure of "ops" would be a failure streak (dual reflection).
    third = bank.record(failing(error="helm upgrade: image pull backoff").model_copy(update={"agent": "ci"}))
    fake_llm._replies.append(SEED_004_REPLY.replace("Go files", "Helm charts"))
    assert bank.flush(timeout=10)
    assert len(bank.jobs()) == 2
    assert bank.show(second.id)["decision"]["reason"].startswith("duplicate")
    assert bank.show(first.id)["decision"]["reflect"] and bank.show(third.id)["decision"]["reflect"]
    assert len(fake_llm.calls) == 2


def test_without_llm_jobs_wait_visibly_and_run_once_one_is_configured(db_url: str) -> None:
    with LessonBank(db_url) as bank:
        episode = bank.record(failing())
        assert bank.flush(timeout=1) is False
        (job,) = bank.jobs()
        assert job.status == "waiting" and job.detail == NO_LLM_DETAIL
    llm = FakeLLM([SEED_004_REPLY])
    with LessonBank(db_url, llm=llm) as bank:
        assert bank.flush(timeout=10)
        assert bank.jobs()[0].status == "done"
        (reflection,) = bank.show(episode.id)["reflections"]
        assert reflection["status"] == "ok" and reflection["tokens_in"] > 0


def test_env_llm_is_used_when_no_argument_given(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LESSONBANK_LLM", "fake")
    monkeypatch.setenv(
        "LESSONBANK_FAKE_REPLIES", f"[{SEED_004_REPLY!r}]".replace("'", '"').replace("\n", "\\n")
    )
    with LessonBank(db_url) as bank:
        bank.record(failing())
        assert bank.flush(timeout=10)
        assert len(bank.lessons()) == 1


def test_expired_lease_is_taken_over_and_the_stale_worker_cannot_write(tmp_path: Path) -> None:
    now = [time.time() + 1]
    store = SQLiteStore(tmp_path / "jobs.db", clock=lambda: now[0])
    store.enqueue_job(Job(namespace="default", dedupe_key="k", episode_id="ep_x"))
    first = store.lease_job("host@1:a", None, lease_s=60)
    assert first is not None and store.lease_job("host@2:b", None, lease_s=60) is None
    now[0] += 61
    second = store.lease_job("host@2:b", None, lease_s=60)
    assert second is not None and second.id == first.id and second.attempts == 2
    with pytest.raises(LeaseLostError):
        store.finish_job(first.id, "host@1:a", reflection=None, lessons=[], detail="late")
    store.finish_job(first.id, "host@2:b", reflection=None, lessons=[], detail="ok")
    assert store.get_job(first.id).status == "done"
    store.close()


def test_lease_of_a_dead_local_process_is_expired_at_once(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # its pid is gone now
    store = SQLiteStore(tmp_path / "jobs.db")
    store.enqueue_job(Job(namespace="default", dedupe_key="k", episode_id="ep_x"))
    assert store.lease_job(f"{socket.gethostname()}@{proc.pid}:dead", None, lease_s=3600) is not None
    taken = store.lease_job("other@1:live", None, lease_s=60)
    assert taken is not None and taken.lease_owner == "other@1:live"
    store.close()


def test_closing_the_bank_mid_job_hands_the_job_back(db_url: str) -> None:
    with LessonBank(db_url, llm=FakeLLM([SEED_004_REPLY], delay_s=30)) as bank:
        bank.record(failing())
        deadline = time.monotonic() + 5
        while bank.jobs()[0].status != "leased" and time.monotonic() < deadline:
            time.sleep(0.01)
    # No worker of its own: one would lease the handed-back job at once, and the status read races it.
    with LessonBank(db_url, worker=False) as bank:
        (job,) = bank.jobs()
        assert job.status == "queued" and job.attempts == 0


def test_async_bank_runs_its_worker_on_the_callers_loop(db_url: str) -> None:
    from lessonbank import AsyncLessonBank

    async def main() -> None:
        async with AsyncLessonBank(db_url, llm=FakeLLM([SEED_004_REPLY])) as bank:
            await bank.record(failing())
            assert await bank.flush(timeout=10)
            hits = await bank.recall("refactor a large go file")
            assert hits and hits[0].lesson.trigger == "error"

    asyncio.run(main())
