"""Secret redaction: every kind of secret goes, the text around it and ordinary prose stay."""

from __future__ import annotations

import copy

import pytest

from lessonbank.redact import redact, redact_value

OPENAI_PROJ = "sk-proj-" + "Xy7Kq2Lm9Np4Rs6Tv8Wz1Ab3Cd5Ef7Gh9_Jk-Lm"
OPENAI_LEGACY = "sk-" + "T3BlbkFJ" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
ANTHROPIC = "sk-ant-api03-" + "Zq9Xw8Ve7Ut6Sr5Qp4On3Ml2Kj1Ih0Gf_Ed-Cb" + "AAAA"
AWS = "AKIAIOSFODNN7EXAMPLE"
AWS_TEMP = "ASIAY34FZKBOKMUTVV7A"
GITHUB_PAT = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
GITHUB_FINE = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
BEARER = "abcDEF1234567890xyzTOKENvalue"
PEM_BODY = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nZ1BjP5CE8Wx9LmN0pQrStUvWxYzAbCdEfGhIjKl"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"

assert len(GOOGLE) == 39  # real Google API keys are 39 characters


# (text, secret that must disappear, pieces of the surrounding text that must stay)
CASES = {
    "openai project key": (
        f"request failed: invalid key {OPENAI_PROJ} (check billing)",
        OPENAI_PROJ,
        ["request failed: invalid key ", " (check billing)"],
    ),
    "openai legacy key": (
        f"OPENAI_API_KEY={OPENAI_LEGACY}\nnext line",
        OPENAI_LEGACY,
        ["OPENAI_API_KEY=", "next line"],
    ),
    "anthropic key": (f"using {ANTHROPIC} for claude", ANTHROPIC, ["using ", " for claude"]),
    "aws access key id": (f"aws_access_key_id = {AWS} in ~/.aws", AWS, ["aws_access_key_id", " in ~/.aws"]),
    "aws temporary key id": (f"temp creds {AWS_TEMP} expired", AWS_TEMP, ["temp creds ", " expired"]),
    "aws secret in assignment": (
        "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY done",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ["aws_secret_access_key=", " done"],
    ),
    "github classic token": (
        f"git push failed with {GITHUB_PAT}.",
        GITHUB_PAT,
        ["git push failed with ", "."],
    ),
    "github fine-grained token": (f"token={GITHUB_FINE} ok", GITHUB_FINE, [" ok"]),
    "slack token": (f"posting with {SLACK} to #ops", SLACK, ["posting with ", " to #ops"]),
    "google api key": (f"maps?key={GOOGLE}&q=paris", GOOGLE, ["maps?key=", "&q=paris"]),
    "jwt": (f"cookie session={JWT}; Path=/", JWT, ["cookie session=", "; Path=/"]),
    "bearer token": (
        f"curl -H 'Authorization: Bearer {BEARER}' https://api.example.com/v1",
        BEARER,
        ["curl -H 'Authorization: Bearer ", "' https://api.example.com/v1"],
    ),
    "lowercase bearer token": (f"sent bearer {BEARER} upstream", BEARER, ["sent bearer ", " upstream"]),
    "authorization header": (
        "Authorization: 9f8e7d6c5b4a39281706abcd\nContent-Type: json",
        "9f8e7d6c5b4a39281706abcd",
        ["Authorization", "\nContent-Type: json"],
    ),
    "x-api-key header": (
        "x-api-key: live_0123456789abcdef, retrying",
        "live_0123456789abcdef",
        ["x-api-key", ", retrying"],
    ),
    "pem private key": (
        f"key file:\n{PEM}\nthen it failed",
        PEM_BODY[:20],
        ["key file:\n", "\nthen it failed"],
    ),
    "openssh private key": (
        "before -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY----- after",
        "b3BlbnNzaC1rZXktdjEAAAAA",
        ["before ", " after"],
    ),
    "password=": ("login with password=hunter2 failed", "hunter2", ["login with password=", " failed"]),
    "passwd:": ("passwd: s3cr3t!x then exit", "s3cr3t!x", ["passwd:", " then exit"]),
    "json api_key": (
        '{"api_key": "abcd1234", "model": "gpt"}',
        "abcd1234",
        ['{"api_key": ', ', "model": "gpt"}'],
    ),
    "single-quoted client_secret": (
        "client_secret = 'my secret phrase' # prod",
        "my secret phrase",
        ["client_secret = ", " # prod"],
    ),
    "env SECRET_TOKEN": ("SECRET_TOKEN: xyz987abc\nDEBUG=1", "xyz987abc", ["SECRET_TOKEN:", "\nDEBUG=1"]),
    "url credentials": (
        "connect to postgres://admin:s3cr3tP4ss@db.internal:5432/app failed",
        "s3cr3tP4ss",
        ["connect to postgres://", "@db.internal:5432/app failed"],
    ),
    "https url credentials": (
        "git clone https://bot:ghs0123abc@github.com/org/repo.git",
        "ghs0123abc",
        ["git clone https://", "@github.com/org/repo.git"],
    ),
}


@pytest.mark.parametrize(("text", "secret", "kept"), list(CASES.values()), ids=list(CASES))
def test_secret_is_removed_and_surroundings_kept(text: str, secret: str, kept: list[str]) -> None:
    out = redact(text)
    assert secret not in out
    assert "[REDACTED:" in out
    for piece in kept:
        assert piece in out, (piece, out)


@pytest.mark.parametrize(("text", "secret", "kept"), list(CASES.values()), ids=list(CASES))
def test_redact_is_idempotent(text: str, secret: str, kept: list[str]) -> None:
    once = redact(text)
    assert redact(once) == once


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"k {OPENAI_PROJ}", "openai-key"),
        (f"k {ANTHROPIC}", "anthropic-key"),
        (f"k {AWS}", "aws-key"),
        (f"k {GITHUB_PAT}", "github-token"),
        (f"k {SLACK}", "slack-token"),
        (f"k {GOOGLE}", "google-key"),
        (f"k {JWT}", "jwt"),
        (f"Bearer {BEARER}", "bearer"),
        (PEM, "private-key"),
        ("https://u:p4ssw0rd@h", "url-credentials"),
    ],
)
def test_marker_names_the_kind(text: str, kind: str) -> None:
    assert f"[REDACTED:{kind}]" in redact(text)


def test_anthropic_key_is_not_reported_as_openai() -> None:
    assert redact(ANTHROPIC) == "[REDACTED:anthropic-key]"


def test_truncated_private_key_without_end_is_removed() -> None:
    text = f"dumped config:\n-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\nMIIBVgIBADANBgkqhkiG9w0BAQEFAASCAUAw"
    out = redact(text)
    assert out.startswith("dumped config:\n")
    assert "[REDACTED:private-key]" in out
    assert "MIIE" not in out and "MIIB" not in out


def test_several_secrets_in_one_text() -> None:
    text = f"a={AWS} b={GITHUB_PAT} c={SLACK} password=hunter2"
    out = redact(text)
    for secret in (AWS, GITHUB_PAT, SLACK, "hunter2"):
        assert secret not in out
    assert out.count("[REDACTED:") == 4


def test_basic_auth_header_credentials_are_removed() -> None:
    out = redact("curl -H 'Authorization: Basic dXNlcjpodW50ZXIyLXNlY3JldA==' https://api")
    assert "dXNlcjpodW50ZXIyLXNlY3JldA" not in out


PROSE = [
    "The password was wrong, so the login test failed.",
    "Stay within the token budget of 4000 tokens per turn.",
    "The secret sauce is caching the parsed AST between runs.",
    "Reset the password and try again; the API key rotation is weekly.",
    "Authorization failed because the user lacks the admin role.",
    "Use bearer tokens for service-to-service calls.",
    "Each token is roughly four characters of English text.",
    "Keep secrets out of the repository; read them from the environment.",
    "See https://docs.example.com/auth/keys for key management.",
    "Skip the sk- prefix check when the key is empty.",
    "The PRIVATE KEY section of the docs explains rotation.",
    "refactor pkg/engine: extract Close() and add tests (>1000 lines)",
]


@pytest.mark.parametrize("text", PROSE)
def test_ordinary_prose_is_not_mangled(text: str) -> None:
    assert redact(text) == text


def test_empty_text_is_returned_unchanged() -> None:
    assert redact("") == ""


def test_redact_value_walks_nested_structures() -> None:
    value = {
        "task": "deploy",
        "env": {"DB_PASSWORD": "x", "note": f"uses {AWS}"},
        "steps": ["ok", {"cmd": f"curl -H 'Authorization: Bearer {BEARER}'"}, [f"{GITHUB_PAT}"]],
        "count": 3,
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
    }
    original = copy.deepcopy(value)
    out = redact_value(value)
    assert value == original  # input left untouched
    assert out["task"] == "deploy"
    assert AWS not in out["env"]["note"] and out["env"]["note"].startswith("uses ")
    assert BEARER not in out["steps"][1]["cmd"]
    assert out["steps"][2] == ["[REDACTED:github-token]"]
    assert out["steps"][0] == "ok"
    assert (out["count"], out["ratio"], out["flag"], out["nothing"]) == (3, 0.5, True, None)
    assert set(out) == set(value) and set(out["env"]) == {"DB_PASSWORD", "note"}


def test_redact_value_on_scalars() -> None:
    assert redact_value(f"key {OPENAI_PROJ}") == "key [REDACTED:openai-key]"
    assert redact_value(42) == 42
    assert redact_value(None) is None
