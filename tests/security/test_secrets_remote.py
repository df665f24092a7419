"""A RemoteBank's errors never show the password of the server URL it was given: not in the message,
not in the traceback, whether the server is out of reach, answers garbage or the URL is refused."""

from __future__ import annotations

import asyncio
import traceback

import httpx
import pytest

from lessonbank.errors import ConfigError, StoreError
from lessonbank.remote import AsyncRemoteBank, RemoteBank

PASSWORD = "S3cretPw" + "9xQ2"
UNREACHABLE = f"http://admin:{PASSWORD}@127.0.0.1:1"  # port 1: refused at once, never the internet


def _shown(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def test_unreachable_server_error_hides_the_url_password() -> None:
    bank = RemoteBank(UNREACHABLE, timeout=5)
    with pytest.raises(StoreError) as caught:
        bank.stats()
    bank.close()
    assert "cannot reach the lessonbank server at http://admin:" in str(caught.value)
    assert "127.0.0.1:1" in str(caught.value)
    assert PASSWORD not in _shown(caught.value)


def test_unreachable_server_error_hides_the_url_password_async() -> None:
    async def stats() -> None:
        bank = AsyncRemoteBank(UNREACHABLE, timeout=5)
        try:
            await bank.stats()
        finally:
            await bank.close()

    with pytest.raises(StoreError) as caught:
        asyncio.run(stats())
    assert PASSWORD not in _shown(caught.value)


def test_odd_password_is_hidden_too() -> None:
    odd = "p%40ss%2Fw0rd%3AQ9"  # "p@ss/w0rd:Q9" as a URL carries it, percent-encoded
    bank = RemoteBank(f"http://admin:{odd}@127.0.0.1:1", timeout=5)
    with pytest.raises(StoreError) as caught:
        bank.stats()
    bank.close()
    assert "w0rd" not in str(caught.value)


def test_a_non_json_answer_hides_the_url_password() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(502, text="bad gateway"))
    with httpx.Client(transport=transport) as client:
        bank = RemoteBank(f"http://admin:{PASSWORD}@lessonbank.invalid", client=client)
        with pytest.raises(StoreError) as caught:
            bank.stats()
    assert "502" in str(caught.value)
    assert PASSWORD not in _shown(caught.value)


def test_a_refused_url_hides_its_password() -> None:
    with pytest.raises(ConfigError) as caught:
        RemoteBank(f"ftp://admin:{PASSWORD}@files.invalid")
    assert "ftp://admin:" in str(caught.value)
    assert PASSWORD not in _shown(caught.value)
