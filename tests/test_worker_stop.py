"""A clean stop of the worker (SIGTERM, SIGINT, stop()) leaves no job leased and spends no attempt."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lessonbank import Episode, LessonBank, Settings
from lessonbank.errors import StoreError
from lessonbank.jobs import JobResult, Worker
from lessonbank.models import Job
from lessonbank.stores.sqlite import SQLiteStore
from tests.conftest import SEED_004_REPLY


def _record(url: str, count: int) -> None:
    with LessonBank(url, worker=False) as producer:
        for n in range(count):
            producer.record(Episode(task=f"migrate table {n}", error=f"lock timeout on table {n}"))


def _worker_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LESSONBANK_")}
    env.update({"LESSONBANK_LLM": "fake", "LESSONBANK_POLL_INTERVAL_S": "0.05", **extra})
    return env


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_job_hands_in_flight_jobs_back_with_their_attempt(tmp_path: Path, signum: int) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    _record(url, 4)
    env = _worker_env(LESSONBANK_FAKE_REPLIES=json.dumps([SEED_004_REPLY] * 4), LESSONBANK_FAKE_DELAY_S="60")
    worker = subprocess.Popen(
        [sys.executable, "-m", "lessonbank.cli", "--db", url, "worker", "--concurrency", "2"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with LessonBank(url, worker=False) as watcher:
            deadline = time.monotonic() + 15
            while len(watcher.jobs(status="leased")) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(watcher.jobs(status="leased")) == 2
    finally:
        worker.send_signal(signum)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert "Traceback" not in err and "stopped after 0 job(s); 2 unfinished job(s) handed back" in err
    with LessonBank(url, worker=False) as after:
        jobs = after.jobs()
        assert [job.status for job in jobs] == ["queued"] * 4
        assert [job.attempts for job in jobs] == [0] * 4


class _StopWhileLeasing:
    """A store whose lease_job returns its job after the worker was told to stop (a signal mid-lease)."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.worker: Worker | None = None
        self.release_failures = 0

    def lease_job(self, *args: Any, **kwargs: Any) -> Job | None:
        job = self.inner.lease_job(*args, **kwargs)
        if job is not None and self.worker is not None:
            self.worker.stop()
        return job

    def release_job(self, *args: Any, **kwargs: Any) -> None:
        if self.release_failures:
            self.release_failures -= 1
            raise StoreError("database is locked")
        self.inner.release_job(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _never(job: Job) -> JobResult:
    await asyncio.sleep(60)
    return JobResult(reflection=None)


def _enqueue(store: SQLiteStore, count: int) -> None:
    for n in range(count):
        store.enqueue_job(Job(namespace="default", dedupe_key=f"k{n}", episode_id=f"ep_{n}"))


def test_a_job_leased_as_the_stop_arrives_is_handed_back(tmp_path: Path) -> None:
    inner = SQLiteStore(tmp_path / "jobs.db")
    _enqueue(inner, 3)
    store = _StopWhileLeasing(inner)
    settings = Settings.from_env(worker_concurrency=2, poll_interval_s=0.05, backoff_base_s=0.01)
    worker = Worker(store, _never, settings)  # type: ignore[arg-type]
    store.worker = worker
    asyncio.run(asyncio.wait_for(worker.run(), 10))
    assert [(job.status, job.attempts) for job in inner.list_jobs(None)] == [("queued", 0)] * 3
    inner.close()


def test_a_busy_store_at_stop_still_gets_the_job_back(tmp_path: Path) -> None:
    inner = SQLiteStore(tmp_path / "jobs.db")
    _enqueue(inner, 1)
    store = _StopWhileLeasing(inner)
    store.release_failures = 2
    settings = Settings.from_env(worker_concurrency=1, poll_interval_s=0.05, backoff_base_s=0.01)
    worker = Worker(store, _never, settings)  # type: ignore[arg-type]

    async def main() -> None:
        task = asyncio.create_task(worker.run())
        deadline = time.monotonic() + 5
        while not inner.list_jobs(None, ["leased"]) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        worker.stop()
        await asyncio.wait_for(task, 10)

    asyncio.run(main())
    assert [(job.status, job.attempts) for job in inner.list_jobs(None)] == [("queued", 0)]
    inner.close()
