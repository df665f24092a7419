"""The pool caps hold under concurrent writers, on every backend: insights per goal (3), tactical (10)
and strategic (5) rules per agent, replay examples per task type (100)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress

from lessonbank import LessonBank, Settings
from lessonbank.errors import NotFoundError
from lessonbank.llm import FakeLLM
from lessonbank.models import Episode, Lesson
from lessonbank.ports import LessonQuery, Store
from lessonbank.services.pools import (
    INSIGHTS_PER_GOAL,
    REPLAY_PER_TYPE,
    STRATEGIC_PER_AGENT,
    TACTICAL_PER_AGENT,
    confirm_rule_by_id,
    place,
    rules,
    stream_of,
)
from tests.contract.conftest import Clock

FAST = Settings.from_env(backoff_base_s=0.01, backoff_max_s=0.05, poll_interval_s=0.05)
WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
]  # fmt: skip


def _text(n: int) -> str:
    """A sentence sharing few words with any other ``n``: never a near duplicate."""
    a, b, c = WORDS[n % 20], WORDS[(n * 7 + 3) % 20], WORDS[(n * 11 + 5) % 20]
    return f"{a} {b} {c} number{n} {a}{n} {b}{n}"


def _all(store: Store, kind: str) -> list[Lesson]:
    return store.list_lessons(LessonQuery("default", kinds=[kind]), limit=1000)


def test_concurrent_goal_finishes_keep_three_insights(store_url: str) -> None:
    replies = [f"Insight {n}: {_text(n)} taught something." for n in range(10)]
    with LessonBank(store_url, llm=FakeLLM(replies, delay_s=0.05), settings=FAST) as bank:
        assert bank.settings.worker_concurrency >= 4
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda n: bank.finish_goal("g", title="Goal", status="failed", outputs=[f"out {n}"]),
                    range(10),
                )
            )
        assert bank.flush(timeout=60)
        assert len(bank.insights(goal_id="g")) == INSIGHTS_PER_GOAL
        assert len(_all(bank.store, "insight")) == INSIGHTS_PER_GOAL


def test_concurrent_reflections_keep_ten_tactical_rules(store_url: str) -> None:
    replies = [
        f"PRINCIPLE: IF {_text(n)} THEN retry {WORDS[n % 20]}{n}\nPROCEDURE:\n1. step{n} {_text(n)}\n2. check"
        for n in range(16)
    ]
    with LessonBank(store_url, llm=FakeLLM(replies, delay_s=0.05), settings=FAST) as bank:
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda n: bank.record(
                        Episode(
                            task=f"fetch feed {n}",
                            error="HTTP 503",
                            importance="high",
                            agent="coder",
                            task_type="api",
                        )
                    ),
                    range(16),
                )
            )
        assert bank.flush(timeout=60)
        tactical = bank.rules(agent="coder", stream="tactical")
        assert len(tactical) == TACTICAL_PER_AGENT
        assert len(_all(bank.store, "principle")) == TACTICAL_PER_AGENT


def _place_and_write(store: Store, lesson: Lesson, clock: Clock) -> None:
    (ready,) = place(store, [lesson], clock())
    store.write_lesson(ready)


def test_concurrent_rule_writes_keep_ten_tactical(store: Store, clock: Clock) -> None:
    lessons = [Lesson(kind="principle", content=f"IF {_text(n)} THEN act {n}", agent="a") for n in range(20)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda lesson: _place_and_write(store, lesson, clock), lessons))
    found = rules(store, "default", "a")
    assert len(found) == TACTICAL_PER_AGENT
    assert {stream_of(rule) for rule in found} == {"tactical"}


def _confirm(store: Store, rule_id: str, clock: Clock) -> None:
    with suppress(NotFoundError):  # evicted by another promotion meanwhile
        confirm_rule_by_id(store, "default", rule_id, clock())


def test_concurrent_promotions_keep_five_strategic(store: Store, clock: Clock) -> None:
    for n in range(9):
        _place_and_write(
            store, Lesson(kind="principle", content=f"IF {_text(n)} THEN act {n}", agent="a"), clock
        )
        clock.advance(1)
    ids = [rule.id for rule in rules(store, "default", "a")]
    assert len(ids) == 9
    clock.advance(27 * 86_400)
    for rule_id in ids:
        confirm_rule_by_id(store, "default", rule_id, clock())
    clock.advance(2 * 86_400)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda rule_id: _confirm(store, rule_id, clock), ids))
    strategic = [rule for rule in rules(store, "default", "a") if stream_of(rule) == "strategic"]
    assert len(strategic) == STRATEGIC_PER_AGENT
    assert len(_all(store, "principle")) == STRATEGIC_PER_AGENT


def test_concurrent_replay_writes_keep_one_hundred_per_type(store: Store, clock: Clock) -> None:
    def procedure(n: int, task_type: str) -> Lesson:
        return Lesson(
            kind="procedure",
            content=f"Task: {_text(n)}\nResult: success\nSteps:\n1. step {n}",
            task_type=task_type,
            metadata={"result": "success", "task": f"task {n}"},
        )

    write: Callable[[Lesson], None] = lambda lesson: _place_and_write(store, lesson, clock)  # noqa: E731
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, [procedure(n, "scan") for n in range(REPLAY_PER_TYPE + 12)]))
    write(procedure(REPLAY_PER_TYPE + 100, "report"))  # other content: the same text would reinforce a scan
    pool_rows = _all(store, "procedure")
    assert len([p for p in pool_rows if p.task_type == "scan"]) == REPLAY_PER_TYPE
    assert len([p for p in pool_rows if p.task_type == "report"]) == 1
