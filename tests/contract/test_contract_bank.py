"""The bank end to end on every backend: record → worker → lesson → recall → context."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from lessonbank import Episode, LessonBank, LLMTransientError, Settings
from lessonbank.llm import FakeLLM
from tests.conftest import SEED_004_REPLY

FAST = Settings.from_env(backoff_base_s=0.01, backoff_max_s=0.05, poll_interval_s=0.05)


def failing(task: str = "refactor pkg/auth/manager.go into smaller go files") -> Episode:
    return Episode(task=task, status="failure", error="rewrite lost half the file", agent="coder")


def test_record_reflect_recall_context(store_url: str) -> None:
    llm = FakeLLM([SEED_004_REPLY])
    with LessonBank(store_url, llm=llm, settings=FAST) as bank:
        episode = bank.record(failing())
        assert bank.flush(timeout=30)
        (lesson,) = bank.lessons()
        assert lesson.situation == "Refactoring large Go files (>1000 lines)"
        assert lesson.episode_id == episode.id and lesson.trigger == "error"
        assert set(lesson.tags) >= {"go", "refactor"}
        (job,) = bank.jobs()
        assert job.status == "done" and job.attempts == 1
        hits = bank.recall("surgical changes with the edit tool in go files")
        assert hits and hits[0].lesson.id == lesson.id
        block = bank.context("refactor a go file with the edit tool", budget_tokens=800)
        assert block.lesson_ids == [lesson.id] and "Use @coder patch or Edit tool" in block.text
        assert bank.get_lesson(lesson.id).access_count == 1
        # The same episode content again is not reflected twice.
        bank.record(failing())
        assert bank.flush(timeout=30)
        assert len(bank.jobs()) == 1 and len(llm.calls) == 1
        stats = bank.stats()
        assert stats["episodes"] == 2 and stats["lessons"] == {"lesson": 1}


def test_retries_then_dead_letter_then_retry(store_url: str) -> None:
    llm = FakeLLM([LLMTransientError("503"), SEED_004_REPLY])
    with LessonBank(store_url, llm=llm, settings=FAST) as bank:
        bank.record(failing())
        assert bank.flush(timeout=30)
        (job,) = bank.jobs()
        assert job.status == "done" and job.attempts == 2
    llm = FakeLLM([LLMTransientError(f"503 #{n}") for n in range(2)])
    with LessonBank(store_url, llm=llm, settings=FAST.with_overrides(job_max_attempts=2)) as bank:
        bank.record(failing("deploy the billing service"))
        assert bank.flush(timeout=30)
        (dead,) = bank.jobs(status="dead")
        assert dead.attempts == 2 and "503 #1" in (dead.last_error or "")
        llm.default = SEED_004_REPLY
        assert bank.retry_jobs() == 1
        assert bank.flush(timeout=30)
        assert {j.status for j in bank.jobs()} == {"done"}


def test_closing_mid_job_hands_the_job_back(store_url: str) -> None:
    with LessonBank(store_url, llm=FakeLLM([SEED_004_REPLY], delay_s=30), settings=FAST) as bank:
        bank.record(failing())
        deadline = time.monotonic() + 10
        while bank.jobs()[0].status != "leased" and time.monotonic() < deadline:
            time.sleep(0.01)
    with LessonBank(store_url, worker=False) as bank:
        (job,) = bank.jobs()
        assert job.status == "queued" and job.attempts == 0


def test_namespaces_are_apart(store_url: str) -> None:
    with LessonBank(store_url, namespace="team-a") as a, LessonBank(store_url, namespace="team-b") as b:
        a.add_lesson("retry flaky network calls with backoff", tags=["network"])
        assert b.recall("retry flaky network") == [] and b.lessons() == []
        assert len(a.recall("retry flaky network")) == 1


def test_an_idle_worker_wakes_when_another_process_queues_a_job(store_url: str, backend: str) -> None:
    """PostgreSQL announces new jobs (NOTIFY); the other backends are polled, so give them a short poll."""
    poll = 60.0 if backend == "postgres" else 0.2
    settings = FAST.with_overrides(poll_interval_s=poll)
    with (
        LessonBank(store_url, llm=FakeLLM([SEED_004_REPLY]), settings=settings) as serving,
        LessonBank(store_url, llm=FakeLLM([]), settings=settings, worker=False) as recording,
    ):
        worker = serving.new_worker(None)
        thread = threading.Thread(target=asyncio.run, args=(worker.run(),), daemon=True)
        thread.start()
        time.sleep(0.5)  # the worker is asleep now, for up to `poll` seconds
        recording.record(failing())
        deadline = time.monotonic() + 15
        while worker.processed == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        worker.stop()
        thread.join(timeout=10)
        assert worker.processed == 1
        assert len(recording.lessons()) == 1


@pytest.mark.parametrize("count", [5])
def test_manual_lessons_and_forget(store_url: str, count: int) -> None:
    with LessonBank(store_url) as bank:
        made = [bank.add_lesson(f"lesson number {n} about caching builds") for n in range(count)]
        assert len(bank.lessons()) == count
        bank.forget(made[0].id)
        assert made[0].id not in {lesson.id for lesson in bank.lessons()}
