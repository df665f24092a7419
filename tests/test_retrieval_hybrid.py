"""Hybrid recall through the bank: modes, filters, provenance, vectors kept in step, utility, HyDE."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lessonbank import Episode, LessonBank
from lessonbank.errors import ConfigError, InputError
from lessonbank.llm.fake import FakeLLM
from lessonbank.settings import Settings

# Concepts a test embedder knows: words on one line share an axis, so "ship" is near "deploy"
# with no word in common — the case vector recall exists for.
CONCEPTS = [
    ("deploy", "release", "ship", "rollout"),
    ("database", "postgres", "sql", "schema"),
    ("test", "tests", "pytest", "assertion"),
    ("timeout", "slow", "latency", "hang"),
    ("file", "files", "edit", "rewrite"),
    ("go", "golang"),
    ("never", "not", "avoid"),
]


class ConceptEmbedder:
    """Deterministic vectors from concept axes (plus a small per-word hash part), counting its work."""

    name = "concept-test"
    dim = 32

    def __init__(self) -> None:
        self.documents = 0
        self.queries = 0

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dim, dtype=np.float32)
        words = [w.strip(".,:;!?'\"()").lower() for w in text.split()]
        for axis, group in enumerate(CONCEPTS):
            vector[axis] += sum(1.0 for w in words if w in group)
        for word in words:
            vector[len(CONCEPTS) + sum(map(ord, word)) % (self.dim - len(CONCEPTS))] += 0.05
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.documents += len(texts)
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        self.queries += 1
        return self._vector(text)


@pytest.fixture
def embedder() -> ConceptEmbedder:
    return ConceptEmbedder()


@pytest.fixture
def bank(tmp_path: Path, embedder: ConceptEmbedder) -> Iterator[LessonBank]:
    # Vector dedup off (only identical vectors merge): these tests keep related lessons apart on
    # purpose; dedup has tests of its own.
    settings = Settings.from_env(dedup_cosine=1.0)
    with LessonBank(
        f"sqlite:///{tmp_path / 'bank.db'}", namespace="t", worker=False, embedder=embedder, settings=settings
    ) as bank:
        yield bank


def test_without_an_embedder_recall_is_lexical_and_vector_modes_say_what_is_missing(tmp_path: Path) -> None:
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False) as bank:
        bank.add_lesson("run the database migrations before the deploy")
        assert [h.lesson.content for h in bank.recall("database migrations")] == [
            "run the database migrations before the deploy"
        ]
        assert bank.recall("database migrations", mode="lexical")[0].vector == 0.0
        for mode in ("vector", "hybrid"):
            with pytest.raises(ConfigError, match="needs an embedder"):
                bank.recall("database", mode=mode)
        with pytest.raises(ConfigError, match="no embedder"):
            bank.embed_missing()


def test_unknown_mode_and_wrong_types_are_refused(bank: LessonBank) -> None:
    with pytest.raises(InputError, match="unknown recall mode"):
        bank.recall("deploy", mode="semantic")
    with pytest.raises(InputError, match="mode must be a string"):
        bank.recall("deploy", mode=3)  # type: ignore[arg-type]


def test_vector_recall_finds_a_lesson_that_shares_no_word_with_the_task(bank: LessonBank) -> None:
    target = bank.add_lesson("freeze writes during a rollout of the service")
    bank.add_lesson("keep each commit small and focused")
    assert bank.recall("ship the new version", mode="lexical") == []
    vector = bank.recall("ship the new version", mode="vector", k=1)
    assert [h.lesson.id for h in vector] == [target.id]
    assert vector[0].vector > 0.5
    hybrid = bank.recall("ship the new version", k=1)  # auto → hybrid with an embedder
    assert [h.lesson.id for h in hybrid] == [target.id]


def test_hybrid_puts_the_lesson_both_searches_agree_on_first(bank: LessonBank) -> None:
    both = bank.add_lesson("postgres schema changes need a migration file")
    bank.add_lesson("schema names are lowercase in this project")  # lexical only ("schema")
    bank.add_lesson("the sql console is read only")  # vector only (database concept)
    hits = bank.recall("postgres schema", k=3, mode="hybrid")
    assert hits[0].lesson.id == both.id
    assert hits[0].lexical > 0 and hits[0].vector > 0


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_both_fusions_rank_the_agreed_lesson_first(bank: LessonBank, fusion: str) -> None:
    bank.retriever.fusion = fusion  # type: ignore[assignment]
    both = bank.add_lesson("postgres schema changes need a migration file")
    lexical_only = bank.add_lesson("schema names are lowercase in this project")
    bank.add_lesson("the sql console is read only")
    hits = bank.recall("postgres schema", k=3, mode="hybrid")
    assert hits[0].lesson.id == both.id
    assert lexical_only.id in [h.lesson.id for h in hits]


def test_an_unknown_fusion_is_a_config_error(bank: LessonBank) -> None:
    from lessonbank.retrieval import Retriever

    with pytest.raises(ConfigError, match="fusion"):
        Retriever(bank.store, fusion="max")  # type: ignore[arg-type]


def test_every_filter_applies_to_vector_candidates(bank: LessonBank) -> None:
    kept = bank.add_lesson("release on tuesdays", tags=["ops"], task_type="deploy", agent="a1")
    bank.add_lesson("release with a feature flag", tags=["web"], task_type="deploy", agent="a2")
    bank.add_lesson("rollout behind a canary", kind="principle", tags=["ops"], agent="a1")
    for filters in ({"tags": ["ops"], "kind": "lesson"}, {"agent": "a1", "kind": "lesson"}):
        hits = bank.recall("ship it", mode="vector", **filters)
        assert [h.lesson.id for h in hits] == [kept.id], filters
    bank.forget(kept.id)
    assert bank.recall("ship it", mode="vector", tags=["ops"], kind="lesson") == []


def test_a_narrow_filter_widens_the_vector_scan(bank: LessonBank) -> None:
    for i in range(120):
        bank.add_lesson(f"release checklist item {i}: ship with care", tags=["bulk"])
    wanted = bank.add_lesson("a rollout needs a runbook", tags=["rare"])
    hits = bank.recall("ship a release", mode="vector", k=3, tags=["rare"])
    assert [h.lesson.id for h in hits] == [wanted.id]


def test_where_a_lesson_was_learned_is_searched_too(bank: LessonBank) -> None:
    lesson = bank.add_lesson(
        "split the work into small patches", learned_from="refactor pkg/engine/close.go with 2000 lines"
    )
    assert lesson.learned_from == "refactor pkg/engine/close.go with 2000 lines"
    assert [h.lesson.id for h in bank.recall("engine close.go refactor", mode="lexical")] == [lesson.id]
    assert bank.recall("golang file edit", mode="vector", k=1)[0].lesson.id == lesson.id


def test_content_already_embedded_is_never_embedded_again(
    bank: LessonBank, embedder: ConceptEmbedder
) -> None:
    first = bank.add_lesson("avoid long sql transactions")
    assert embedder.documents == 1
    assert bank.add_lesson("avoid long   sql transactions").id == first.id  # same content: reinforced
    assert embedder.documents == 1
    assert bank.embed_missing() == 0
    assert embedder.documents == 1
    bank.store.update_lesson(first.model_copy(update={"content": "avoid long database transactions"}))
    bank.add_lesson("pytest fixtures over setup methods")
    assert embedder.documents == 2
    # The edited lesson's text no longer matches its vector: only it is embedded again.
    stored = bank.store.vector_hashes("t", embedder.name, [first.id])
    assert first.id in stored
    assert bank.retriever.embed_lessons([bank.get_lesson(first.id)]) == 1
    assert bank.retriever.embed_lessons([bank.get_lesson(first.id)]) == 0


def test_import_embeds_in_batches_and_embed_missing_catches_up(
    tmp_path: Path, embedder: ConceptEmbedder
) -> None:
    db = f"sqlite:///{tmp_path / 'b.db'}"
    with LessonBank(db, namespace="t", worker=False) as plain:
        plain.import_lessons([{"content": f"ship release number {i}"} for i in range(150)])
    with LessonBank(db, namespace="t", worker=False, embedder=embedder) as bank:
        assert bank.recall("rollout", mode="vector") == []
        assert bank.embed_missing() == 150
        assert embedder.documents == 150
        assert len(bank.recall("rollout", mode="vector", k=5)) == 5
        counts = bank.import_lessons([{"content": "never hang on a slow database"}])
        assert counts["added"] == 1 and counts["embedded"] == 1
        assert bank.embed_missing() == 0


def test_a_second_bank_on_the_same_file_sees_new_and_deleted_vectors(
    tmp_path: Path, embedder: ConceptEmbedder
) -> None:
    db = f"sqlite:///{tmp_path / 'b.db'}"
    with (
        LessonBank(db, namespace="t", worker=False, embedder=embedder) as writer,
        LessonBank(db, namespace="t", worker=False, embedder=ConceptEmbedder()) as reader,
    ):
        old = writer.add_lesson("pytest assertion rewriting hides the diff")
        assert [h.lesson.id for h in reader.recall("tests fail", mode="vector")] == [old.id]
        new = writer.add_lesson("tests hang when the database is down")
        writer.forget(old.id)
        reader.retriever.index("t").sync(force=True)
        assert [h.lesson.id for h in reader.recall("tests fail", mode="vector")] == [new.id]
        assert len(reader.retriever.index("t")) == 1


def test_an_embedder_failure_never_loses_the_lesson(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(ConceptEmbedder):
        def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
            raise RuntimeError("model server down")

    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, embedder=Broken()) as bank:
        with caplog.at_level(logging.WARNING, logger="lessonbank"):
            lesson = bank.add_lesson("release notes go in CHANGES.md")
        assert bank.get_lesson(lesson.id).content == "release notes go in CHANGES.md"
        assert "embed_missing" in caplog.text
        assert bank.recall("release notes", mode="lexical")[0].lesson.id == lesson.id


@pytest.mark.parametrize("on_another_thread", [False, True])
def test_a_query_embedding_failure_degrades_hybrid_recall_to_keywords(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, on_another_thread: bool
) -> None:
    class QueryDown(ConceptEmbedder):
        releases_gil = on_another_thread

        def embed_query(self, text: str) -> np.ndarray:
            raise RuntimeError("model server down")

    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, embedder=QueryDown()) as bank:
        lesson = bank.add_lesson("release notes go in CHANGES.md")
        with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
            assert [h.lesson.id for h in bank.recall("release notes")] == [lesson.id]
        assert "keywords only" in caplog.text
        assert bank.context("write the release notes").lesson_ids == [lesson.id]
        with pytest.raises(RuntimeError, match="model server down"):
            bank.recall("release notes", mode="vector")


def test_hybrid_recall_embeds_the_query_while_the_keyword_search_runs(tmp_path: Path) -> None:
    class SlowQuery(ConceptEmbedder):
        releases_gil = True

        def __init__(self) -> None:
            super().__init__()
            self.embedding = threading.Event()
            self.threads: list[str] = []

        def embed_query(self, text: str) -> np.ndarray:
            self.threads.append(threading.current_thread().name)
            self.embedding.set()
            time.sleep(0.05)
            return super().embed_query(text)

    embedder = SlowQuery()
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, embedder=embedder) as bank:
        lesson = bank.add_lesson("ship the release after the database migration")
        search = bank.store.search

        def search_during_embedding(*args: Any, **kwargs: Any) -> Any:
            # Run one after the other, the embedding would start only after this returns.
            assert embedder.embedding.wait(5), "the query was not being embedded during the keyword search"
            return search(*args, **kwargs)

        bank.store.search = search_during_embedding  # type: ignore[method-assign]
        assert [h.lesson.id for h in bank.recall("deploy after the migration")] == [lesson.id]
        assert embedder.threads[0] != threading.current_thread().name


def test_lessons_that_keep_failing_sink_and_helpful_ones_rise(bank: LessonBank) -> None:
    good = bank.add_lesson("run pytest with -x to stop at the first failure")
    bad = bank.add_lesson("run pytest with -q to stop at the first failure")
    for _ in range(4):
        bank.record(
            Episode(task="fix the failing tests", status="failure", error="1 failed"), context_ids=[bad.id]
        )
        bank.record(Episode(task="fix the failing tests", status="success"), context_ids=[good.id])
    assert (bank.get_lesson(bad.id).helpful, bank.get_lesson(bad.id).harmful) == (0, 4)
    assert (bank.get_lesson(good.id).helpful, bank.get_lesson(good.id).harmful) == (4, 0)
    hits = bank.recall("pytest stop at the first failure", k=2)
    assert [h.lesson.id for h in hits] == [good.id, bad.id]
    assert hits[0].utility > 0.8 > 0.2 > hits[1].utility
    assert [lesson.id for lesson in bank.lessons(sort="utility")][:1] == [good.id]


def test_the_last_context_is_credited_when_record_gets_no_ids(bank: LessonBank) -> None:
    lesson = bank.add_lesson("ship releases behind a feature flag")
    block = bank.context("ship the billing release", agent="coder")
    assert block.lesson_ids == [lesson.id] and block.ids == block.lesson_ids
    bank.record(Episode(task="ship the billing release", agent="coder", status="failure", error="500s"))
    assert bank.get_lesson(lesson.id).harmful == 1
    # Taken once: a second record of the same task credits nothing more.
    bank.record(Episode(task="ship the billing release", agent="coder", status="failure", error="500s"))
    assert bank.get_lesson(lesson.id).harmful == 1
    # Another agent's context is not this agent's.
    bank.context("ship the billing release", agent="other")
    bank.record(Episode(task="ship the billing release", agent="coder", status="success"))
    assert bank.get_lesson(lesson.id).helpful == 0
    # Partial outcomes credit nothing; explicit ids win over the remembered ones.
    bank.context("ship the billing release", agent="coder")
    bank.record(Episode(task="ship the billing release", agent="coder", status="partial"))
    bank.record(Episode(task="x", status="success"), context_ids=[lesson.id])
    assert (bank.get_lesson(lesson.id).helpful, bank.get_lesson(lesson.id).harmful) == (1, 1)


def test_one_context_is_credited_once_whether_taken_by_task_or_task_type(bank: LessonBank) -> None:
    lesson = bank.add_lesson("ship releases behind a feature flag")
    bank.context("ship the billing release", agent="coder", task_type="release")
    bank.record(
        Episode(task="ship the billing release", agent="coder", task_type="release", status="success")
    )
    bank.record(Episode(task="ship the search release", agent="coder", task_type="release", status="success"))
    assert bank.get_lesson(lesson.id).helpful == 1


@pytest.mark.parametrize(
    "bad",
    [
        "les_0123",
        b"les_0123",
        42,
        [42],
        [None],
        [""],
        [{"id": "x"}],
        ["les_x"] * 1 + [f"les_{i}" for i in range(1_001)],
    ],
)
def test_bad_context_ids_are_refused_and_nothing_is_written(bank: LessonBank, bad: object) -> None:
    lesson = bank.add_lesson("ship releases behind a feature flag")
    with pytest.raises(InputError, match="context_ids"):
        bank.record(Episode(task="ship", status="failure", error="boom"), context_ids=bad)  # type: ignore[arg-type]
    assert bank.store.stats(bank.namespace).episodes == 0
    assert bank.get_lesson(lesson.id).harmful == 0


def test_unknown_and_repeated_context_ids_credit_each_known_lesson_once(bank: LessonBank) -> None:
    lesson = bank.add_lesson("ship releases behind a feature flag")
    bank.record(
        Episode(task="ship", status="failure", error="boom"),
        context_ids=[lesson.id, lesson.id, "les_gone"],
    )
    assert bank.get_lesson(lesson.id).harmful == 1


def test_attribution_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LESSONBANK_ATTRIBUTION", "false")
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False) as bank:
        lesson = bank.add_lesson("ship releases behind a feature flag")
        bank.record(Episode(task="ship", status="failure", error="boom"), context_ids=[lesson.id])
        assert bank.get_lesson(lesson.id).harmful == 0


def test_hyde_adds_a_hypothetical_answer_and_caches_it(tmp_path: Path) -> None:
    llm = FakeLLM(
        default="When a migration is slow, add the index concurrently instead of locking the table."
    )
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, llm=llm, hyde=True) as bank:
        lesson = bank.add_lesson("create indexes concurrently so the table is never locked")
        assert bank.recall("speed up the orders query", hyde=False) == []
        assert [h.lesson.id for h in bank.recall("speed up the orders query")] == [lesson.id]
        assert [h.lesson.id for h in bank.recall("speed up  the orders query")] == [lesson.id]
        assert len(llm.calls) == 1  # the repeat (whitespace aside) came from the cache
        assert "speed up the orders query" in llm.calls[0].messages[-1]["content"]


def test_hyde_failure_falls_back_to_the_plain_query(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    llm = FakeLLM(default=ValueError("provider returned garbage"))
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, llm=llm, hyde=True) as bank:
        lesson = bank.add_lesson("orders query needs an index")
        with caplog.at_level(logging.WARNING, logger="lessonbank.retrieval"):
            assert [h.lesson.id for h in bank.recall("orders query")] == [lesson.id]
        assert "HyDE" in caplog.text


def test_a_failed_hyde_call_is_not_cached_and_the_next_recall_tries_again(tmp_path: Path) -> None:
    answer = "When a migration is slow, add the index concurrently instead of locking the table."
    llm = FakeLLM([ValueError("provider timed out")], default=answer)
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, llm=llm, hyde=True) as bank:
        lesson = bank.add_lesson("create indexes concurrently so the table is never locked")
        assert bank.recall("speed up the orders query") == []
        assert [h.lesson.id for h in bank.recall("speed up the orders query")] == [lesson.id]
        assert [h.lesson.id for h in bank.recall("speed up the orders query")] == [lesson.id]
        assert len(llm.calls) == 2  # the failure, then one answer served twice


def test_hyde_per_call_on_a_bank_with_hyde_off(tmp_path: Path) -> None:
    llm = FakeLLM(default="Add the index concurrently instead of locking the table.")
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, llm=llm) as bank:
        lesson = bank.add_lesson("create indexes concurrently so the table is never locked")
        assert bank.recall("speed up the orders query") == []
        assert llm.calls == []  # off by default: no call
        assert [h.lesson.id for h in bank.recall("speed up the orders query", hyde=True)] == [lesson.id]
        assert len(llm.calls) == 1


def test_hyde_never_sends_a_secret_in_the_query(tmp_path: Path) -> None:
    llm = FakeLLM(default="Rotate keys that leak.")
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, llm=llm, hyde=True) as bank:
        bank.recall("deploy with OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123456789")
        assert "sk-abcdefghijklmnopqrstuvwxyz0123456789" not in llm.calls[0].messages[-1]["content"]


def test_hyde_without_an_llm_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="HyDE"):
        LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, hyde=True)


def test_the_hash_embedder_works_end_to_end(tmp_path: Path) -> None:
    from lessonbank.retrieval.embedders import HashEmbedder

    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, embedder="hash") as bank:
        assert isinstance(bank.embedder, HashEmbedder)
        lesson = bank.add_lesson("use the Edit tool for large Go files instead of a full rewrite")
        bank.add_lesson("prefer table-driven tests")
        hits = bank.recall("rewriting a large go file timed out", mode="vector", k=1)
        assert hits[0].lesson.id == lesson.id


def test_the_async_bank_recalls_by_vector_and_embeds(tmp_path: Path, embedder: ConceptEmbedder) -> None:
    from lessonbank import AsyncLessonBank

    async def run() -> None:
        async with AsyncLessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, embedder=embedder) as bank:
            assert bank.embedder is embedder
            lesson = await bank.add_lesson("freeze writes during a rollout", learned_from="ship the api")
            hits = await bank.recall("release", mode="vector", k=1)
            assert [h.lesson.id for h in hits] == [lesson.id]
            assert await bank.embed_missing() == 0

    asyncio.run(run())


def test_the_lexical_weight_comes_from_the_embedder_unless_set(tmp_path: Path) -> None:
    class Semantic(ConceptEmbedder):
        lexical_weight = 0.2

    with LessonBank(f"sqlite:///{tmp_path / 'a.db'}", worker=False, embedder=Semantic()) as bank:
        assert bank.retriever.lexical_weight == 0.2
    with LessonBank(f"sqlite:///{tmp_path / 'b.db'}", worker=False, embedder=ConceptEmbedder()) as bank:
        assert bank.retriever.lexical_weight == 0.4
    settings = Settings(home=tmp_path, hybrid_lexical_weight=0.7)
    with LessonBank(
        f"sqlite:///{tmp_path / 'c.db'}", worker=False, embedder=Semantic(), settings=settings
    ) as bank:
        assert bank.retriever.lexical_weight == 0.7
    with pytest.raises(ConfigError, match="LESSONBANK_HYBRID_LEXICAL_WEIGHT"):
        Settings(home=tmp_path, hybrid_lexical_weight=1.5)


@pytest.mark.parametrize("bad", [42, ["deploy"], "\udc80 broken"])
def test_a_bad_learned_from_is_an_input_error_and_nothing_is_stored(bank: LessonBank, bad: object) -> None:
    with pytest.raises(InputError, match="learned_from"):
        bank.add_lesson("keep PRs small", learned_from=bad)  # type: ignore[arg-type]
    assert bank.lessons() == []


def test_a_huge_learned_from_is_cut_to_its_limit(bank: LessonBank) -> None:
    from lessonbank.models import LEARNED_FROM_MAX_CHARS

    lesson = bank.add_lesson("keep PRs small", learned_from="refactor " * 2_000)
    assert 0 < len(lesson.learned_from or "") <= LEARNED_FROM_MAX_CHARS
