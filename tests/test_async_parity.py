"""AsyncLessonBank offers exactly LessonBank's public methods, with the same parameters, as coroutines."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

from lessonbank import AsyncLessonBank, Episode, LessonBank
from lessonbank.llm import FakeLLM
from tests.conftest import SEED_004_REPLY

SYNC_ONLY = {"__enter__", "__exit__"}
ASYNC_ONLY = {"__aenter__", "__aexit__"}


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") or name in SYNC_ONLY | ASYNC_ONLY | {"__init__"}
    }


def test_same_methods_same_signatures() -> None:
    sync_methods = {n: s for n, s in public_methods(LessonBank).items() if n not in SYNC_ONLY}
    async_methods = {n: s for n, s in public_methods(AsyncLessonBank).items() if n not in ASYNC_ONLY}
    assert sorted(sync_methods) == sorted(async_methods)
    for name, signature in sync_methods.items():
        assert list(signature.parameters.values()) == list(async_methods[name].parameters.values()), name
        if name != "__init__":
            assert inspect.iscoroutinefunction(getattr(AsyncLessonBank, name)), name
            assert not inspect.iscoroutinefunction(getattr(LessonBank, name)), name


def test_same_results(tmp_path: Path) -> None:
    episode = {"task": "refactor pkg/engine to extract Close", "error": "provider timeout after 120s"}
    with LessonBank(f"sqlite:///{tmp_path / 'sync.db'}", llm=FakeLLM([SEED_004_REPLY])) as bank:
        bank.record(Episode(**episode))
        bank.flush(timeout=10)
        bank.add_lesson("when editing large Go files use Edit, not full rewrite", tags=["go"])
        sync_recall = [h.lesson.content for h in bank.recall("refactor a large go file")]
        sync_block = bank.context("split manager.go into smaller go files").text

    async def run() -> tuple[list[str], str]:
        async with AsyncLessonBank(
            f"sqlite:///{tmp_path / 'async.db'}", llm=FakeLLM([SEED_004_REPLY])
        ) as bank:
            await bank.record(Episode(**episode))
            await bank.flush(timeout=10)
            await bank.add_lesson("when editing large Go files use Edit, not full rewrite", tags=["go"])
            hits = await bank.recall("refactor a large go file")
            block = await bank.context("split manager.go into smaller go files")
            return [h.lesson.content for h in hits], block.text

    assert asyncio.run(run()) == (sync_recall, sync_block)


INSIGHT = "The price data was outdated; use web_search with recent date filter next time."
DUAL = "PRINCIPLE: IF the API returns 503 THEN retry with backoff\nPROCEDURE:\n1. call\n2. retry"


def test_same_results_for_goals_rules_and_replay(tmp_path: Path) -> None:
    failing_scan = {
        "task": "scan nginx",
        "error": "503",
        "importance": "high",
        "agent": "s",
        "task_type": "scan",
    }
    formats = ["past_reflections", "learned_rules", "replay"]

    def sync_side() -> tuple[object, ...]:
        with LessonBank(f"sqlite:///{tmp_path / 's.db'}", llm=FakeLLM([INSIGHT, DUAL])) as bank:
            bank.finish_goal("g", title="Research competitor pricing", status="failed", errors=["stale"])
            bank.flush(timeout=10)
            bank.record(Episode(**failing_scan))  # type: ignore[arg-type]
            bank.flush(timeout=10)
            rule = bank.rules(agent="s")[0]
            confirmed = bank.confirm_rule(rule.id).metadata["confirmations"]
            return (
                [i.content for i in bank.insights(goal_id="g")],
                [r.content for r in bank.rules(agent="s")],
                [p.content for p in bank.replay(task_type="scan")],
                confirmed,
                [d["reflector"] for d in bank.decisions()],
                bank.context("scan nginx", goal_id="g", agent="s", task_type="scan", formats=formats).text,
            )

    async def async_side() -> tuple[object, ...]:
        async with AsyncLessonBank(f"sqlite:///{tmp_path / 'a.db'}", llm=FakeLLM([INSIGHT, DUAL])) as bank:
            await bank.finish_goal(
                "g", title="Research competitor pricing", status="failed", errors=["stale"]
            )
            await bank.flush(timeout=10)
            await bank.record(Episode(**failing_scan))  # type: ignore[arg-type]
            await bank.flush(timeout=10)
            rule = (await bank.rules(agent="s"))[0]
            confirmed = (await bank.confirm_rule(rule.id)).metadata["confirmations"]
            block = await bank.context(
                "scan nginx", goal_id="g", agent="s", task_type="scan", formats=formats
            )
            return (
                [i.content for i in await bank.insights(goal_id="g")],
                [r.content for r in await bank.rules(agent="s")],
                [p.content for p in await bank.replay(task_type="scan")],
                confirmed,
                [d["reflector"] for d in await bank.decisions()],
                block.text,
            )

    expected = sync_side()
    assert expected[0] == [INSIGHT] and expected[3] == 2 and expected[4] == ["dual", "insight"]
    assert asyncio.run(async_side()) == expected
