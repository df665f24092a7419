"""Lessons without a vector, paged by key on every store, and ``embed_missing`` built on it: every
lesson gets its vector once, including lessons written behind the key while it runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from lessonbank import LessonBank
from lessonbank.retrieval.embedders.hash import HashEmbedder
from lessonbank.stores import Store
from tests.contract.conftest import Clock
from tests.contract.test_contract_lessons import lesson
from tests.contract.test_contract_recall_store import MODEL, NS, vec


def pages(store: Store, limit: int) -> list[list[str]]:
    """Every page of lessons missing a vector, each starting after the last one's last lesson."""
    out: list[list[str]] = []
    after: str | None = None
    while page := [x.id for x in store.lessons_missing_vectors(NS, MODEL, limit, after)]:
        out.append(page)
        after = page[-1]
    return out


def test_pages_follow_the_key_oldest_first(store: Store, clock: Clock) -> None:
    made = []
    for n in range(7):
        made.append(store.write_lesson(lesson(f"keyed lesson number {n}", clock)).lesson.id)
        clock.advance(1)
    store.put_vectors(NS, MODEL, [(made[1], "h", vec(1)), (made[4], "h", vec(1))])
    missing = [made[i] for i in (0, 2, 3, 5, 6)]
    assert pages(store, 2) == [missing[:2], missing[2:4], missing[4:]]
    # Lessons given a vector behind the key are not seen again; those after it are skipped.
    assert [x.id for x in store.lessons_missing_vectors(NS, MODEL, 10, made[2])] == missing[2:]
    store.put_vectors(NS, MODEL, [(made[5], "h", vec(1))])
    assert [x.id for x in store.lessons_missing_vectors(NS, MODEL, 10, made[2])] == [made[3], made[6]]
    # A lesson written with an older time sorts before the key: only a pass from the start finds it.
    clock.advance(-100)
    early = store.write_lesson(lesson("keyed lesson written late but dated early", clock)).lesson.id
    assert early not in [x.id for x in store.lessons_missing_vectors(NS, MODEL, 10, made[2])]
    assert store.lessons_missing_vectors(NS, MODEL, 10)[0].id == early
    # A key no longer stored (deleted, or never there) starts from the first.
    assert [x.id for x in store.lessons_missing_vectors(NS, MODEL, 2, "no-such-lesson")] == [early, made[0]]
    # Another namespace's lesson is no key here.
    other = store.write_lesson(lesson("keyed lesson elsewhere", clock, namespace="other")).lesson.id
    assert [x.id for x in store.lessons_missing_vectors(NS, MODEL, 1, other)] == [early]


class BehindTheKey(HashEmbedder):
    """Writes one lesson dated before every other through another bank the first time it embeds,
    as another process would while ``embed_missing`` runs."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.written: str | None = None

    def embed_documents(self, texts: Sequence[str]) -> Any:
        if self.written is None:
            with LessonBank(self.url, worker=False) as other:
                early = datetime(2001, 1, 1, tzinfo=UTC)
                other.import_lessons([{"content": "written meanwhile, dated long ago", "created_at": early}])
                self.written = next(x.id for x in other.lessons(limit=1000) if x.created_at == early)
        return super().embed_documents(texts)


def test_embed_missing_embeds_every_lesson_once(store_url: str) -> None:
    with LessonBank(store_url, worker=False) as bank:
        bank.import_lessons([{"content": f"a lesson to embed later, number {n}"} for n in range(23)])
    embedder = BehindTheKey(store_url)
    with LessonBank(store_url, worker=False, embedder=embedder) as bank:
        # 23 imported and 1 written behind the key while the first pass ran, each embedded once.
        assert bank.services.intake.embed_missing(batch=5) == 24
        assert embedder.written is not None
        store = bank.store
        held = store.vector_hashes("default", embedder.name, [x.id for x in bank.lessons(limit=1000)])
        assert len(held) == 24 and embedder.written in held
        assert bank.services.intake.embed_missing(batch=5) == 0
