"""The redaction table: every real-world secret format is removed (recall 1.0), and no look-alike
(hashes, UUIDs, base64 that is not a secret, prose, code) is touched (no false positive)."""

from __future__ import annotations

import pytest

from lessonbank.redact import redact, redact_value
from tests.redaction_table import NEGATIVES, POSITIVES, dict_key_forms


def test_table_is_large_enough() -> None:
    assert len(POSITIVES) >= 50 and len(NEGATIVES) >= 30
    assert len({name for name, _, _ in POSITIVES}) == len(POSITIVES)


@pytest.mark.parametrize(
    ("line", "secret"), [(line, secret) for _, line, secret in POSITIVES], ids=[n for n, _, _ in POSITIVES]
)
def test_secret_is_removed(line: str, secret: str) -> None:
    out = redact(line)
    assert secret not in out, out
    assert redact(out) == out  # idempotent


@pytest.mark.parametrize("line", [line for _, line in NEGATIVES], ids=[n for n, _ in NEGATIVES])
def test_look_alike_is_kept(line: str) -> None:
    assert redact(line) == line


def test_recall_and_false_positive_rate() -> None:
    found = sum(secret not in redact(line) for _, line, secret in POSITIVES)
    false_positives = sum(redact(line) != line for _, line in NEGATIVES)
    assert (found / len(POSITIVES), false_positives / len(NEGATIVES)) == (1.0, 0.0)


@pytest.mark.parametrize(
    ("value", "secret"),
    [(value, secret) for _, value, secret in dict_key_forms()],
    ids=[name for name, _, _ in dict_key_forms()],
)
def test_secret_in_a_dict_key_is_removed(value: dict[str, str], secret: str) -> None:
    nested = {"outer": [value], **value}
    out = repr(redact_value(nested))
    assert secret not in out, out
    assert redact_value(redact_value(nested)) == redact_value(nested)


def test_ordinary_dict_keys_are_kept() -> None:
    value = {line: 1 for _, line in NEGATIVES} | {"api_key": "x", "token_count": 3}
    assert list(redact_value(value)) == list(value)


@pytest.mark.parametrize(
    ("line", "secret"),
    [(line, secret) for _, line, secret in POSITIVES if len(line) <= 64],
    ids=[name for name, line, _ in POSITIVES if len(line) <= 64],
)
def test_secret_in_a_lowercased_tag_is_removed(line: str, secret: str) -> None:
    """A record lowercases its tags, which hides formats that need capitals (AKIA…, NRAK-…); a
    redacted tag still fits the tag limit, and reading the record back redacts nothing more."""
    from lessonbank.models import Episode, Lesson
    from lessonbank.redact import redact_episode, redact_lesson

    for tags in (
        redact_episode(Episode(task="t", tags=[line])).tags,
        redact_lesson(Lesson(content="c", tags=[line])).tags,
    ):
        assert all(secret.lower() not in tag and len(tag) <= 64 for tag in tags), tags
        again = Episode(task="t", tags=tags).tags
        assert redact_episode(Episode(task="t", tags=again)).tags == again
