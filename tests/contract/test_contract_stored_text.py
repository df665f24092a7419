"""Store contract: what a model or a tool wrote is stored cut to its cap, with a visible marker, on every
backend (a 20 MB model reply must not make a 20 MB reflection row)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lessonbank import LessonBank
from lessonbank.llm import FakeLLM
from lessonbank.models import (
    JOB_TEXT_MAX_CHARS,
    MODEL_TEXT_MAX_CHARS,
    SKIP_REASON_MAX_CHARS,
    Reflection,
    truncated,
)
from lessonbank.stores import Store
from tests.contract.conftest import Clock
from tests.contract.test_contract_jobs import A, job

TWENTY_MB = 20 * 1024 * 1024


def _cut(text: str | None, limit: int) -> None:
    assert text is not None
    assert len(text) <= limit
    assert text.endswith(" chars]") and "…[truncated " in text


def test_a_20_mb_reflection_is_stored_cut_to_its_caps(store: Store, clock: Clock) -> None:
    made = job(clock)
    store.enqueue_job(made)
    assert store.lease_job(A, None, 60) is not None
    huge = "r" * TWENTY_MB
    reflection = Reflection(
        episode_id=made.episode_id or "",
        job_id=made.id,
        reflector="lesson",
        status="skipped",
        skip_reason="s" * 50_000,
        raw_output=huge,
        parsed={"situation": huge, "tags": ["t" * 100_000, "ok"], "nested": {"why": huge}, "n": 3},
    )
    store.finish_job(made.id, A, reflection=reflection, lessons=[], detail="skipped")

    stored = store.get_reflection(reflection.id)
    _cut(stored.raw_output, MODEL_TEXT_MAX_CHARS)
    assert stored.raw_output.startswith("r" * 1000)
    _cut(stored.skip_reason, SKIP_REASON_MAX_CHARS)
    _cut(stored.parsed["situation"], MODEL_TEXT_MAX_CHARS)
    _cut(stored.parsed["nested"]["why"], MODEL_TEXT_MAX_CHARS)
    _cut(stored.parsed["tags"][0], MODEL_TEXT_MAX_CHARS)
    assert stored.parsed["tags"][1] == "ok" and stored.parsed["n"] == 3
    assert len(stored.model_dump_json()) < 5 * MODEL_TEXT_MAX_CHARS  # not 20 MB


def test_long_job_errors_and_details_are_stored_cut(store: Store, clock: Clock) -> None:
    long_text = "Traceback (most recent call last):\n" + "  frame\n" * 200_000
    for key, move in (
        ("fail", lambda j: store.fail_job(j, A, error=long_text, retry_at=None)),
        ("retry", lambda j: store.fail_job(j, A, error=long_text, retry_at=clock.now + 60)),
        ("park", lambda j: store.park_job(j, A, detail=long_text)),
        ("done", lambda j: store.finish_job(j, A, reflection=None, lessons=[], detail=long_text)),
    ):
        made = job(clock, key)
        store.enqueue_job(made)
        leased = store.lease_job(A, None, 60)
        assert leased is not None and leased.id == made.id
        move(made.id)
        stored = store.get_job(made.id)
        text = stored.last_error if key in ("fail", "retry") else stored.detail
        _cut(text, JOB_TEXT_MAX_CHARS)
        assert text == truncated(long_text, JOB_TEXT_MAX_CHARS)
        assert stored.model_copy() == store.list_jobs("default", [stored.status])[0]
    made = job(clock, "exact")  # text at the cap is kept as written
    store.enqueue_job(made)
    assert store.lease_job(A, None, 60) is not None
    store.fail_job(made.id, A, error="e" * JOB_TEXT_MAX_CHARS, retry_at=None)
    assert store.get_job(made.id).last_error == "e" * JOB_TEXT_MAX_CHARS


@pytest.fixture
def bank_on(store_url: str, clock: Clock) -> Iterator[LessonBank]:
    reply = "<situation>" + "x" * (4 * 1024 * 1024) + "</situation><correction>use the cache</correction>"
    with LessonBank(store_url, llm=FakeLLM([reply]), clock=clock) as bank:
        yield bank


def test_a_4_mb_model_reply_makes_a_small_reflection_row(bank_on: LessonBank) -> None:
    bank_on.record({"task": "deploy the api", "error": "cache miss storm"})
    assert bank_on.flush(timeout=60)
    [job_done] = bank_on.jobs()
    [stored] = bank_on.store.reflections_for_episode(job_done.episode_id or "")
    _cut(stored.raw_output, MODEL_TEXT_MAX_CHARS)
    assert len(stored.model_dump_json()) < 5 * MODEL_TEXT_MAX_CHARS


def test_nul_characters_are_dropped_and_everything_else_is_stored(store_url: str) -> None:
    """A NUL in a docstring or a tool's output: PostgreSQL cannot hold it in text, so no store keeps
    it; the lesson and the episode are stored whole otherwise, on every backend, and an import of a
    batch holding one writes every lesson."""
    from lessonbank import Episode, Settings

    settings = Settings.from_env(backoff_base_s=0.01, backoff_max_s=0.05, poll_interval_s=0.05)
    with LessonBank(store_url, settings=settings, worker=False) as bank:
        added = bank.import_lessons(
            [
                {"content": f"lesson {n}: pad the magic number with \x00 bytes", "tags": ["bin\x00ary"]}
                for n in range(3)
            ]
        )
        assert added["added"] == 3 and added["skipped"] == 0
        assert all("\x00" not in item.content and item.tags == ["binary"] for item in bank.lessons())
        assert bank.add_lesson("strip \x00 before hashing", learned_from="read \x00 bytes").content == (
            "strip  before hashing"
        )
        episode = bank.record(
            Episode(task="parse a \x00-terminated string", status="failure", output="out\x00put")
        )
        stored, _ = bank.store.get_episode(episode.id)
        assert stored.task == "parse a -terminated string" and stored.output == "output"
