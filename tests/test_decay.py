"""Decay: the score and tier of each lesson (pure), ``bank.lessons(tier=...)`` on both facades, and
``lessonbank lessons --tier``."""

from __future__ import annotations

import asyncio
import json
import math
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lessonbank import AsyncLessonBank, LessonBank
from lessonbank.errors import InputError
from lessonbank.models import Lesson
from lessonbank.services import catalog
from lessonbank.services.consolidation.decay import (
    DECAY_RATE,
    KIND_WEIGHTS,
    TIERS,
    decay_score,
    lesson_tier,
    tier_of,
)

DAY = 86_400.0
NOW = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _lesson(days_old: float = 0.0, **fields: Any) -> Lesson:
    return Lesson(
        content="retry the upload with backoff", created_at=NOW - timedelta(days=days_old), **fields
    )


@pytest.mark.parametrize(
    ("lesson", "expected"),
    [
        pytest.param(_lesson(), 0.5, id="fresh: importance × 1 × 1 × log2(2)"),
        pytest.param(_lesson(30), 0.5 * math.exp(-0.9), id="30 days unused"),
        pytest.param(
            _lesson(30, access_count=1), 0.5 * math.exp(-0.9) * math.log2(3), id="30 days, used once"
        ),
        pytest.param(_lesson(0, access_count=6), 1.0, id="used 6 times: 0.5 × log2(8) capped"),
        pytest.param(_lesson(1000, pinned=True), 1.0, id="pinned never decays"),
        pytest.param(_lesson(1000, pinned=True, importance=0.1), 1.0, id="pinned, low importance"),
        pytest.param(_lesson(kind="insight"), 0.4, id="insight 0.8"),
        pytest.param(_lesson(kind="lesson"), 0.5, id="lesson 1.0"),
        pytest.param(_lesson(kind="principle"), 0.6, id="principle 1.2"),
        pytest.param(_lesson(kind="procedure"), 0.5, id="procedure 1.0"),
        pytest.param(_lesson(importance=1.0, kind="principle"), 1.0, id="cap: 1.2 becomes 1.0"),
        pytest.param(_lesson(importance=0.0), 0.0, id="no importance"),
        pytest.param(_lesson(-3), 0.5, id="created after the clock counts as now"),
    ],
)
def test_scores(lesson: Lesson, expected: float) -> None:
    assert decay_score(lesson, NOW) == pytest.approx(expected)


def test_weights_and_rate() -> None:
    assert KIND_WEIGHTS == {"insight": 0.8, "lesson": 1.0, "principle": 1.2, "procedure": 1.0}
    assert DECAY_RATE == 0.03
    assert TIERS == ("active", "fading", "dormant", "archive")


@pytest.mark.parametrize(
    ("score", "tier"),
    [
        (1.0, "active"),
        (0.5, "active"),
        (0.4999, "fading"),
        (0.2, "fading"),
        (0.1999, "dormant"),
        (0.05, "dormant"),
        (0.0499, "archive"),
        (0.0, "archive"),
    ],
)
def test_tier_boundaries(score: float, tier: str) -> None:
    assert tier_of(score) == tier


@pytest.mark.parametrize(("importance", "tier"), [(0.5, "active"), (0.2, "fading"), (0.05, "dormant")])
def test_a_fresh_lesson_on_a_floor_is_in_the_tier_above(importance: float, tier: str) -> None:
    lesson = _lesson(importance=importance)
    assert decay_score(lesson, NOW) == importance  # exactly: e^0 and log2(2) are exact
    assert lesson_tier(lesson, NOW) == tier
    # So an unused lesson at the default importance (0.5) is active only until the clock moves.
    assert lesson_tier(lesson, NOW + timedelta(seconds=1)) == TIERS[TIERS.index(tier) + 1]


def test_last_access_resets_the_clock_and_never_accessed_counts_from_creation() -> None:
    never = _lesson(60)
    used = _lesson(60, access_count=1, last_accessed=NOW - timedelta(days=1))
    assert decay_score(never, NOW) == pytest.approx(0.5 * math.exp(-1.8))
    assert decay_score(used, NOW) == pytest.approx(0.5 * math.exp(-0.03) * math.log2(3))
    assert (lesson_tier(never, NOW), lesson_tier(used, NOW)) == ("dormant", "active")
    assert lesson_tier(_lesson(200), NOW) == "archive"  # 0.5 × e^-6 ≈ 0.0012


def _tiered_bank(bank: LessonBank, clock: Clock) -> dict[str, list[str]]:
    """Five lessons left unused for 40 days (dormant: 0.5 × e^-1.2 ≈ 0.15), one pinned with them,
    one fresh at importance 0.3 (fading), two fresh at 0.8 (active). Ids per tier, newest first."""
    dormant = []
    for n in range(5):
        dormant.append(bank.add_lesson(f"old lesson number {n} about flaky uploads").id)
        clock.now += 1
    pinned = bank.add_lesson("always pin the schema version", pinned=True).id
    clock.now += 40 * DAY
    fading = bank.add_lesson("a minor habit worth keeping", importance=0.3).id
    clock.now += 1
    active = [bank.add_lesson(f"fresh lesson {n} on deploys", importance=0.8).id for n in range(2)]
    clock.now += 1
    return {
        "active": [*reversed(active), pinned],
        "fading": [fading],
        "dormant": list(reversed(dormant)),
        "archive": [],
    }


@pytest.mark.parametrize("db", ["sqlite", "memory"])
def test_bank_lists_a_tier_with_limit_and_offset(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catalog, "TIER_PAGE", 2)  # several store pages per listing
    url = f"sqlite:///{tmp_path / 'bank.db'}" if db == "sqlite" else "memory://"
    clock = Clock()
    with LessonBank(url, clock=clock) as bank:
        tiers = _tiered_bank(bank, clock)
        for tier, ids in tiers.items():
            assert [lesson.id for lesson in bank.lessons(tier=tier)] == ids, tier
        dormant = tiers["dormant"]
        assert [lesson.id for lesson in bank.lessons(tier="dormant", limit=2, offset=1)] == dormant[1:3]
        assert [lesson.id for lesson in bank.lessons(tier="dormant", limit=10, offset=4)] == dormant[4:]
        assert bank.lessons(tier="dormant", offset=5) == []
        assert bank.lessons(tier="dormant", limit=0) == []
        assert len(bank.lessons()) == 9  # no tier: every active-status lesson, as before
        assert bank.lessons(tier="active", status="archived") == []  # the status filter still applies

        # Using a lesson brings it back: a context block touches what it injects (used once, now).
        used = bank.context("old lesson number 3 about flaky uploads").lesson_ids
        assert dormant[1] in used
        assert set(used) <= {lesson.id for lesson in bank.lessons(tier="active")}
        assert [lesson.id for lesson in bank.lessons(tier="dormant")] == [i for i in dormant if i not in used]

        clock.now += 200 * DAY
        assert {lesson.id for lesson in bank.lessons(tier="archive")} == set(dormant) | {
            *tiers["fading"],
            *tiers["active"][:2],
        }
        assert [lesson.id for lesson in bank.lessons(tier="active")] == [tiers["active"][2]]  # pinned


def test_unknown_tier_is_refused_with_the_allowed_values(db_url: str) -> None:
    with LessonBank(db_url) as bank:
        with pytest.raises(
            InputError, match="unknown tier 'stale'; use one of active, fading, dormant, archive"
        ) as err:
            bank.lessons(tier="stale")
        assert err.value.field == "tier"
        with pytest.raises(InputError, match="limit"):
            bank.lessons(tier="active", limit=-1)


def test_async_bank_lists_a_tier(tmp_path: Path) -> None:
    clock = Clock()
    url = f"sqlite:///{tmp_path / 'bank.db'}"
    with LessonBank(url, clock=clock) as bank:
        tiers = _tiered_bank(bank, clock)

    async def run() -> list[str]:
        async with AsyncLessonBank(url, clock=clock) as bank:
            return [lesson.id for lesson in await bank.lessons(tier="dormant", limit=2, offset=1)]

    assert asyncio.run(run()) == tiers["dormant"][1:3]


def test_cli_lists_a_tier_with_decay_in_json(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    days_ago = 30.0
    with LessonBank(url, clock=lambda: time.time() - days_ago * DAY) as bank:
        old = bank.add_lesson("thirty days unused: fading").id
    with LessonBank(url) as bank:
        fresh = bank.add_lesson("written just now: active", importance=0.8).id

    fading = json.loads(cli("--db", url, "lessons", "--tier", "fading", "--json").stdout)
    assert [row["id"] for row in fading] == [old]
    assert fading[0]["tier"] == "fading"
    assert fading[0]["decay"] == pytest.approx(0.5 * math.exp(-0.9), abs=1e-3)
    rows = json.loads(cli("--db", url, "lessons", "--json").stdout)
    assert {row["id"]: row["tier"] for row in rows} == {old: "fading", fresh: "active"}
    table = cli("--db", url, "lessons", "--tier", "active").stdout.decode()
    assert fresh in table and old not in table

    bad = cli("--db", url, "lessons", "--tier", "stale", ok=False)
    assert bad.returncode == 2
    assert "use one of active, fading, dormant, archive" in bad.stderr.decode()
