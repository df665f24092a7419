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
