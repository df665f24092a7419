"""Pairs the pre-pass is not sure of, offered to the LLM phase to confirm (services/consolidation/offers.py):
which pairs are offered, how many, how phase 3 reads them, and a model's MERGE of one still checked by the
guards (an opposed or sibling pair is never merged, whatever the model says)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lessonbank import LessonBank
from lessonbank.llm.base import Message
from lessonbank.llm.fake import FakeLLM
from lessonbank.models import Lesson
from lessonbank.services.consolidation import offers, prompts
from lessonbank.services.consolidation.prepass import find_candidates
from lessonbank.text import estimate_tokens

NOW = datetime(2026, 6, 1, tzinfo=UTC)

CORE = "## Identity\nA bank.\n\n## Active Context\nCI.\n\n## Persona\nTerse.\n\n## Critical Facts\n- none\n"
SUMMARY = "## Key Insight\nTwo tellings of one rule.\n"


def lesson(content: str, lesson_id: str) -> Lesson:
    return Lesson(id=lesson_id, content=content, created_at=NOW - timedelta(days=1))


def test_a_paraphrase_in_other_words_is_offered_once_per_cluster_and_siblings_are_not() -> None:
    lessons = [
        lesson("Always run the tests before committing.", "a"),
        lesson("always run tests before committing", "b"),  # the same lesson retyped: joined with a
        lesson("Check whitespace after keywords.", "c"),
        lesson("Check whitespace before keywords.", "d"),  # a sibling of c: the word is the lesson
        lesson("Run the full test suite before you commit.", "e"),  # the same advice, below the join
    ]
    found = find_candidates(lessons, NOW)
    assert found.clusters == [["a", "b"]]
    assert [(o.a, o.b) for o in found.offers] == [("b", "e")]  # a and b are one: one pair, not two
    assert 0.05 <= found.offers[0].probability < 0.82
    assert found.counts["offered"] == 1


def test_an_opposed_pair_is_never_offered() -> None:
    lessons = [
        lesson("Always pin the versions of dependencies in requirements files.", "a"),
        lesson("Never pin the versions of dependencies in requirements files.", "b"),
    ]
    found = find_candidates(lessons, NOW)
    assert found.offers == [] and found.contradictions == [("a", "b")]


PIP_TELLINGS = [
    "Set PIP_INDEX_URL to the internal mirror before pip install in CI.",
    "In CI, point PIP_INDEX_URL at the internal mirror before running pip install.",
    "Before pip install in CI jobs, export PIP_INDEX_URL with the internal mirror.",
    "CI must use the internal mirror: set PIP_INDEX_URL before any pip install.",
    "Use the internal mirror for pip in CI by setting PIP_INDEX_URL first.",
    "Pin the versions of dependencies in requirements files.",
    "Run the linter before pushing a branch.",
    "Write a changelog entry for each user-facing change.",
    "Cache the pip downloads between CI runs to save time.",
]


def test_each_lesson_offers_its_few_likeliest_neighbours() -> None:
    # Five tellings of one rule: each has rivals as close as its partner, so none is joined; all are offered.
    lessons = [lesson(text, f"l{n}") for n, text in enumerate(PIP_TELLINGS)]
    every = find_candidates(lessons, NOW, offers_per_lesson=10)
    assert every.clusters == []
    offered = {lesson_id for o in every.offers for lesson_id in (o.a, o.b)}
    assert offered == {"l0", "l1", "l2", "l3", "l4"}  # the rule's tellings, none of the other lessons
    for k in (1, 2):
        few = find_candidates(lessons, NOW, offers_per_lesson=k).offers
        assert len(few) < len(every.offers)
        for offer in few:  # among the k likeliest of one of its two lessons
            ranks = [
                sorted((o for o in every.offers if side in (o.a, o.b)), key=lambda o: -o.probability)[:k]
                for side in (offer.a, offer.b)
            ]
            assert any(offer in top for top in ranks)
    assert find_candidates(lessons, NOW, offers_per_lesson=0).offers == []
    floored = find_candidates(lessons, NOW, offers_per_lesson=10, offer_floor=0.5).offers
    assert floored and all(o.probability >= 0.5 for o in floored) and len(floored) < len(every.offers)


def test_the_pairs_shown_are_the_likeliest_per_token_that_fit_the_tokens() -> None:
    lessons = {i: lesson(f"Lesson number {i} says something about deploys and staging.", i) for i in "abcdef"}
    found = [offers.Offer("a", "b", 0.7), offers.Offer("c", "d", 0.5), offers.Offer("e", "f", 0.2)]
    text, shown = offers.render(found, lessons, estimate_tokens, 10_000)
    assert (
        shown == found
        and text.splitlines()[0].startswith("1. a | ")
        and text.splitlines()[1].startswith("   b | ")
    )
    one_pair = estimate_tokens(text.split("\n2.")[0]) + 5
    text, shown = offers.render(found, lessons, estimate_tokens, one_pair)
    assert shown == found[:1] and "c |" not in text
    lessons["g"] = lesson("A long lesson about deploys. " * 6, "g")
    lessons["h"] = lesson("Another long lesson about staging. " * 6, "h")
    # A pair more likely but five times longer comes after a shorter one: fewer merges per token.
    text, shown = offers.render([offers.Offer("g", "h", 0.8), *found], lessons, estimate_tokens, 10_000)
    assert shown[:2] == found[:2] and shown.index(offers.Offer("g", "h", 0.8)) > 1


# ---------------------------------------------------------------------------- through a cycle


def judge(merges: str) -> tuple[FakeLLM, list[str]]:
    """A model whose phase 3 answers ``merges``; the prompts it was sent are recorded."""
    sent: list[str] = []

    def answer(messages: Sequence[Message]) -> str:
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        sent.append(prompt)
        if messages[0]["content"] != prompts.SYSTEM:
            return "not a reflection"
        for opening, reply in (
            ("You are performing", "1. Confirm the pairs."),
            ("You are reviewing", "- nothing new"),
            ("Execute the consolidation plan", merges),
            ("Rewrite the core memory", CORE),
        ):
            if prompt.startswith(opening):
                return reply
        return SUMMARY

    return FakeLLM(default=answer), sent


def bank_with(tmp_path: Path, llm: FakeLLM, rows: list[dict[str, Any]]) -> LessonBank:
    bank = LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", llm=llm, worker=False)
    bank.import_lessons(rows)
    return bank


PIP = [
    {"id": "les_pip_a", "content": "Set PIP_INDEX_URL to the internal mirror before pip install in CI."},
    {"id": "les_pip_b", "content": "In CI jobs, configure the internal package mirror as pip's index first."},
]


def test_phase_three_reads_the_offered_pairs_and_a_confirmed_merge_is_proposed(tmp_path: Path) -> None:
    merge = "---\nOPERATION: MERGE\nTARGET: les_pip_a, les_pip_b\nREASON: one rule told twice\n---"
    llm, sent = judge(merge)
    with bank_with(tmp_path, llm, PIP) as bank:
        found = find_candidates([Lesson(**row, created_at=NOW - timedelta(days=1)) for row in PIP], NOW)
        assert found.clusters == [] and [(o.a, o.b) for o in found.offers] == [("les_pip_a", "les_pip_b")]
        proposal = bank.consolidate()
        [phase3] = [p for p in sent if p.startswith("Execute the consolidation plan")]
        section = phase3.split("PAIRS TO CONFIRM", 1)[1].split("LESSONS NAMED IN THE PLAN", 1)[0]
        assert "1. les_pip_a | Set PIP_INDEX_URL" in section and "   les_pip_b | In CI jobs" in section
        assert proposal is not None
        [merged] = [op for op in proposal.operations if op.kind == "merge"]
        assert merged.status != "dropped" and sorted(merged.lesson_ids) == ["les_pip_a", "les_pip_b"]


def test_a_models_merge_of_siblings_or_opposites_is_refused_with_why(tmp_path: Path) -> None:
    rows = [
        {"id": "les_after", "content": "Check whitespace after keywords."},
        {"id": "les_before", "content": "Check whitespace before keywords."},
        {"id": "les_use", "content": "Always use the Edit tool for changes to large files."},
        {"id": "les_avoid", "content": "Never use the Edit tool for changes to large files."},
    ]
    merges = "\n".join(
        f"---\nOPERATION: MERGE\nTARGET: {a}, {b}\nREASON: the model says so\n---"
        for a, b in (("les_after", "les_before"), ("les_use", "les_avoid"))
    )
    llm, _ = judge(merges)
    with bank_with(tmp_path, llm, rows) as bank:
        proposal = bank.consolidate()
        assert proposal is not None
        merges_proposed = [op for op in proposal.operations if op.kind == "merge"]
        assert merges_proposed and all(op.status == "dropped" for op in merges_proposed)
        notes = {tuple(sorted(op.lesson_ids)): op.note or "" for op in merges_proposed}
        assert "siblings" in notes[("les_after", "les_before")]
        assert "opposite" in notes[("les_avoid", "les_use")]
        bank.approve(proposal.id)
        assert all(bank.get_lesson(row["id"]).superseded_by is None for row in rows)


def shown_in(prompts_sent: list[str]) -> list[tuple[str, str]]:
    """The pairs to confirm of the phase 3 prompt among ``prompts_sent``."""
    [phase3] = [p for p in prompts_sent if p.startswith("Execute the consolidation plan")]
    section = phase3.split("PAIRS TO CONFIRM", 1)[1].split("LESSONS NAMED IN THE PLAN", 1)[0]
    ids = re.findall(r"^\s*(?:\d+\.\s+)?(les_\w+) \| ", section, re.M)
    return list(zip(ids[::2], ids[1::2], strict=True))


def test_a_pair_shown_and_left_is_not_shown_again_so_the_next_cycle_shows_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    render = offers.render

    def one_pair_a_cycle(found: Any, lessons: Any, count: Any, budget: int) -> Any:
        first, _ = render(found[:1], lessons, count, budget)
        return render(found, lessons, count, count(first) + 5)

    monkeypatch.setattr(offers, "render", one_pair_a_cycle)
    rows = [{"id": f"les_t{n}", "content": text} for n, text in enumerate(PIP_TELLINGS)]
    llm, sent = judge("NONE")  # a model that merges nothing
    with bank_with(tmp_path, llm, rows) as bank:
        lessons = [Lesson(**row, created_at=NOW - timedelta(days=1)) for row in rows]
        every = find_candidates(lessons, NOW).offers
        by_id = {lesson.id: lesson for lesson in lessons}
        seen: list[tuple[str, str]] = []
        assert len(every) >= 2
        for _ in every:
            proposal = bank.consolidate()
            shown = shown_in(sent)
            sent.clear()
            _, order = render([o for o in every if (o.a, o.b) not in seen], by_id, estimate_tokens, 10**6)
            assert shown == [(order[0].a, order[0].b)]  # the first of those not shown yet
            seen += shown
            if proposal is not None:
                bank.reject(proposal.id, reason="nothing to merge")
        bank.consolidate()
        assert shown_in(sent) == []  # every pair was shown once
