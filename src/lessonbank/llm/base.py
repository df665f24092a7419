"""The LLM protocol: messages in, text and token usage out.

Built-in implementations:

- :class:`lessonbank.llm.openai.OpenAIChat` — any OpenAI-compatible endpoint (OpenAI, Ollama,
  vLLM, llama.cpp server, LM Studio, OpenRouter) through the official ``openai`` SDK.
- :class:`lessonbank.llm.anthropic.AnthropicChat` — Anthropic's Messages API (``lessonbank[anthropic]``).
- :class:`lessonbank.llm.fake.FakeLLM` — scripted replies for tests and demos.

The built-in ones derive from :class:`ChatModel`, which packs ``complete``'s arguments into one
:class:`CompletionRequest` and hands it to ``request``. Cross-cutting behaviour wraps the same
protocol: :class:`lessonbank.llm.retry.RetryingLLM` retries transient provider errors.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, TypeVar, runtime_checkable

from lessonbank.errors import ConfigError

T = TypeVar("T")


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage
    model: str


@runtime_checkable
class LLM(Protocol):
    """A chat model. Implementations raise LLMTransientError for failures worth retrying."""

    @property
    def model(self) -> str:
        """Name of the model, as recorded on each reflection (e.g. ``openai:gpt-4o-mini``)."""
        ...

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Send the conversation and return the reply text with its token usage."""
        ...


@dataclass(frozen=True)
class CompletionRequest:
    """One call to :meth:`LLM.complete`: the conversation and the caller's sampling options
    (``None`` leaves the choice to the provider)."""

    messages: Sequence[Message]
    max_tokens: int | None = None
    temperature: float | None = None

    async def send(self, llm: LLM) -> Completion:
        """This request, made of ``llm`` (any implementation of the protocol)."""
        return await llm.complete(self.messages, max_tokens=self.max_tokens, temperature=self.temperature)


class ChatModel(ABC):
    """Base of the built-in LLMs: :meth:`complete` is :meth:`request` with one :class:`CompletionRequest`."""

    @property
    @abstractmethod
    def model(self) -> str:
        """Name of the model, as recorded on each reflection (e.g. ``openai:gpt-4o-mini``)."""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        return await self.request(CompletionRequest(messages, max_tokens, temperature))

    @abstractmethod
    async def request(self, request: CompletionRequest) -> Completion:
        """Send ``request`` and return the reply text with its token usage."""


def resolve_api_key(given: str | None, env_var: str, *, provider: str, model: str) -> str:
    """The API key passed in, else ``env_var``; looked up at call time so a bank can be opened
    (and record episodes, whose reflections wait in the queue) before the key is set."""
    key = given or os.environ.get(env_var, "").strip()
    if not key:
        raise ConfigError(
            f"no {provider} API key for model {model!r}: set the {env_var} environment variable or pass api_key=..."
        )
    return key


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, also when the caller is inside an event loop."""
    import asyncio  # here: a process that only recalls never loads asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
