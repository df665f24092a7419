"""OpenAIChat and AnthropicChat over real HTTP against a local server speaking each wire format.

The server runs in a thread on 127.0.0.1; every test points base_url (or OLLAMA_HOST) at it and
clears the provider env vars, so nothing here can reach the internet or pick up a real key.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lessonbank import LessonBank
from lessonbank.errors import ConfigError, LLMError, LLMReplyTooLargeError, LLMTransientError
from lessonbank.llm import LLM, Completion, Message, RetryingLLM, get_llm
from lessonbank.llm.anthropic import AnthropicChat
from lessonbank.llm.openai import OpenAIChat
from lessonbank.settings import Settings

API_KEY = "sk-test-0123456789abcdef"
MESSAGES: list[Message] = [
    {"role": "system", "content": "You distil lessons."},
    {"role": "user", "content": "What went wrong?"},
]


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | None = None  # None: the provider's normal success reply
    delay_s: float = 0.0
    # > 0: a success reply whose text is this many bytes, streamed in 64 KiB writes (never built whole),
    # with its Content-Length, or chunked without one.
    huge: int = 0
    chunked: bool = False


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeProvider:
    """What the server was asked, and what it should answer next (then 200s once the script runs out)."""

    url: str = ""
    sent_bytes: int = 0  # body bytes the server managed to write (huge replies)
    script: list[Reply] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(self, seen: Seen) -> Reply:
        with self.lock:
            self.seen.append(seen)
            return self.script.pop(0) if self.script else Reply()


def _openai_reply(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": request.get("model", "?"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Check the cache first."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }


def _anthropic_reply(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "?"),
        "content": [{"type": "text", "text": "Check the cache"}, {"type": "text", "text": " first."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 21, "output_tokens": 6},
    }


def _error_body(path: str, status: int) -> dict[str, Any]:
    # Echoes the key, as some servers do, to prove the error message scrubs it.
    message = f"error {status}: incorrect API key provided: {API_KEY}"
    if path.endswith("/messages"):
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def _make_handler(state: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            request = json.loads(raw or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = state.next_reply(Seen(self.path, headers, request))
            if reply.delay_s:
                state.release.wait(reply.delay_s)
            if reply.huge:
                self._send_huge(reply, request)
                return
            if reply.body is not None:
                body = reply.body
            elif reply.status != 200:
                body = _error_body(self.path, reply.status)
            elif self.path.endswith("/chat/completions"):
                body = _openai_reply(request)
            elif self.path.endswith("/messages"):
                body = _anthropic_reply(request)
            else:
                reply, body = Reply(404), {"error": {"message": f"no route {self.path}"}}
            data = json.dumps(body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (timeout test)

        def _send_huge(self, reply: Reply, request: dict[str, Any]) -> None:
            marker = "@@TEXT@@"
            if self.path.endswith("/messages"):
                shell = _anthropic_reply(request)
                shell["content"] = [{"type": "text", "text": marker}]
            else:
                shell = _openai_reply(request)
                shell["choices"][0]["message"]["content"] = marker
            head, tail = (part.encode() for part in json.dumps(shell).split(marker))
            block = b"x" * 65536
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                if reply.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(len(head) + reply.huge + len(tail)))
                self.end_headers()
                for part in (
                    head,
                    *([block] * (reply.huge // len(block))),
                    block[: reply.huge % len(block)],
                    tail,
                ):
                    if not part:
                        continue
                    if reply.chunked:
                        self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                    else:
                        self.wfile.write(part)
                    state.sent_bytes += len(part)
                if reply.chunked:
                    self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass  # the client stopped reading and closed the connection

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients closing idle connections are normal here


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_CUSTOM_HEADERS",
        "OLLAMA_HOST",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    state = FakeProvider()
    httpd = _QuietServer(("127.0.0.1", 0), _make_handler(state))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _openai(server: FakeProvider, **kwargs: Any) -> OpenAIChat:
    return OpenAIChat("gpt-4o-mini", base_url=f"{server.url}/v1", api_key=API_KEY, **kwargs)


def _anthropic(server: FakeProvider, **kwargs: Any) -> AnthropicChat:
    return AnthropicChat("claude-haiku-4-5", base_url=server.url, api_key=API_KEY, **kwargs)


def _make(provider: str, server: FakeProvider, **kwargs: Any) -> LLM:
    return _openai(server, **kwargs) if provider == "openai" else _anthropic(server, **kwargs)


def _sent_key(headers: dict[str, str]) -> str:
    """The API key as sent: older Anthropic SDKs use x-api-key, 2.x and OpenAI a Bearer token."""
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


def _run(llm: LLM, **kwargs: Any) -> Completion:
    return asyncio.run(llm.complete(MESSAGES, **kwargs))


PROVIDERS = ["openai", "anthropic"]


def test_openai_happy_path_sends_messages_and_reads_usage(server: FakeProvider) -> None:
    llm = _openai(server)
    result = _run(llm, max_tokens=200, temperature=0.2)

    assert result == Completion("Check the cache first.", usage=result.usage, model="openai:gpt-4o-mini")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (12, 5)
    [seen] = server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.body["model"] == "gpt-4o-mini"
    assert seen.body["messages"] == MESSAGES
    assert seen.body["max_tokens"] == 200
    assert seen.body["temperature"] == 0.2
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"


def test_openai_leaves_out_unset_options(server: FakeProvider) -> None:
    _run(_openai(server))

    [seen] = server.seen
    assert "max_tokens" not in seen.body
    assert "temperature" not in seen.body


def test_openai_missing_content_and_usage_become_empty(server: FakeProvider) -> None:
    body = _openai_reply({"model": "gpt-4o-mini"})
    body["choices"][0]["message"]["content"] = None
    del body["usage"]
    server.script.append(Reply(body=body))

    result = _run(_openai(server))

    assert result.text == ""
    assert (result.usage.input_tokens, result.usage.output_tokens) == (0, 0)


def test_anthropic_happy_path_splits_system_and_joins_text(server: FakeProvider) -> None:
    messages: list[Message] = [
        {"role": "system", "content": "You distil lessons."},
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What went wrong?"},
        {"role": "assistant", "content": "A stale cache."},
        {"role": "user", "content": "And the lesson?"},
    ]
    llm = _anthropic(server)
    result = asyncio.run(llm.complete(messages, temperature=0.2))

    assert result.text == "Check the cache first."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (21, 6)
    assert result.model == llm.model == "anthropic:claude-haiku-4-5"
    [seen] = server.seen
    assert seen.path == "/v1/messages"
    assert seen.body["system"] == "You distil lessons.\n\nAnswer briefly."
    assert seen.body["messages"] == [m for m in messages if m["role"] != "system"]
    assert seen.body["max_tokens"] == 1024
    assert "temperature" not in seen.body
    assert _sent_key(seen.headers) == API_KEY


def test_anthropic_passes_max_tokens_and_omits_empty_system(server: FakeProvider) -> None:
    asyncio.run(_anthropic(server).complete([{"role": "user", "content": "hi"}], max_tokens=77))

    [seen] = server.seen
    assert seen.body["max_tokens"] == 77
    assert "system" not in seen.body


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limit_is_retried_by_retrying_llm(provider: str, server: FakeProvider) -> None:
    server.script.append(Reply(429))
    llm = RetryingLLM(_make(provider, server), attempts=3, base_delay_s=0.01)

    result = _run(llm)

    assert result.text == "Check the cache first."
    assert len(server.seen) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_server_errors_exhaust_retries(provider: str, server: FakeProvider) -> None:
    server.script.extend([Reply(500)] * 3)
    llm = RetryingLLM(_make(provider, server), attempts=3, base_delay_s=0.01)

    with pytest.raises(LLMTransientError) as caught:
        _run(llm)

    assert caught.value.status_code == 500
    assert caught.value.provider == provider
    assert len(server.seen) == 3


def test_anthropic_overloaded_is_transient(server: FakeProvider) -> None:
    server.script.append(Reply(529))

    with pytest.raises(LLMTransientError) as caught:
        _run(_anthropic(server))

    assert caught.value.status_code == 529


@pytest.mark.parametrize("provider", PROVIDERS)
def test_bad_key_fails_at_once_without_leaking_it(provider: str, server: FakeProvider) -> None:
    server.script.append(Reply(401))
    llm = RetryingLLM(_make(provider, server), attempts=3, base_delay_s=0.01)

    with pytest.raises(LLMError) as caught:
        _run(llm)

    assert not isinstance(caught.value, LLMTransientError)
    assert caught.value.status_code == 401
    assert "API key" in str(caught.value)
    assert API_KEY not in str(caught.value)
    assert len(server.seen) == 1


def test_unknown_model_says_to_check_model_and_base_url(server: FakeProvider) -> None:
    server.script.append(Reply(404, body={"error": "model 'gpt-4o-mini' not found"}))

    with pytest.raises(LLMError) as caught:
        _run(_openai(server))

    assert not isinstance(caught.value, LLMTransientError)
    assert "model 'gpt-4o-mini' not found" in str(caught.value)
    assert "check the model name and the base_url" in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_slow_server_times_out_as_transient(provider: str, server: FakeProvider) -> None:
    server.script.append(Reply(delay_s=5.0))

    with pytest.raises(LLMTransientError, match=r"did not answer within 0\.2s"):
        _run(_make(provider, server, timeout_s=0.2))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unreachable_server_is_transient(provider: str) -> None:
    with socket.socket() as sock:  # a port nobody listens on once the socket closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = FakeProvider(url=f"http://127.0.0.1:{port}")

    with pytest.raises(LLMTransientError, match="could not reach"):
        _run(_make(provider, dead, timeout_s=2))


def test_get_llm_ollama_uses_ollama_host_and_no_openai_key(
    server: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", server.url.removeprefix("http://"))
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)  # must not be sent to a non-OpenAI server
    llm = get_llm("ollama:llama3.2")
    assert llm is not None

    result = _run(llm)

    assert llm.model == result.model == "ollama:llama3.2"
    [seen] = server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.body["model"] == "llama3.2"
    assert API_KEY not in seen.headers.get("authorization", "")


def test_get_llm_openai_with_base_url(server: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    llm = get_llm("openai:gpt-4o-mini", base_url=f"{server.url}/v1")
    assert llm is not None

    result = _run(llm)

    assert result.model == "openai:gpt-4o-mini"
    [seen] = server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"


def test_base_urls_come_from_env(server: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)

    _run(OpenAIChat("gpt-4o-mini"))
    _run(AnthropicChat("claude-haiku-4-5"))

    assert [s.path for s in server.seen] == ["/v1/chat/completions", "/v1/messages"]


def test_openai_without_key_is_a_config_error_when_called() -> None:
    llm = get_llm("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")  # opening needs no key
    assert llm is not None
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        asyncio.run(llm.complete(MESSAGES))


def test_anthropic_without_key_is_a_config_error_when_called() -> None:
    llm = AnthropicChat("claude-haiku-4-5", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        asyncio.run(llm.complete(MESSAGES))


def test_anthropic_without_sdk_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # makes `import anthropic` raise ImportError

    with pytest.raises(ConfigError, match=r"pip install 'lessonbank\[anthropic\]'"):
        AnthropicChat("claude-haiku-4-5", api_key=API_KEY)


# --- the reply cap ---------------------------------------------------------------------------------

TWENTY_MB = 20 * 1024 * 1024


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_20_mb_reply_is_refused_after_reading_at_most_the_cap(
    provider: str, chunked: bool, server: FakeProvider
) -> None:
    server.script.append(Reply(huge=TWENTY_MB, chunked=chunked))
    llm = RetryingLLM(_make(provider, server), attempts=3, base_delay_s=0.01)

    tracemalloc.start()
    try:
        with pytest.raises(LLMReplyTooLargeError) as caught:
            _run(llm)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    error = caught.value
    assert not isinstance(error, LLMTransientError)  # permanent: not retried
    assert len(server.seen) == 1
    assert error.provider == provider
    assert "over the 1,048,576-byte limit" in str(error) and "LESSONBANK_LLM_MAX_REPLY_BYTES" in str(error)
    assert len(str(error)) < 300 and API_KEY not in str(error)
    # Bounded: a few MB at most in memory (the body is 20 MB): the reply is read up to its cap only.
    assert peak < 6 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_replies_under_the_cap_pass_and_the_cap_is_per_provider(provider: str, server: FakeProvider) -> None:
    server.script.extend([Reply(huge=3000), Reply(huge=3000, chunked=True), Reply(huge=5000, chunked=True)])
    llm = _make(provider, server, max_reply_bytes=4096)

    assert len(_run(llm).text) == 3000
    assert len(_run(llm).text) == 3000
    with pytest.raises(LLMReplyTooLargeError, match="over the 4,096-byte limit"):
        _run(llm)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_oversized_error_page_is_not_read_either(provider: str, server: FakeProvider) -> None:
    server.script.append(Reply(status=500, huge=TWENTY_MB))

    with pytest.raises(LLMReplyTooLargeError):
        _run(_make(provider, server))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "1mb"])
def test_a_bad_cap_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_reply_bytes"):
        OpenAIChat("gpt-4o-mini", api_key=API_KEY, max_reply_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_reply_bytes"):
        get_llm("anthropic:claude-haiku-4-5", api_key=API_KEY, max_reply_bytes=bad)  # type: ignore[arg-type]


def test_the_cap_setting_reaches_the_banks_llm(server: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("LESSONBANK_LLM_MAX_REPLY_BYTES", "2048")
    server.script.extend([Reply(huge=1000), Reply(huge=3000)])
    with LessonBank("memory://", llm="openai:gpt-4o-mini", worker=False) as bank:
        assert bank.reflection_llm is not None
        assert len(asyncio.run(bank.reflection_llm.complete(MESSAGES)).text) == 1000
        with pytest.raises(LLMReplyTooLargeError, match="2,048-byte limit"):
            asyncio.run(bank.reflection_llm.complete(MESSAGES))
    with pytest.raises(ConfigError, match="LESSONBANK_LLM_MAX_REPLY_BYTES"):
        Settings.from_env({"LESSONBANK_LLM_MAX_REPLY_BYTES": "0"})


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_job_hit_by_a_20_mb_reply_is_dead_lettered_with_a_short_redacted_error(
    provider: str, server: FakeProvider, tmp_path: Path
) -> None:
    server.script.extend([Reply(huge=TWENTY_MB, chunked=True)] * 3)
    llm = RetryingLLM(_make(provider, server), attempts=3, base_delay_s=0.01)
    with LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", llm=llm) as bank:
        bank.record({"task": "deploy the api", "error": f"401 with key {API_KEY}"})
        assert bank.flush(timeout=20)
        [job] = bank.jobs()
        assert bank.lessons() == []
    assert job.status == "dead" and job.attempts == 1  # permanent: no second 20 MB reply asked for
    assert len(server.seen) == 1
    assert job.last_error is not None
    assert job.last_error.startswith("LLMReplyTooLargeError: ")
    assert "over the 1,048,576-byte limit" in job.last_error
    assert len(job.last_error) < 300 and API_KEY not in job.last_error
