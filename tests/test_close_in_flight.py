"""Closing a bank while a job's store call still runs in a thread.

A stopping worker cancels its jobs, but a thread cannot be cancelled: the job's store call goes on.
Closing the store under it (SQLite closes every thread's connection) once crashed the interpreter, so
``AsyncLessonBank.close()`` waits for those calls, and lets no new one start.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from lessonbank import AsyncLessonBank, Episode, LessonBank, Settings
from lessonbank.errors import StoreError
from lessonbank.jobs import ThreadGate, WorkerThread


def test_shut_waits_for_the_calls_running_and_refuses_new_ones() -> None:
    gate = ThreadGate()
    entered, release = threading.Event(), threading.Event()
    results: list[str] = []

    def held() -> str:
        entered.set()
        release.wait()
        return "done"

    caller = threading.Thread(target=lambda: results.append(gate.call(held)))
    caller.start()
    assert entered.wait(30)
    shutting = threading.Thread(target=gate.shut)
    shutting.start()
    shutting.join(0.2)
    assert shutting.is_alive()  # a call is running: shut() cannot have returned
    release.set()
    shutting.join(30)
    caller.join(30)
    assert not shutting.is_alive() and results == ["done"]
    with pytest.raises(StoreError, match="closed"):
        gate.call(lambda: "never")


def test_a_failing_call_is_counted_out() -> None:
    gate = ThreadGate()

    def broken() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError):
        gate.call(broken)
    gate.shut(report_after_s=0.01)  # returns: nothing runs


def test_close_waits_for_a_feedback_job_still_writing(tmp_path: Path) -> None:
    asyncio.run(close_while_a_feedback_job_writes(tmp_path))


async def close_while_a_feedback_job_writes(tmp_path: Path) -> None:
    bank = AsyncLessonBank(f"sqlite:///{tmp_path / 'bank.db'}", settings=Settings(home=tmp_path))
    lesson = await bank.add_lesson("Do not compare with None using equality; use `is None`.")
    store = bank.store
    inside, release = threading.Event(), threading.Event()
    change_lesson = store.change_lesson

    outcome: list[object] = []

    def held_change(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        release.wait(60)
        try:
            changed = change_lesson(*args, **kwargs)  # the store must still be open here
        except Exception as exc:
            outcome.append(exc)
            raise
        outcome.append(changed)
        return changed

    store.change_lesson = held_change  # type: ignore[method-assign]
    await bank.record(Episode(task="if result == None: retry()", status="success"), context_ids=[lesson.id])
    assert await asyncio.to_thread(inside.wait, 60), "the feedback job never reached the store"

    closing = asyncio.create_task(bank.close())
    # Give a close that does not wait the time to finish (it did, in about a second) before the
    # thread goes on; a close that waits is still waiting when the thread is let go.
    await asyncio.wait({closing}, timeout=2)
    assert not closing.done()
    release.set()
    await asyncio.wait_for(closing, 60)
    assert len(outcome) == 1 and not isinstance(outcome[0], Exception), outcome

    # Whatever the job's fate (written, or handed back to run again), the file is whole and reopens.
    reopened = AsyncLessonBank(f"sqlite:///{tmp_path / 'bank.db'}", settings=Settings(home=tmp_path))
    try:
        assert (await reopened.get_lesson(lesson.id)).id == lesson.id
    finally:
        await reopened.close()
    with pytest.raises(StoreError):
        await bank.get_lesson(lesson.id)


def test_a_sync_bank_whose_worker_outlives_its_stop_still_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LessonBank's close joins its worker thread for a while, then goes on: the gate covers the rest.
    stop = WorkerThread.stop
    monkeypatch.setattr(WorkerThread, "stop", lambda self, timeout=10.0: stop(self, 0.2))
    bank = LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", settings=Settings(home=tmp_path))
    lesson = bank.add_lesson("Do not compare with None using equality; use `is None`.")
    inside, release = threading.Event(), threading.Event()
    change_lesson = bank.store.change_lesson
    outcome: list[object] = []

    def held_change(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        release.wait(60)
        try:
            outcome.append(change_lesson(*args, **kwargs))
        except Exception as exc:
            outcome.append(exc)
            raise
        return outcome[-1]

    bank.store.change_lesson = held_change  # type: ignore[method-assign]
    bank.record(Episode(task="if result == None: retry()", status="success"), context_ids=[lesson.id])
    assert inside.wait(60), "the feedback job never reached the store"
    closing = threading.Thread(target=bank.close)
    closing.start()
    closing.join(2)  # a close that does not wait is done by now (its join gives up after 0.2 s)
    assert closing.is_alive()
    release.set()
    closing.join(60)
    assert not closing.is_alive()
    assert len(outcome) == 1 and not isinstance(outcome[0], Exception), outcome
