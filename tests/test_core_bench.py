"""bench/core.py's banks with an embedder: hybrid recall timed, vectors cached, banks reused."""

from __future__ import annotations

from pathlib import Path

from bench import core

from lessonbank.retrieval import HashEmbedder

LESSONS = [
    {"content": f"check the {topic} before the release, lesson {n}", "tags": ["release"]}
    for n, topic in enumerate(["changelog", "migrations", "version number", "licence", "docs"] * 8)
]
QUERIES = [f"prepare the release of version {n}" for n in range(30)]


def test_banks_with_an_embedder_time_hybrid_recall_and_are_reused(tmp_path: Path) -> None:
    # The module core itself imports (bench/ is on sys.path), so isinstance checks agree.
    embedder = core._vectorcache.CachedEmbedder(HashEmbedder(), tmp_path / "vectors.sqlite")
    cache = tmp_path / "banks"

    first = core.bench_size(LESSONS, QUERIES, tmp_path / "w1", embedder=embedder, bank_cache=cache)
    assert first["recall"]["mode"] == "hybrid" and first["recall"]["n"] == len(QUERIES) - core.WARMUP_QUERIES
    assert first["recall"]["queries_with_hits"] == 1.0
    assert first["reused_bank"] is False and first["import"]["added"] == len(LESSONS)
    assert first["embedding"]["computed"] == len(LESSONS)

    second = core.bench_size(LESSONS, QUERIES, tmp_path / "w2", embedder=embedder, bank_cache=cache)
    assert second["reused_bank"] is True and "import" not in second
    assert second["embedded_before_timing"] == 0
    assert second["embedding"]["computed"] == 0

    targets = core.check_targets({"sizes": [first]})
    assert targets == []  # no import target with an embedder; the recall target is judged at 100k only


def test_without_an_embedder_the_bank_is_lexical_and_removed(tmp_path: Path) -> None:
    result = core.bench_size(LESSONS, QUERIES, tmp_path)
    assert result["recall"]["mode"] == "lexical" and result["embedder"] is None
    assert not list(tmp_path.glob("core-*.db*"))
    assert [t["name"] for t in core.check_targets({"sizes": [result]})] == ["import 40 (lessons/s)"]
