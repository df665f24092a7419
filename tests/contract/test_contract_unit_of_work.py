"""A job's writes and its finish are one transaction, on every store: an attempt that loses its
lease leaves no trace, so a retried job places its lessons, and confirms a rule, once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from lessonbank import Episode, LessonBank
from lessonbank.errors import LeaseLostError
from lessonbank.llm import FakeLLM
from lessonbank.models import Lesson
from lessonbank.ports import LessonQuery, LessonTx, Store
from tests.contract.conftest import Clock

DAY = 86_400.0
NS = "default"
RULE = "IF the NVD API returns 503 THEN retry with exponential backoff BECAUSE outages are transient"
DUAL = f"PRINCIPLE: {RULE}\nPROCEDURE:\n1. scan apache\n2. check the answer"


def _record(bank: LessonBank, task: str) -> None:
    bank.record(Episode(task=task, error="HTTP 503", importance="high", agent="scanner", task_type="scan"))


def test_a_retried_job_confirms_its_rule_once(store_url: str, clock: Clock) -> None:
    llm = FakeLLM([DUAL, DUAL, DUAL])
    with LessonBank(store_url, llm=llm, clock=clock, worker=False) as bank:
        _record(bank, "scan nginx")
        asyncio.run(bank.new_worker().run(until_idle=True))
        (rule,) = bank.rules(agent="scanner")
        assert rule.metadata["confirmations"] == 1
        clock.advance(2 * DAY)
        _record(bank, "scan apache")
        store = bank.services.scope.store
        # A first attempt runs the job to its end, then stalls: its lease runs out before it finishes.
        job = store.lease_job("stalled-worker", None, 30)
        assert job is not None
        result = asyncio.run(bank.services.reflections.handle(job))
        clock.advance(31)
        # Another worker retries the job and finishes it.
        asyncio.run(bank.new_worker().run(until_idle=True))
        (confirmed,) = bank.rules(agent="scanner")
        assert confirmed.id == rule.id
        assert confirmed.metadata["confirmations"] == 2
        assert confirmed.metadata["last_confirmed"] == clock()
        assert confirmed.access_count == 1  # reinforced once, by the attempt that finished
        assert store.get_job(job.id).status == "done"
        # The first attempt's finish comes too late: refused, nothing written.
        with pytest.raises(LeaseLostError):
            store.finish_job(
                job.id,
                "stalled-worker",
                reflection=result.reflection,
                lessons=result.lessons,
                detail=result.detail,
                place=result.place,
            )
        assert bank.rules(agent="scanner")[0].metadata["confirmations"] == 2


def test_a_job_that_loses_its_lease_writes_no_placement(store_url: str, clock: Clock) -> None:
    """The expired lessons a job's placement purges stay until an attempt finishes."""
    with LessonBank(store_url, llm=FakeLLM([DUAL]), clock=clock, worker=False) as bank:
        store = bank.services.scope.store
        old = Lesson(namespace=bank.namespace, content="an old example", kind="procedure", task_type="scan")
        stored = store.write_lesson(old.model_copy(update={"expires_at": old.created_at})).lesson
        clock.advance(60)
        _record(bank, "scan nginx")
        job = store.lease_job("stalled-worker", None, 30)
        assert job is not None
        result = asyncio.run(bank.services.reflections.handle(job))
        everything = LessonQuery(bank.namespace, statuses=(), live_only=False)
        assert [x.id for x in store.list_lessons(everything)] == [stored.id]  # the handler wrote nothing
        clock.advance(31)
        store.lease_job("other-worker", None, 30)
        with pytest.raises(LeaseLostError):
            store.finish_job(
                job.id,
                "stalled-worker",
                reflection=result.reflection,
                lessons=result.lessons,
                detail=result.detail,
                place=result.place,
            )
        assert [x.id for x in store.list_lessons(everything)] == [stored.id]
        assert bank.rules(agent="scanner") == []


def test_write_lessons_places_and_writes_in_one_call(store: Store, clock: Clock) -> None:
    """``write_lessons`` runs the placement inside its transaction, then writes each lesson as
    ``write_lesson`` would: the same text twice in one call is one lesson, reinforced once."""
    expired = Lesson(content="an expired example", kind="procedure", created_at=_at(clock() - 10))
    gone = store.write_lesson(expired.model_copy(update={"expires_at": _at(clock() - 1)})).lesson
    seen: list[list[str]] = []

    def place(tx: LessonTx, lessons: list[Lesson]) -> list[Lesson]:
        tx.purge_expired(lessons[0].namespace)
        seen.append([lesson.content for lesson in lessons])
        return [lesson.model_copy(update={"tags": [*lesson.tags, "placed"]}) for lesson in lessons]

    twice = [Lesson(content="pin the compiler version"), Lesson(content="Pin the compiler  version")]
    results = store.write_lessons(twice, place=place)
    assert seen == [["pin the compiler version", "Pin the compiler  version"]]
    assert [r.action for r in results] == ["added", "reinforced"]
    assert results[0].lesson.id == results[1].lesson.id == twice[0].id
    stored = store.get_lesson(twice[0].id)
    assert stored.access_count == 1 and stored.tags == ["placed"]
    everything = LessonQuery(NS, statuses=(), live_only=False)
    assert [x.id for x in store.list_lessons(everything)] == [twice[0].id]
    assert gone.id not in [x.id for x in store.list_lessons(everything)]


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
