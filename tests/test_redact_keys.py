"""Dict values are redacted by the key's name too: a password under ``"password"`` goes whatever it looks like."""

from __future__ import annotations

from pathlib import Path

import pytest

from lessonbank import LessonBank
from lessonbank.redact import is_secret_key, redact_value

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWORD",
        "db_password",
        "DB-PASSWORD",
        "dbPassword",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "client_secret",
        "AWS_SECRET_ACCESS_KEY",
        "token",
        "access_token",
        "refreshToken",
        "api_key",
        "API-KEY",
        "apiKey",
        "apikey",
        "access_key",
        "private_key",
        "privateKey",
        "credentials",
        "credential",
        "auth",
        "authorization",
        "Proxy-Authorization",
        "cookie",
        "set-cookie",
        "session_token",
        "signing_key",
        "encryption_key",
        "connection_string",
        "dsn",
    ],
)
def test_secret_key_names(key: str) -> None:
    assert is_secret_key(key)
    assert redact_value({key: "plainlooking"}) == {key: "[REDACTED:secret]"}


@pytest.mark.parametrize(
    "key",
    [
        "task",
        "author",
        "authored_by",
        "tokens_in",
        "max_tokens",
        "token_count",
        "tokenizer",
        "secretary",
        "keyboard",
        "key",
        "monkey",
        "password_policy",
        "auth_method",
        "passed",
        "description",
    ],
)
def test_ordinary_key_names(key: str) -> None:
    assert not is_secret_key(key)
    assert redact_value({key: "plainlooking"}) == {key: "plainlooking"}


def test_numbers_and_nested_values_under_a_secret_key_go() -> None:
    out = redact_value(
        {"pin": 1, "password": 123456, "credentials": {"user": "bob", "pass": "x"}, "auth": ["a", "b"]}
    )
    assert out["password"] == "[REDACTED:secret]"
    assert out["credentials"] == {"user": "[REDACTED:secret]", "pass": "[REDACTED:secret]"}
    assert out["auth"] == ["[REDACTED:secret]", "[REDACTED:secret]"]
    assert out["pin"] == 1


def test_empty_none_and_bool_values_stay() -> None:
    value = {"password": "", "token": None, "secret": True}
    assert redact_value(value) == value


def test_episode_metadata_keys_are_redacted_in_store_and_show(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    with LessonBank(f"sqlite:///{path}") as bank:
        episode = bank.record(
            {
                "task": "deploy",
                "metadata": {"password": "metaDictPw777", "env": {"AWS_SECRET_ACCESS_KEY": AWS_SECRET}},
            }
        )
        assert episode.metadata == {
            "password": "[REDACTED:secret]",
            "env": {"AWS_SECRET_ACCESS_KEY": "[REDACTED:secret]"},
        }
        lesson = bank.add_lesson("rotate keys", tags=["ops"])
        bank.import_lessons([{"content": "imported lesson", "metadata": {"apiKey": "metaDictPw888"}}])
        exported = bank.export("json")
    raw = path.read_bytes()
    for secret in ("metaDictPw777", AWS_SECRET, "metaDictPw888"):
        assert secret.encode() not in raw
        assert secret not in exported
    assert lesson.content == "rotate keys"
