"""OpenAI-compatible chat models (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter).

One class covers every server that speaks ``POST /v1/chat/completions``; ``provider`` only
labels the model string and decides whether a real API key is required. The client's life, the
reply cap and the error mapping are :class:`~lessonbank.llm.sdk.SdkChat`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from lessonbank.llm.base import Completion, CompletionRequest, Usage
from lessonbank.llm.sdk import SdkChat, not_a_reply, status_error
from lessonbank.settings import DEFAULT_LLM_MAX_REPLY_BYTES

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

__all__ = ["OpenAIChat", "not_a_reply", "status_error"]


class OpenAIChat(SdkChat):
    """Chat model on the official ``openai`` SDK (``openai.AsyncOpenAI``)."""

    sdk = "openai"
    client_class = "AsyncOpenAI"
    vendor = "OpenAI"
    env_prefix = "OPENAI"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        provider: str = "openai",
        max_reply_bytes: int = DEFAULT_LLM_MAX_REPLY_BYTES,
    ) -> None:
        # Local servers ignore the key, but the SDK insists on one. OPENAI_API_KEY is read only for
        # provider "openai", so a real OpenAI key is never sent to some other server.
        super().__init__(
            model,
            provider=provider,
            base_url=base_url,
            api_key=api_key if provider == "openai" else (api_key or provider),
            timeout_s=timeout_s,
            max_reply_bytes=max_reply_bytes,
        )

    async def _send(self, client: Any, request: CompletionRequest) -> ChatCompletion:
        # Optional parameters go in only when set: local servers and reasoning models reject some
        # of them, and the server's defaults are the right ones when the caller has no preference.
        options: dict[str, Any] = {}
        if request.max_tokens is not None:
            options["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            options["temperature"] = request.temperature
        wire = cast(
            "list[ChatCompletionMessageParam]",
            [{"role": m["role"], "content": m["content"]} for m in request.messages],
        )
        return cast(
            "ChatCompletion",
            await client.chat.completions.create(model=self._model, messages=wire, **options),
        )

    def _read(self, response: ChatCompletion) -> Completion:
        text = response.choices[0].message.content if response.choices else None
        usage = response.usage
        return Completion(
            text=text or "",
            usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
            model=self.model,
        )
