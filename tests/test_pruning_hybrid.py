"""A hybrid recall runs its keyword search beside the vector search (another thread), so it waits
for the slower of the two instead of their sum; the answers are those of the two run in turn."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from lessonbank import LessonBank
from lessonbank.retrieval.lexical_index import LexicalIndex
from lessonbank.retrieval.vector import VectorIndex
from tests.test_retrieval_hybrid import ConceptEmbedder


def test_the_keyword_search_runs_while_the_vectors_are_scanned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanning = threading.Event()
    threads: dict[str, str] = {}
    keyword_search, vector_search = LexicalIndex.search, VectorIndex.search

    def keywords(index: LexicalIndex, *args: Any, **kwargs: Any) -> Any:
        threads["keywords"] = threading.current_thread().name
        # Run one after the other, the vector scan would start only after this returns.
        assert scanning.wait(5), "the vectors were not being scanned during the keyword search"
        return keyword_search(index, *args, **kwargs)

    def vectors(index: VectorIndex, *args: Any, **kwargs: Any) -> Any:
        threads["vectors"] = threading.current_thread().name
        scanning.set()
        return vector_search(index, *args, **kwargs)

    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, embedder=ConceptEmbedder()) as bank:
        first = bank.add_lesson("ship the release after the database migration")
        second = bank.add_lesson("rollout of the schema change waits for the backup")
        bank.add_lesson("pin the compiler version in the build image")
        alone = [(h.lesson.id, h.lexical, h.vector) for h in bank.recall("deploy after the migration", k=3)]
        monkeypatch.setattr(LexicalIndex, "search", keywords)
        monkeypatch.setattr(VectorIndex, "search", vectors)
        together = [
            (h.lesson.id, h.lexical, h.vector) for h in bank.recall("deploy after the migration", k=3)
        ]
    assert threads["keywords"] != threads["vectors"]
    assert together == alone
    assert {first.id, second.id} <= {lesson_id for lesson_id, _, _ in together}


def test_the_first_recall_loads_the_keyword_index_before_the_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the keyword index has not read the store, the two searches run in turn (both indexes
    loading at once would hold every row of both in memory together); once it has, side by side."""
    threads: list[str] = []
    keyword_search = LexicalIndex.search

    def keywords(index: LexicalIndex, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return keyword_search(index, *args, **kwargs)

    monkeypatch.setattr(LexicalIndex, "search", keywords)
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, embedder=ConceptEmbedder()) as bank:
        bank.add_lesson("ship the release after the database migration")
        first = [h.lesson.id for h in bank.recall("deploy after the migration")]
        second = [h.lesson.id for h in bank.recall("deploy after the migration")]
    caller = threading.current_thread().name
    assert first == second
    assert threads[-2:][0] == caller != threads[-1]
