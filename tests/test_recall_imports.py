"""A process that opens a bank and recalls loads only what a recall needs: the services a bank wires
are built, and their modules imported, on first use. A cold start pays for the interpreter and its
imports, so the consolidation cycle, the request models, the write and export paths and the other
facade stay unloaded until something asks for them; asked for, they work as before, once per bank.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lessonbank import LessonBank
from tests.fresh_process import answer_of, sql_bank_url

# Modules a recall or a context does not need; each is loaded by the operations that use it.
NOT_FOR_RECALL = (
    "asyncio",  # the sync bank's worker and the LLM calls need it; a recall does not
    "pydantic_settings",
    "lessonbank.jobs",
    "lessonbank.bank.aio",
    "lessonbank.requests",
    "lessonbank.operations",
    "lessonbank.injection",
    "lessonbank.services.recording",
    "lessonbank.services.writing",
    "lessonbank.services.catalog",
    "lessonbank.services.lifecycle",
    "lessonbank.services.expansion",
    "lessonbank.services.transfer",
    "lessonbank.services.feedback",
    "lessonbank.services.reflecting",
    "lessonbank.services.retention",
    "lessonbank.services.consolidation.cycle",
    "lessonbank.services.consolidation.cycle_queue",
    "lessonbank.services.consolidation.prepass",
)

SCRIPT = """
import json, sys
from lessonbank import LessonBank
bank = LessonBank(sys.argv[1], worker=False)
hits = bank.recall("deploy migrations", k=1, mode="lexical")
block = bank.context("run the deploy", budget_tokens=200)
not_for_recall = json.loads(sys.argv[2])
after_recall = [name for name in not_for_recall if name in sys.modules]
stats = bank.stats()  # the catalog, built now
count = len(bank.lessons())
proposal = bank.consolidate(dry_run=True)  # the consolidation cycle, built now
bank.close()
print(json.dumps({
    "hit": hits[0].lesson.content, "ids": block.lesson_ids, "after_recall": after_recall,
    "lessons": count, "stats": sorted(stats),
    "cycle_loaded": "lessonbank.services.consolidation.cycle" in sys.modules,
    "proposal": proposal is not None,
}))
"""


@pytest.fixture(params=["sqlite", "postgres"])
def bank_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from sql_bank_url(request.param, tmp_path, "imports")


def test_a_recall_loads_no_module_it_does_not_need(bank_url: str) -> None:
    with LessonBank(bank_url, worker=False) as bank:
        bank.import_lessons(
            [
                {"content": "Run the migrations before the deploy."},
                {"content": "run migrations before a deploy"},
                {"content": "Pin the lockfile when a build breaks."},
            ]
        )
    answer = answer_of(SCRIPT, bank_url, json.dumps(NOT_FOR_RECALL))
    # psycopg imports asyncio itself, for its async connections.
    assert answer["after_recall"] == ([] if bank_url.startswith("sqlite") else ["asyncio"])
    assert answer["hit"] in ("Run the migrations before the deploy.", "run migrations before a deploy")
    assert len(answer["ids"]) >= 1
    # Asked for afterwards, the services load and answer as before.
    assert answer["lessons"] == 3 and "consolidation" in answer["stats"]
    assert answer["cycle_loaded"] is True
    assert answer["proposal"] is True  # the two retyped lessons make a merge


def test_a_service_is_built_once_per_bank_even_when_threads_race(tmp_path: Path) -> None:
    with (
        LessonBank(f"sqlite:///{tmp_path / 'a.db'}", worker=False) as bank,
        LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False) as other,
    ):
        start = threading.Barrier(8)
        seen: list[object] = []

        def ask() -> None:
            start.wait()
            seen.append(bank.services.consolidation)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(seen) == 8 and len({id(service) for service in seen}) == 1
        # One consolidator per bank, and the cycle queue runs that bank's.
        assert bank.services.cycles.consolidator is seen[0]
        assert other.services.consolidation is not seen[0]
        assert other.services.consolidation.scope is other.services.scope
        # The recorder and the context builder share one record of the contexts served.
        assert bank.services.recorder.last_contexts is bank.services.context.last_contexts
