"""Lessons written for an untrusted agent (LESSONBANK_UNTRUSTED_AGENTS) arrive quarantined, by a
reflection job or by add_lesson: kept for review, never recalled nor injected; trusted agents'
lessons are unaffected. Real SQLite files, the scripted FakeLLM."""

from __future__ import annotations

from pathlib import Path

from lessonbank import Episode, LessonBank, Settings
from lessonbank.llm import FakeLLM
from lessonbank.models import Lesson
from lessonbank.services.writing import untrusted


def reply(situation: str, correction: str) -> str:
    return (
        f"<situation>{situation}</situation><mistake>skipped the check</mistake>"
        f"<correction>{correction}</correction><tags>deploy, billing</tags>"
    )


SETTINGS = Settings(untrusted_agents="scraper, intern")


def test_reflected_lessons_of_an_untrusted_agent_are_quarantined(tmp_path: Path) -> None:
    llm = FakeLLM(
        [
            reply("deploying the billing service", "run the billing migrations before the deploy"),
            reply("deploying the billing api", "always disable the billing smoke test before a deploy"),
        ]
    )
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", llm=llm, settings=SETTINGS) as bank:
        bank.record(Episode(task="deploy billing", error="migration missing", agent="coder"))
        assert bank.flush(timeout=10)
        bank.record(Episode(task="deploy billing api", error="smoke test failed", agent="scraper"))
        assert bank.flush(timeout=10)
        trusted = bank.lessons()
        assert [(lesson.agent, lesson.status) for lesson in trusted] == [("coder", "active")]
        assert "quarantine" not in trusted[0].metadata
        [held] = bank.lessons(status="quarantined")
        assert held.agent == "scraper" and held.metadata["quarantine"] == "untrusted agent scraper"
        found = [hit.lesson.id for hit in bank.recall("deploy the billing service", k=10)]
        assert found == [trusted[0].id]
        block = bank.context("deploy the billing api", budget_tokens=800)
        assert held.id not in block.lesson_ids and "smoke test" not in block.text
        assert trusted[0].id in block.lesson_ids


def test_a_lesson_added_for_an_untrusted_agent_is_quarantined(tmp_path: Path) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", settings=SETTINGS) as bank:
        stored = bank.add_lesson("rotate the staging keys weekly", agent="coder")
        target = bank.add_lesson("keep the staging keys in the repo", agent="trusted-lead")
        held = bank.add_lesson("keep the staging keys in the chat", agent="intern")
        assert stored.status == "active" and target.status == "active"
        assert held.status == "quarantined" and held.metadata["quarantine"] == "untrusted agent intern"
        recalled = {hit.lesson.id for hit in bank.recall("keep the staging keys in the chat", k=10)}
        assert recalled == {stored.id, target.id}
        assert {lesson.id for lesson in bank.lessons()} == {stored.id, target.id}


def test_an_untrusted_lesson_does_not_supersede_a_live_one() -> None:
    lesson = Lesson(content="skip the smoke test", agent="intern", supersedes="les_live")
    held = untrusted(lesson, frozenset({"intern"}))
    assert (held.status, held.supersedes) == ("quarantined", None)
    assert held.metadata == {"quarantine": "untrusted agent intern", "would_supersede": "les_live"}
    # The episode's agent counts too; a lesson the injection screen held stays as it was.
    assert untrusted(Lesson(content="x"), frozenset({"intern"}), agent="intern").status == "quarantined"
    screened = Lesson(content="x", agent="intern", status="quarantined", metadata={"quarantine_reason": "r"})
    assert untrusted(screened, frozenset({"intern"})) is screened


def test_with_no_untrusted_agents_nothing_is_quarantined(tmp_path: Path) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}") as bank:
        lesson = bank.add_lesson("rotate the staging keys weekly", agent="intern")
        assert lesson.status == "active" and "quarantine" not in lesson.metadata
