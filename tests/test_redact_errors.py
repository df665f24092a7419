"""Credentials never show in error text: log lines of every lessonbank logger, a job's last_error and
detail, provider errors (a base URL with user:password), and the CLI's error line."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from pathlib import Path

import pytest

from lessonbank import LessonBank, Settings
from lessonbank.errors import LLMError, LLMTransientError
from lessonbank.llm import FakeLLM, Message
from lessonbank.llm.anthropic import AnthropicChat
from lessonbank.llm.openai import OpenAIChat
from lessonbank.redact import SecretFilter

SRC = Path(__file__).resolve().parent.parent / "src" / "lessonbank"
PW = "Pr0xyPw9secret"
URL = f"http://proxyuser:{PW}@127.0.0.1:{{port}}/v1"
FAST = Settings.from_env(backoff_base_s=0.01, backoff_max_s=0.05, poll_interval_s=0.05, job_max_attempts=2)


def _logger_names() -> set[str]:
    names = {"lessonbank"}
    for path in SRC.rglob("*.py"):
        names.update(re.findall(r"getLogger\(\"(lessonbank[\w.]*)\"\)", path.read_text()))
    return names


@pytest.mark.parametrize("name", sorted(_logger_names()))
def test_every_lessonbank_logger_masks_credentials(name: str, caplog: pytest.LogCaptureFixture) -> None:
    import lessonbank.redact  # noqa: F401  (the filters are installed on import)

    logger = logging.getLogger(name)
    assert any(isinstance(f, SecretFilter) for f in logger.filters), name
    with caplog.at_level(logging.DEBUG, logger=name):
        logger.warning("could not reach %s: %s", URL.format(port=1), "refused")
        try:
            raise RuntimeError(f"boom at OPENAI_BASE_URL={URL.format(port=2)}")
        except RuntimeError:
            logger.exception("failed with password=%s", "hunter2xyz")
    text = caplog.text
    assert PW not in text and "hunter2xyz" not in text
    assert "could not reach http://proxyuser:" in text and "@127.0.0.1:1/v1: refused" in text


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("make", [OpenAIChat, AnthropicChat])
def test_provider_error_does_not_show_the_base_url_password(make: type) -> None:
    llm = make("m", base_url=URL.format(port=_dead_port()), api_key="k" * 24, timeout_s=2)
    with pytest.raises(LLMTransientError) as caught:
        asyncio.run(llm.complete([Message(role="user", content="hi")]))
    assert PW not in str(caught.value)
    assert "could not reach" in str(caught.value)


def test_job_last_error_and_log_mask_credentials(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    errors = [
        LLMTransientError(f"could not reach m at {URL.format(port=3)}: refused"),
        LLMError(f"401 for key sk-proj-{'Ab3Cd5Ef7Gh9Jk1Lm3No5Pq7'} via {URL.format(port=4)}"),
    ]
    with caplog.at_level(logging.WARNING), LessonBank(db_url, llm=FakeLLM(errors), settings=FAST) as bank:
        bank.record({"task": "deploy", "error": "boom"})
        assert bank.flush(timeout=10)
        (dead,) = bank.jobs(status="dead")
    assert dead.last_error and "401 for key" in dead.last_error
    for text in (dead.last_error, dead.detail or "", caplog.text):
        assert PW not in text and "Ab3Cd5Ef7Gh9Jk1Lm3No5Pq7" not in text


def test_cli_error_line_masks_the_db_password(cli) -> None:  # type: ignore[no-untyped-def]
    proc = cli("--db", "mysql://u:SecretPw9@h/db", "stats", ok=False)
    err = proc.stderr.decode()
    assert proc.returncode != 0 and err.startswith("error: ")
    assert "SecretPw9" not in err and "mysql://u:" in err


def test_cli_error_line_masks_a_redis_password(cli) -> None:  # type: ignore[no-untyped-def]
    url = f"redis://:Rd1s%2FPw9@127.0.0.1:{_dead_port()}/0?retry_s=0"
    proc = cli("--db", url, "stats", ok=False)
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Rd1s" not in err
