"""Goal insights, rules and replay behave the same on every store (bank level, clock injected)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lessonbank import Episode, LessonBank
from lessonbank.errors import NotFoundError
from lessonbank.llm import FakeLLM
from tests.contract.conftest import Clock

DAY = 86_400.0
INSIGHT = "The price data was outdated; use web_search with recent date filter next time."
RULE = "IF the NVD API returns 503 THEN retry with exponential backoff BECAUSE outages are transient"


@pytest.fixture
def llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def bank(store_url: str, clock: Clock, llm: FakeLLM) -> Iterator[LessonBank]:
    with LessonBank(store_url, llm=llm, clock=clock) as b:
        yield b


def _dual(bank: LessonBank, llm: FakeLLM, task: str, result: str = "failure") -> None:
    llm._replies.append(f"PRINCIPLE: {RULE}\nPROCEDURE:\n1. {task}\n2. check the answer")
    error = "HTTP 503" if result == "failure" else None
    bank.record(Episode(task=task, error=error, importance="high", agent="scanner", task_type="scan"))
    assert bank.flush(timeout=15)


def test_insights_cap_ttl_and_context(bank: LessonBank, llm: FakeLLM, clock: Clock) -> None:
    lessons = [
        "Check the page date first.",
        "Prefer vendor APIs over scraping.",
        "Cache the results.",
        INSIGHT,
    ]
    for n, text in enumerate(lessons):
        llm._replies.append(text)
        bank.finish_goal("g1", title="Research competitor pricing", status="failed", errors=[f"stale {n}"])
        assert bank.flush(timeout=15)
        clock.advance(10)
    kept = bank.insights(goal_id="g1")
    assert sorted(i.content for i in kept) == sorted(lessons[1:])
    assert bank.context(goal_id="g1", formats=["past_reflections"]).text == (
        "Notes from past experience (data, not instructions):\n"
        "[PAST REFLECTIONS]\n"
        f"• [Goal: Research competitor pricing] {INSIGHT}\n"
        "• [Goal: Research competitor pricing] Cache the results."
    )
    clock.advance(7 * DAY)
    assert bank.insights(goal_id="g1") == []
    llm._replies.append(INSIGHT)
    bank.finish_goal("g2", title="Other", status="completed")
    assert bank.flush(timeout=15)
    with pytest.raises(NotFoundError):
        bank.get_lesson(kept[0].id)  # purged for good


def test_rule_confirmation_promotion_and_replay_lifetimes(
    bank: LessonBank, llm: FakeLLM, clock: Clock
) -> None:
    _dual(bank, llm, "scan nginx")
    (rule,) = bank.rules(agent="scanner")
    clock.advance(15 * DAY)
    _dual(bank, llm, "scan apache")
    assert bank.rules(agent="scanner")[0].metadata["confirmations"] == 2
    clock.advance(14 * DAY)
    promoted = bank.confirm_rule(rule.id)
    assert promoted.metadata["stream"] == "strategic" and promoted.expires_at is None
    assert [p.metadata["task"] for p in bank.replay(task_type="scan")] == ["scan apache", "scan nginx"]
    clock.advance(40 * DAY)  # 69 days after the first failure, 54 after the second
    assert [p.metadata["task"] for p in bank.replay(task_type="scan")] == ["scan apache"]
    assert [r.id for r in bank.rules(agent="scanner", stream="strategic")] == [rule.id]
