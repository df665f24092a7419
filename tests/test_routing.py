"""Time travel over insights, rules and the replay pool: TTLs, caps and promotion (clock injected)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lessonbank import Episode, LessonBank
from lessonbank.errors import InputError, NotFoundError
from lessonbank.llm import FakeLLM
from lessonbank.models import Lesson
from lessonbank.services.pools import REPLAY_PER_TYPE, place

DAY = 86_400.0


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float) -> None:
        self.now += days * DAY


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def bank(tmp_path: Path, clock: Clock, llm: FakeLLM) -> Iterator[LessonBank]:
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", llm=llm, clock=clock) as b:
        yield b


def _finish(bank: LessonBank, llm: FakeLLM, goal: str, insight: str, status: str = "failed") -> None:
    llm._replies.append(insight)
    bank.finish_goal(goal, title=f"Goal {goal}", status=status, outputs=[insight])  # type: ignore[arg-type]
    assert bank.flush(timeout=10)


def _dual(bank: LessonBank, llm: FakeLLM, task: str, rule: str, *, agent: str = "scanner") -> None:
    llm._replies.append(f"PRINCIPLE: {rule}\nPROCEDURE:\n1. {task}\n2. check the result")
    bank.record(Episode(task=task, error="HTTP 503", importance="high", agent=agent, task_type="api"))
    assert bank.flush(timeout=10)


# ------------------------------------------------------------------------------------ insights


def test_newest_three_insights_per_goal(bank: LessonBank, llm: FakeLLM, clock: Clock) -> None:
    for n in range(4):
        _finish(bank, llm, "g1", f"Attempt number {n} taught something new about pricing.")
        clock.advance(0.01)
    kept = bank.insights(goal_id="g1")
    assert sorted(lesson.content for lesson in kept) == [
        f"Attempt number {n} taught something new about pricing." for n in (1, 2, 3)
    ]
    assert len(bank.lessons(kind="insight")) == 3  # dropped from the store, not just hidden


def test_insights_expire_after_seven_days_and_never_come_back(
    bank: LessonBank, llm: FakeLLM, clock: Clock
) -> None:
    text = "The price data was outdated; use web_search with recent date filter next time."
    _finish(bank, llm, "g1", text)
    (first,) = bank.insights(goal_id="g1")
    clock.advance(6.9)
    assert [lesson.id for lesson in bank.insights(goal_id="g1")] == [first.id]
    clock.advance(0.2)
    assert bank.insights(goal_id="g1") == []
    assert bank.context(goal_id="g1", formats=["past_reflections"]).text == ""
    _finish(bank, llm, "g2", text, status="completed")  # the same words again, for another goal
    with pytest.raises(NotFoundError):
        bank.get_lesson(first.id)  # purged
    (fresh,) = bank.insights(goal_id="g2")
    assert fresh.id != first.id and fresh.access_count == 0 and fresh.goal_id == "g2"


def test_without_a_goal_only_the_ten_most_recently_reflected_goals_count(
    bank: LessonBank, llm: FakeLLM, clock: Clock
) -> None:
    for n in range(12):
        # the two oldest goals failed (importance 0.8), the ten newest completed (0.5)
        _finish(
            bank,
            llm,
            f"g{n:02d}",
            f"Insight for goal number {n} is here.",
            "failed" if n < 2 else "completed",
        )
        clock.advance(0.01)
    goals = {lesson.goal_id for lesson in bank.insights()}
    assert goals == {f"g{n:02d}" for n in range(2, 12)}
    block = bank.context(formats=["past_reflections"])
    assert block.text.count("\n• ") == 2 and "goal number 0 " not in block.text


# ------------------------------------------------------------------------------------ rules


RULE = "IF the NVD API returns 503 THEN retry with exponential backoff BECAUSE outages are transient"


def test_tactical_rules_are_capped_at_ten_per_agent(bank: LessonBank, llm: FakeLLM, clock: Clock) -> None:
    topics = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
    ]
    for topic in topics:
        _dual(
            bank,
            llm,
            f"query {topic} service",
            f"IF {topic} service answers slowly THEN use the {topic} cache",
        )
        clock.advance(0.01)
    _dual(bank, llm, "query other", "IF lima is down THEN page the on-call", agent="other")
    mine = bank.rules(agent="scanner")
    assert len(mine) == 10
    assert all("alpha" not in rule.content for rule in mine)  # the oldest dropped
    assert len(bank.rules(agent="other")) == 1 and len(bank.rules()) == 11


def test_tactical_rule_expires_four_weeks_after_last_confirmation(
    bank: LessonBank, llm: FakeLLM, clock: Clock
) -> None:
    _dual(bank, llm, "fetch cves", RULE)
    (rule,) = bank.rules(agent="scanner")
    assert rule.metadata["stream"] == "tactical" and rule.metadata["confirmations"] == 1
    clock.advance(20)
    _dual(bank, llm, "fetch cves again", RULE.replace("retry", "always retry"))  # a near duplicate confirms
    (confirmed,) = bank.rules(agent="scanner")
    assert confirmed.id == rule.id and confirmed.metadata["confirmations"] == 2
    clock.advance(27)  # 47 days after creation, 27 after the last confirmation
    assert [r.id for r in bank.rules(agent="scanner")] == [rule.id]
    clock.advance(1.5)
    assert bank.rules(agent="scanner") == []


def test_confirmed_across_four_weeks_promotes_to_strategic(
    bank: LessonBank, llm: FakeLLM, clock: Clock
) -> None:
    _dual(bank, llm, "fetch cves", RULE)
    clock.advance(15)
    _dual(bank, llm, "fetch cves 2", RULE)
    assert bank.rules(agent="scanner", stream="strategic") == []
    clock.advance(14)  # 29 days since first confirmed
    (rule,) = bank.rules(agent="scanner")
    promoted = bank.confirm_rule(rule.id)  # marked helpful
    assert promoted.metadata["stream"] == "strategic" and promoted.expires_at is None
    assert promoted.helpful == 1 and "strategic" in promoted.tags and "tactical" not in promoted.tags
    clock.advance(400)
    assert [r.id for r in bank.rules(agent="scanner", stream="strategic")] == [rule.id]


def test_strategic_rules_are_capped_at_five(bank: LessonBank, llm: FakeLLM, clock: Clock) -> None:
    topics = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    for topic in topics:
        _dual(bank, llm, f"query {topic}", f"IF {topic} is slow THEN use the {topic} mirror")
        clock.advance(0.01)
    for step in (15, 14):  # confirmed on day 15 and on day 29: promoted at the second
        clock.advance(step)
        for rule in sorted(bank.rules(agent="scanner"), key=lambda r: r.created_at):
            bank.confirm_rule(rule.id)
            clock.advance(0.01)
    strategic = bank.rules(agent="scanner", stream="strategic")
    assert len(strategic) == 5 and all("alpha" not in r.content for r in strategic)


def test_confirming_an_expired_or_unknown_rule_fails(bank: LessonBank, llm: FakeLLM, clock: Clock) -> None:
    _dual(bank, llm, "fetch cves", RULE)
    (rule,) = bank.rules()
    clock.advance(29)
    with pytest.raises(InputError, match="expired rules do not come back"):
        bank.confirm_rule(rule.id)
    with pytest.raises(NotFoundError):
        bank.confirm_rule("les_nope")


# ------------------------------------------------------------------------------------ replay


def test_successes_kept_four_weeks_failures_eight(bank: LessonBank, llm: FakeLLM, clock: Clock) -> None:
    _dual(bank, llm, "fetch cves failing", RULE)
    llm._replies.append("PRINCIPLE: IF x THEN y\nPROCEDURE:\n1. fetch\n2. filter")
    bank.record(Episode(task="fetch cves working", importance="high", duration_s=90, task_type="api"))
    assert bank.flush(timeout=10)
    assert sorted(p.metadata["result"] for p in bank.replay(task_type="api")) == ["failure", "success"]
    clock.advance(29)
    assert [p.metadata["result"] for p in bank.replay(task_type="api")] == ["failure"]
    clock.advance(28)
    assert bank.replay(task_type="api") == []


def _procedure(n: int, task_type: str, result: str = "success", task: str = "fetch data") -> Lesson:
    return Lesson(
        kind="procedure",
        content=f"Task: {task} {n}\nResult: {result}\nSteps:\n1. step {n}",
        task_type=task_type,
        metadata={"result": result, "task": f"{task} {n}", "steps": [f"step {n}"]},
    )


def test_replay_pool_holds_at_most_100_per_task_type(tmp_path: Path, clock: Clock) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'p.db'}", clock=clock) as bank:
        for n in range(REPLAY_PER_TYPE + 5):
            (ready,) = place(bank.store, [_procedure(n, "scan")], clock())
            bank.store.write_lesson(ready)
            clock.now += 1
        (other,) = place(bank.store, [_procedure(0, "report")], clock())
        bank.store.write_lesson(other)
        pool = bank.lessons(kind="procedure", limit=500)
        assert len([p for p in pool if p.task_type == "scan"]) == REPLAY_PER_TYPE
        assert {p.metadata["task"] for p in pool if p.task_type == "scan"} >= {"fetch data 104"}
        assert "fetch data 4" not in {p.metadata["task"] for p in pool if p.task_type == "scan"}


def test_replay_matching_exact_type_then_keywords_with_a_failure(tmp_path: Path, clock: Clock) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'p.db'}", clock=clock) as bank:
        lessons = [
            _procedure(1, "scan", task="scan nginx"),
            _procedure(2, "scan", task="scan apache"),
            _procedure(3, "scan", task="scan redis"),
            _procedure(4, "report", "failure", task="nginx weekly report"),
            _procedure(5, "deploy", "failure", task="unrelated rollout"),
        ]
        for lesson in lessons:
            bank.store.write_lesson(place(bank.store, [lesson], clock())[0])
            clock.now += 1
        found = bank.replay(task="check nginx versions", task_type="scan")
        assert [p.metadata["task"] for p in found] == [
            "scan redis 3",
            "scan apache 2",
            "nginx weekly report 4",
        ]
        by_keywords = bank.replay(task="write the nginx report")
        assert [p.metadata["task"] for p in by_keywords] == ["nginx weekly report 4", "scan nginx 1"]
        assert bank.replay(task="nothing matches here") == []


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["insight", "principle"]), st.integers(0, 3), st.floats(0, 10)),
        min_size=1,
        max_size=30,
    )
)
def test_caps_and_expiry_hold_for_any_sequence(steps: list[tuple[str, int, float]]) -> None:
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp, LessonBank(f"sqlite:///{tmp}/p.db", clock=clock) as bank:
        for n, (kind, who, days) in enumerate(steps):
            clock.advance(days)
            if kind == "insight":
                lesson = Lesson(kind="insight", content=f"insight number {n} is new", goal_id=f"g{who}")
            else:
                lesson = Lesson(kind="principle", content=f"IF case {n} THEN act {n}", agent=f"a{who}")
            bank.store.write_lesson(place(bank.store, [lesson], clock())[0])
            for goal in range(4):
                live = bank.insights(goal_id=f"g{goal}")
                assert len(live) <= 3
                assert all(i.expires_at is not None and i.expires_at.timestamp() > clock() for i in live)
            for agent in range(4):
                assert len(bank.rules(agent=f"a{agent}", stream="tactical")) <= 10
            assert bank.context(formats=["past_reflections"]).text.count("\n• ") <= 2
