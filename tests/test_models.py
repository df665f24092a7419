"""Record validation: size and UTF-8 limits with messages naming the field, tags, lessons, ids."""

from __future__ import annotations

import re
import time

import pytest
from pydantic import ValidationError

from lessonbank import models
from lessonbank.models import (
    EPISODE_MAX_BYTES,
    LESSON_MAX_CHARS,
    MAX_TAGS,
    TAG_MAX_CHARS,
    Episode,
    Lesson,
    Reflection,
    new_id,
)

MB2 = "x" * (2 * 1024 * 1024)


# --- size ------------------------------------------------------------------------------------------


def test_two_megabyte_task_is_refused_naming_task() -> None:
    with pytest.raises(ValidationError) as info:
        Episode(task=MB2)
    message = str(info.value)
    assert "field 'task'" in message
    assert "1024 KiB" in message
    assert "summarise" in message


def test_big_output_is_named_not_the_task() -> None:
    with pytest.raises(ValidationError) as info:
        Episode(task="t" * 300_000, output="o" * 900_000)
    message = str(info.value)
    assert "field 'output'" in message
    assert "field 'task'" not in message


def test_big_metadata_is_named() -> None:
    with pytest.raises(ValidationError, match="field 'metadata'"):
        Episode(task="t", metadata={"log": "l" * (EPISODE_MAX_BYTES + 10)})


def test_limit_is_on_the_total_not_one_field() -> None:
    third = "a" * (EPISODE_MAX_BYTES // 3 + 100)
    with pytest.raises(ValidationError, match="episode is"):
        Episode(task=third, attempt=third, output=third)


def test_limit_counts_utf8_bytes() -> None:
    # 600k two-byte characters: under the limit in characters, over it in bytes.
    with pytest.raises(ValidationError, match="field 'output'"):
        Episode(task="t", output="é" * 600_000)


def test_episode_just_under_the_limit_is_accepted() -> None:
    episode = Episode(task="t", output="o" * (EPISODE_MAX_BYTES - 10_000))
    assert len(episode.output or "") == EPISODE_MAX_BYTES - 10_000


# --- UTF-8 -------------------------------------------------------------------------------------------


def test_lone_surrogate_in_task_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        Episode(task="bad \udcff")
    message = str(info.value)
    assert "task is not valid UTF-8" in message
    assert "position 4" in message


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"error": "boom \udc80"}, "error"),
        ({"output": "\ud800 out"}, "output"),
        ({"metadata": {"log": "x\udcff"}}, "metadata.log"),
        ({"actions": ["ok", "\udcfe"]}, "actions[1]"),
        ({"verification": [{"tool": "pytest", "stderr": "E\udcff"}]}, "verification[0].stderr"),
    ],
)
def test_lone_surrogate_anywhere_is_refused_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(f"{field} is not valid UTF-8")):
        Episode(task="fine", **kwargs)  # type: ignore[arg-type]


def test_lone_surrogate_in_lesson_content_is_refused() -> None:
    with pytest.raises(ValidationError, match="content is not valid UTF-8"):
        Lesson(content="use \udcff patch")


def test_valid_non_ascii_text_is_accepted() -> None:
    episode = Episode(task="réparer le fichier 日本語 😀")
    assert episode.task == "réparer le fichier 日本語 😀"


# --- task, status, ranges, literals ------------------------------------------------------------------


@pytest.mark.parametrize("task", ["", "   ", "\n\t  \n"])
def test_empty_or_blank_task_is_refused(task: str) -> None:
    with pytest.raises(ValidationError, match="task is empty"):
        Episode(task=task)


def test_task_is_required() -> None:
    with pytest.raises(ValidationError, match="task"):
        Episode()  # type: ignore[call-arg]


def test_status_is_inferred_from_error() -> None:
    assert Episode(task="t", error="timeout").status == "failure"
    assert Episode(task="t").status == "success"
    assert Episode(task="t", error="").status == "success"
    assert Episode(task="t", error="timeout", status=None).status == "failure"  # type: ignore[arg-type]


def test_explicit_status_wins_over_inference() -> None:
    assert Episode(task="t", error="flaky warning", status="partial").status == "partial"
    assert Episode(task="t", status="failure").status == "failure"


@pytest.mark.parametrize("reward", [-0.01, 1.01, 2, -1])
def test_reward_out_of_range_is_refused(reward: float) -> None:
    with pytest.raises(ValidationError, match="reward"):
        Episode(task="t", reward=reward)


@pytest.mark.parametrize("reward", [0.0, 0.5, 1.0])
def test_reward_in_range_is_accepted(reward: float) -> None:
    assert Episode(task="t", reward=reward).reward == reward


def test_negative_duration_is_refused() -> None:
    with pytest.raises(ValidationError, match="duration_s"):
        Episode(task="t", duration_s=-1)


def test_unknown_signal_is_refused() -> None:
    with pytest.raises(ValidationError, match="signals"):
        Episode(task="t", signals=["hallucination", "vibes"])  # type: ignore[list-item]


def test_known_signals_are_accepted() -> None:
    assert Episode(task="t", signals=["hallucination", "low_quality"]).signals == [
        "hallucination",
        "low_quality",
    ]


def test_unknown_field_is_refused() -> None:
    with pytest.raises(ValidationError, match="taks"):
        Episode(task="t", taks="typo")  # type: ignore[call-arg]


# --- tags ----------------------------------------------------------------------------------------------


def test_tags_are_normalised_and_deduped_in_order() -> None:
    episode = Episode(task="t", tags=[" Go ", "go", "Large   File", "", "  ", "large file", "GO", "refactor"])
    assert episode.tags == ["go", "large file", "refactor"]


def test_lesson_tags_are_normalised_too() -> None:
    assert Lesson(content="c", tags=["Reflexion", "reflexion ", "Trigger:Error"]).tags == [
        "reflexion",
        "trigger:error",
    ]


def test_too_many_tags_are_refused() -> None:
    with pytest.raises(ValidationError, match=f"{MAX_TAGS + 1} tags given; the limit is {MAX_TAGS}"):
        Episode(task="t", tags=[f"tag{i}" for i in range(MAX_TAGS + 1)])


def test_tag_limit_counts_distinct_tags() -> None:
    tags = [f"tag{i}" for i in range(MAX_TAGS)]
    assert Episode(task="t", tags=tags + [t.upper() for t in tags]).tags == tags


def test_oversized_tag_is_refused() -> None:
    with pytest.raises(ValidationError, match=f"the limit is {TAG_MAX_CHARS}"):
        Episode(task="t", tags=["a" * (TAG_MAX_CHARS + 1)])
    assert Episode(task="t", tags=["a" * TAG_MAX_CHARS]).tags == ["a" * TAG_MAX_CHARS]


# --- lessons -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "   ", "\n\n"])
def test_lesson_with_empty_content_is_refused(content: str) -> None:
    with pytest.raises(ValidationError, match="content is empty"):
        Lesson(content=content)


def test_lesson_content_over_the_limit_is_refused() -> None:
    with pytest.raises(
        ValidationError, match=f"{LESSON_MAX_CHARS + 1} chars; the limit is {LESSON_MAX_CHARS}"
    ):
        Lesson(content="c" * (LESSON_MAX_CHARS + 1))


def test_lesson_content_at_the_limit_is_accepted_and_stripped() -> None:
    lesson = Lesson(content="  " + "c" * LESSON_MAX_CHARS + "\n")
    assert lesson.content == "c" * LESSON_MAX_CHARS


@pytest.mark.parametrize("field", ["importance", "confidence"])
def test_lesson_scores_are_bounded(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Lesson(content="c", **{field: 1.5})  # type: ignore[arg-type]


def test_lesson_kind_is_checked() -> None:
    with pytest.raises(ValidationError, match="kind"):
        Lesson(content="c", kind="rumour")  # type: ignore[arg-type]


def test_reflection_status_is_checked() -> None:
    with pytest.raises(ValidationError, match="status"):
        Reflection(episode_id="ep_1", reflector="lesson", status="maybe")  # type: ignore[arg-type]


# --- ids -------------------------------------------------------------------------------------------------


def test_ids_have_prefix_and_fixed_length() -> None:
    assert Episode(task="t").id.startswith("ep_")
    assert Lesson(content="c").id.startswith("les_")
    ident = new_id("x")
    assert len(ident) == 2 + 26
    assert set(ident[2:]) <= set("0123456789abcdefghjkmnpqrstvwxyz")


def test_ids_are_unique() -> None:
    ids = [new_id("les") for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    assert len({Episode(task="t").id for _ in range(200)}) == 200


def test_ids_sort_by_creation_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(
        [1_600_000_000.000, 1_600_000_000.001, 1_600_000_000.5, 1_700_000_000.0, 1_800_000_123.456, 2e9]
    )
    monkeypatch.setattr(models.time, "time", lambda: next(clock))
    ids = [new_id("les") for _ in range(6)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 6


def test_ids_made_later_sort_later() -> None:
    first = new_id("ep")
    time.sleep(0.003)
    second = new_id("ep")
    assert first < second


def test_id_digits_are_the_values_crockford_base32(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 26 digits are the 130-bit value (time in ms, then 80 random bits), 5 bits a digit, most
    significant first, in Crockford's alphabet."""
    for stamp, noise in [
        (0.0, bytes(10)),
        (1_700_000_000.123, bytes(range(10))),
        (2**47 / 1000, b"\xff" * 10),
    ]:
        monkeypatch.setattr(models.time, "time", lambda stamp=stamp: stamp)
        monkeypatch.setattr(models.os, "urandom", lambda size, noise=noise: noise)
        value = (int(stamp * 1000) << 80) | int.from_bytes(noise, "big")
        digits = "".join(
            "0123456789abcdefghjkmnpqrstvwxyz"[(value >> (5 * (25 - i))) & 31] for i in range(26)
        )
        assert new_id("les") == f"les_{digits}"
