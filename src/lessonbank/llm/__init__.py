"""LLM providers behind one protocol, resolved from a model string in one place.

``get_llm("openai:gpt-4o-mini")``, ``get_llm("ollama:llama3.2")``, ``get_llm("anthropic:claude-haiku-4-5")``,
``get_llm("fake")``; an LLM instance passes through unchanged.
"""

from __future__ import annotations

import json
import os

from lessonbank.errors import ConfigError
from lessonbank.llm.base import LLM, Completion, Message, Usage
from lessonbank.llm.fake import FakeCall, FakeLLM
from lessonbank.llm.retry import RetryingLLM
from lessonbank.settings import DEFAULT_LLM_MAX_REPLY_BYTES

__all__ = ["LLM", "Completion", "FakeCall", "FakeLLM", "Message", "RetryingLLM", "Usage", "get_llm"]

DEFAULT_OLLAMA_URL = "http://localhost:11434/v1"


def get_llm(
    spec: str | LLM | None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 60.0,
    retries: int = 3,
    max_reply_bytes: int = DEFAULT_LLM_MAX_REPLY_BYTES,
) -> LLM | None:
    """Resolve ``provider:model`` to an LLM, wrapped to retry transient errors.

    Providers: ``openai`` (any OpenAI-compatible endpoint; ``base_url`` or ``OPENAI_BASE_URL``
    points it elsewhere), ``ollama`` (local Ollama, ``OLLAMA_HOST`` to move it), ``anthropic``
    (needs ``lessonbank[anthropic]``), ``fake`` (scripted replies from ``LESSONBANK_FAKE_REPLIES``,
    a JSON list, for demos and CLI tests; ``LESSONBANK_FAKE_DELAY_S`` makes each reply take that long).
    ``None`` or ``""`` means no LLM. A provider's reply is read up to ``max_reply_bytes``
    (past that, :class:`~lessonbank.errors.LLMReplyTooLargeError`).
    """
    if spec is None or spec == "":
        return None
    if not isinstance(spec, str):
        if isinstance(spec, LLM):
            return spec
        raise ConfigError(
            f"llm must be a 'provider:model' string or an LLM object, got {type(spec).__name__}"
        )
    provider, _, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider == "fake":
        return FakeLLM(_fake_replies(), delay_s=_fake_delay(), model=f"fake:{model or 'scripted'}")
    if not model:
        raise ConfigError(
            f"llm {spec!r} names no model; write it as 'provider:model', e.g. 'openai:gpt-4o-mini'"
        )
    inner: LLM
    if provider == "openai":
        from lessonbank.llm.openai import OpenAIChat

        inner = OpenAIChat(
            model, base_url=base_url, api_key=api_key, timeout_s=timeout_s, max_reply_bytes=max_reply_bytes
        )
    elif provider == "ollama":
        from lessonbank.llm.openai import OpenAIChat

        url = base_url or _ollama_url()
        inner = OpenAIChat(
            model,
            base_url=url,
            api_key=api_key or "ollama",
            timeout_s=timeout_s,
            provider="ollama",
            max_reply_bytes=max_reply_bytes,
        )
    elif provider == "anthropic":
        from lessonbank.llm.anthropic import AnthropicChat

        inner = AnthropicChat(
            model, base_url=base_url, api_key=api_key, timeout_s=timeout_s, max_reply_bytes=max_reply_bytes
        )
    else:
        raise ConfigError(
            f"unknown LLM provider {provider!r} in {spec!r}; use openai:, ollama:, anthropic: or fake"
        )
    return RetryingLLM(inner, attempts=retries)


def _ollama_url() -> str:
    host = os.environ.get("OLLAMA_HOST", "").strip()
    if not host:
        return DEFAULT_OLLAMA_URL
    if not host.startswith(("http://", "https://")):
        host = f"http://{host}"
    return host.rstrip("/") + "/v1"


def _fake_replies() -> list[str]:
    raw = os.environ.get("LESSONBANK_FAKE_REPLIES", "").strip()
    if not raw:
        return []
    try:
        replies = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"LESSONBANK_FAKE_REPLIES is not JSON: {exc}") from None
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        raise ConfigError("LESSONBANK_FAKE_REPLIES must be a JSON list of strings")
    return replies


def _fake_delay() -> float:
    raw = os.environ.get("LESSONBANK_FAKE_DELAY_S", "").strip()
    if not raw:
        return 0.0
    try:
        delay = float(raw)
    except ValueError:
        raise ConfigError(f"LESSONBANK_FAKE_DELAY_S must be a number of seconds, got {raw!r}") from None
    if not 0 <= delay < float("inf"):
        raise ConfigError(f"LESSONBANK_FAKE_DELAY_S must be 0 or more seconds, got {raw!r}")
    return delay
